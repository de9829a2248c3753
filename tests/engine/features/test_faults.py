"""Fault injection: injected errors (as botocore sees them), latency, stale reads, provisioned
throughput enforcement and crash points in a real server process."""

from __future__ import annotations

import functools
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, ConnectionClosedError, EndpointConnectionError

from firstwrite.engine.api import Engine
from firstwrite.engine.binding.sync import local_client
from firstwrite.engine.features.faults.injector import CRASH_EXIT_CODE, ERRORS

KEY = [{"AttributeName": "pk", "KeyType": "HASH"}]
ATTRS = [{"AttributeName": "pk", "AttributeType": "S"}]
PTEE = "ProvisionedThroughputExceededException"


class Faults:
    """Add and clear faults in process (``engine.faults``) or over the admin HTTP API."""

    def __init__(self, engine: Engine | None = None, url: str | None = None) -> None:
        self.engine = engine
        self.url = url

    def add(self, kind: str, **spec: Any) -> dict[str, Any]:
        if self.engine is not None:
            return self.engine.faults.add(kind, **spec).describe()
        response = httpx.post(f"{self.url}/_firstwrite/faults", json={"kind": kind, **spec})
        assert response.status_code == 201, response.text
        return response.json()["fault"]  # type: ignore[no-any-return]

    def listed(self) -> list[dict[str, Any]]:
        if self.engine is not None:
            return self.engine.faults.describe()["faults"]  # type: ignore[no-any-return]
        return httpx.get(f"{self.url}/_firstwrite/faults").json()["faults"]  # type: ignore[no-any-return]

    def clear(self) -> None:
        if self.engine is not None:
            self.engine.faults.clear()
        else:
            assert httpx.delete(f"{self.url}/_firstwrite/faults").status_code == 200

    def clock(self, **body: Any) -> None:
        if self.engine is not None:
            if body.get("reset"):
                self.engine.clock.reset()
            if body.get("freeze"):
                self.engine.clock.freeze()
            if "advance" in body:
                self.engine.clock.advance(body["advance"])
        else:
            assert httpx.post(f"{self.url}/_firstwrite/clock", json=body).status_code == 200


@pytest.fixture(params=["inprocess", "http"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def faults(transport: str, request: pytest.FixtureRequest) -> Iterator[Faults]:
    if transport == "inprocess":
        control = Faults(engine=request.getfixturevalue("engine"))
    else:
        control = Faults(url=request.getfixturevalue("http_server").url)
    yield control
    control.clear()
    control.clock(reset=True)


@pytest.fixture
def client(transport: str, make_ddb: Callable[..., Any], table_name: str) -> Any:
    ddb = make_ddb(transport)
    ddb.create_table(
        TableName=table_name,
        KeySchema=KEY,
        AttributeDefinitions=ATTRS,
        BillingMode="PAY_PER_REQUEST",
    )
    return ddb


def put(client: Any, table: str, pk: str, value: str = "v") -> None:
    client.put_item(TableName=table, Item={"pk": {"S": pk}, "v": {"S": value}})


def error_of(call: Callable[[], Any]) -> ClientError:
    with pytest.raises(ClientError) as caught:
        call()
    return caught.value


# --- off by default, free when off -----------------------------------------------------------


def test_nothing_is_installed_until_a_fault_is_added(engine: Engine) -> None:
    assert engine.hooks.interceptors == []
    hooks_before = list(engine.hooks.change_hooks)
    engine.faults.stale_reads(5, table="t")
    engine.faults.crash("before_commit", operation="PutItem")
    assert len(engine.hooks.interceptors) == 1
    assert len(engine.hooks.change_hooks) == len(hooks_before) + 2
    engine.faults.clear()
    assert engine.hooks.interceptors == []
    assert engine.hooks.change_hooks == hooks_before
    # A counted fault uninstalls itself once used up.
    client = local_client(engine, config=Config(retries={"total_max_attempts": 1}))
    client.create_table(
        TableName="counted",
        KeySchema=KEY,
        AttributeDefinitions=ATTRS,
        BillingMode="PAY_PER_REQUEST",
    )
    engine.faults.throttle(operation="PutItem", count=1)
    error_of(lambda: put(client, "counted", "a"))
    assert engine.hooks.interceptors == [] and engine.faults.active() == []
    put(client, "counted", "b")


# --- injected errors, exactly as DynamoDB sends them ----------------------------------------


def test_next_n_calls_are_throttled(faults: Faults, client: Any, table_name: str) -> None:
    faults.add("error", code=PTEE, operation="PutItem", table=table_name, count=2)
    for _ in range(2):
        error = error_of(lambda: put(client, table_name, "a"))
        assert error.response["Error"]["Code"] == PTEE
        assert error.response["Error"]["Message"] == ERRORS[PTEE]
        assert error.response["ResponseMetadata"]["HTTPStatusCode"] == 400
        [reason] = error.response["ThrottlingReasons"]
        assert reason["reason"] == "TableWriteProvisionedThroughputExceeded"
        assert reason["resource"].endswith(f":table/{table_name}")
    put(client, table_name, "a")  # the third call goes through
    assert faults.listed() == []  # used up


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("ThrottlingException", 400),
        ("RequestLimitExceeded", 400),
        ("TransactionConflictException", 400),
        ("InternalServerError", 500),
    ],
)
def test_injected_error_codes_and_statuses(
    faults: Faults, client: Any, table_name: str, code: str, status: int
) -> None:
    faults.add("error", code=code, table=table_name, operation="GetItem", count=1)
    error = error_of(lambda: client.get_item(TableName=table_name, Key={"pk": {"S": "x"}}))
    assert error.response["Error"]["Code"] == code
    assert error.response["Error"]["Message"] == ERRORS[code]
    assert error.response["ResponseMetadata"]["HTTPStatusCode"] == status
    # botocore raises the modeled exception class where DynamoDB models one.
    if code != "ThrottlingException":
        assert isinstance(error, getattr(client.exceptions, code))


def test_scope_by_operation_table_and_region(
    faults: Faults, client: Any, table_name: str, make_ddb: Callable[..., Any], transport: str
) -> None:
    faults.add(
        "error",
        code="InternalServerError",
        operation="PutItem",
        table=table_name,
        region="us-east-1",
    )
    client.get_item(TableName=table_name, Key={"pk": {"S": "a"}})  # other operation
    other = make_ddb(transport, region_name="eu-west-1")
    other.create_table(
        TableName=table_name,
        KeySchema=KEY,
        AttributeDefinitions=ATTRS,
        BillingMode="PAY_PER_REQUEST",
    )
    put(other, table_name, "a")  # other region
    assert error_of(lambda: put(client, table_name, "a")).response["Error"]["Code"] == (
        "InternalServerError"
    )


def test_seeded_rate_is_deterministic(engine: Engine) -> None:
    client = local_client(engine, config=Config(retries={"total_max_attempts": 1}))
    client.create_table(
        TableName="rated", KeySchema=KEY, AttributeDefinitions=ATTRS, BillingMode="PAY_PER_REQUEST"
    )

    def pattern() -> list[bool]:
        engine.faults.clear()
        engine.faults.throttle(code="ThrottlingException", operation="GetItem", rate=0.3, seed=42)
        hits = []
        for _ in range(60):
            try:
                client.get_item(TableName="rated", Key={"pk": {"S": "a"}})
                hits.append(False)
            except ClientError:
                hits.append(True)
        return hits

    first, second = pattern(), pattern()
    assert first == second
    assert 5 < sum(first) < 40


def test_standard_retries_absorb_a_throttle_and_one_attempt_surfaces_it(
    faults: Faults, transport: str, make_ddb: Callable[..., Any], table_name: str
) -> None:
    retrying = make_ddb(transport, config=Config(retries={"mode": "standard", "max_attempts": 3}))
    retrying.create_table(
        TableName=table_name,
        KeySchema=KEY,
        AttributeDefinitions=ATTRS,
        BillingMode="PAY_PER_REQUEST",
    )
    faults.add("error", code=PTEE, operation="PutItem", table=table_name, count=1)
    response = retrying.put_item(TableName=table_name, Item={"pk": {"S": "a"}})
    assert response["ResponseMetadata"]["RetryAttempts"] == 1
    faults.add("error", code="InternalServerError", operation="PutItem", table=table_name, count=1)
    response = retrying.put_item(TableName=table_name, Item={"pk": {"S": "b"}})
    assert response["ResponseMetadata"]["RetryAttempts"] == 1

    # In a botocore Config, max_attempts counts *retries*: max_attempts=1 still retries once.
    one_retry = make_ddb(transport, config=Config(retries={"mode": "standard", "max_attempts": 1}))
    faults.add("error", code="ThrottlingException", operation="PutItem", table=table_name, count=1)
    response = one_retry.put_item(TableName=table_name, Item={"pk": {"S": "c"}})
    assert response["ResponseMetadata"]["RetryAttempts"] == 1
    # One attempt in all (total_max_attempts=1, or AWS_MAX_ATTEMPTS=1): the throttle surfaces.
    once = make_ddb(transport, config=Config(retries={"mode": "standard", "total_max_attempts": 1}))
    faults.add("error", code="ThrottlingException", operation="PutItem", table=table_name, count=1)
    error = error_of(lambda: once.put_item(TableName=table_name, Item={"pk": {"S": "c2"}}))
    assert error.response["Error"]["Code"] == "ThrottlingException"
    assert error.response["ResponseMetadata"]["RetryAttempts"] == 0

    # Never retried, by any mode: a transaction conflict reaches the caller at once.
    faults.add(
        "error", code="TransactionConflictException", operation="PutItem", table=table_name, count=1
    )
    error = error_of(lambda: retrying.put_item(TableName=table_name, Item={"pk": {"S": "d"}}))
    assert error.response["Error"]["Code"] == "TransactionConflictException"
    assert error.response["ResponseMetadata"]["RetryAttempts"] == 0


# --- latency ---------------------------------------------------------------------------------


def test_latency_fixed_and_range(faults: Faults, client: Any, table_name: str) -> None:
    fault = faults.add("latency", latency=0.2, operation="GetItem", table=table_name)
    started = time.monotonic()
    client.get_item(TableName=table_name, Key={"pk": {"S": "a"}})
    assert time.monotonic() - started >= 0.2
    put(client, table_name, "a")  # other operations are not delayed (no lower bound to check)
    assert fault["latency"] == {"min": 0.2, "max": 0.2}
    faults.clear()
    ranged = faults.add("latency", latency=[0.05, 0.1], operation="GetItem", seed=1)
    started = time.monotonic()
    client.get_item(TableName=table_name, Key={"pk": {"S": "a"}})
    assert time.monotonic() - started >= 0.05
    assert ranged["latency"] == {"min": 0.05, "max": 0.1}


# --- stale reads -----------------------------------------------------------------------------


def test_eventually_consistent_reads_lag_behind(
    faults: Faults, client: Any, table_name: str
) -> None:
    faults.clock(freeze=True)
    faults.add("stale_read", lag=10, table=table_name)
    put(client, table_name, "a", "v1")
    put(client, table_name, "gone", "here")

    def item(pk: str, consistent: bool) -> str | None:
        got = client.get_item(
            TableName=table_name, Key={"pk": {"S": pk}}, ConsistentRead=consistent
        ).get("Item")
        return None if got is None else str(got["v"]["S"])

    # Written just now: an eventually consistent read does not see it yet.
    assert item("a", consistent=False) is None
    assert item("a", consistent=True) == "v1"
    faults.clock(advance=20)
    assert item("a", consistent=False) == "v1"
    put(client, table_name, "a", "v2")
    client.delete_item(TableName=table_name, Key={"pk": {"S": "gone"}})
    put(client, table_name, "new", "fresh")
    assert item("a", consistent=False) == "v1"
    assert item("gone", consistent=False) == "here"
    assert item("a", consistent=True) == "v2"

    scanned = client.scan(TableName=table_name)["Items"]
    assert sorted((i["pk"]["S"], i["v"]["S"]) for i in scanned) == [("a", "v1"), ("gone", "here")]
    strong = client.scan(TableName=table_name, ConsistentRead=True)["Items"]
    assert sorted(i["pk"]["S"] for i in strong) == ["a", "new"]
    queried = client.query(
        TableName=table_name,
        KeyConditionExpression="pk = :a",
        ExpressionAttributeValues={":a": {"S": "a"}},
    )["Items"]
    assert [i["v"]["S"] for i in queried] == ["v1"]

    faults.clock(advance=10)  # the lag has passed: caught up
    assert item("a", consistent=False) == "v2"
    assert item("gone", consistent=False) is None
    assert sorted(i["pk"]["S"] for i in client.scan(TableName=table_name)["Items"]) == ["a", "new"]


# --- provisioned throughput ------------------------------------------------------------------


def provisioned(client: Any, name: str, read: int = 1, write: int = 1) -> None:
    client.create_table(
        TableName=name,
        KeySchema=KEY,
        AttributeDefinitions=ATTRS,
        ProvisionedThroughput={"ReadCapacityUnits": read, "WriteCapacityUnits": write},
    )


def test_throughput_is_not_enforced_by_default(engine: Engine) -> None:
    client = local_client(engine, config=Config(retries={"total_max_attempts": 1}))
    provisioned(client, "lenient")
    engine.faults.enforce_throughput(False, burst_seconds=1)
    engine.clock.freeze()
    for i in range(5):
        put(client, "lenient", str(i))
    assert not engine.faults.enforcing_throughput


def test_provisioned_throughput_token_buckets(tmp_path: Any) -> None:
    with Engine(tmp_path / "enforced.db", enforce_throughput=True) as engine:
        client = local_client(engine, config=Config(retries={"total_max_attempts": 1}))
        provisioned(client, "tight", read=2, write=1)
        client.create_table(
            TableName="on-demand",
            KeySchema=KEY,
            AttributeDefinitions=ATTRS,
            BillingMode="PAY_PER_REQUEST",
        )
        engine.clock.freeze()
        # DynamoDB's burst: 300 seconds of unused capacity, and a new bucket starts full.
        for i in range(300):
            put(client, "tight", f"k{i}")
        error = error_of(lambda: put(client, "tight", "over"))
        assert error.response["Error"]["Code"] == PTEE
        assert error.response["ResponseMetadata"]["HTTPStatusCode"] == 400
        assert error.response["ThrottlingReasons"] == [
            {
                "reason": "TableWriteProvisionedThroughputExceeded",
                "resource": "arn:aws:dynamodb:us-east-1:000000000000:table/tight",
            }
        ]
        engine.clock.advance(1)  # one second refills one write unit
        put(client, "tight", "refilled")
        error_of(lambda: put(client, "tight", "over again"))
        for i in range(400):  # on-demand tables are never throttled by the buckets
            put(client, "on-demand", str(i))

        # Charged by consumed units: a 3 KB item costs 3 write units.
        engine.faults.enforce_throughput(True, burst_seconds=4)  # 4 units, full again
        big = "x" * 3000
        put(client, "tight", "big", big)
        response = client.put_item(TableName="tight", Item={"pk": {"S": "small"}})
        assert "ConsumedCapacity" not in response  # not asked for: not shown
        error_of(lambda: put(client, "tight", "third"))

        # Reads: 2 RCU x 4 s = 8 units; an eventually consistent small read costs 0.5.
        for _ in range(16):
            client.get_item(TableName="tight", Key={"pk": {"S": "k1"}})
        error = error_of(lambda: client.get_item(TableName="tight", Key={"pk": {"S": "k1"}}))
        assert error.response["ThrottlingReasons"][0]["reason"] == (
            "TableReadProvisionedThroughputExceeded"
        )
        asked = client.put_item  # ReturnConsumedCapacity still answered when asked for
        engine.clock.advance(10)
        response = asked(
            TableName="tight", Item={"pk": {"S": "asked"}}, ReturnConsumedCapacity="TOTAL"
        )
        assert response["ConsumedCapacity"] == {"TableName": "tight", "CapacityUnits": 1.0}


# --- hot partitions ---------------------------------------------------------------------------

HOT_KEY_MESSAGE = (
    "Throughput exceeds the current capacity of your table or index. DynamoDB is automatically "
    "scaling your table or index so please try again shortly. If exceptions persist, check if "
    "you have a hot key: "
    "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html"
)


def key_range(table: str, side: str = "Write") -> list[dict[str, str]]:
    return [
        {
            "reason": f"Table{side}KeyRangeThroughputExceeded",
            "resource": f"arn:aws:dynamodb:us-east-1:000000000000:table/{table}",
        }
    ]


def test_one_partition_past_dynamodbs_ceiling_is_throttled_alone(tmp_path: Any) -> None:
    with Engine(tmp_path / "hot.db", enforce_throughput=True) as engine:
        client = local_client(engine, config=Config(retries={"total_max_attempts": 1}))
        client.create_table(
            TableName="on-demand",
            KeySchema=KEY,
            AttributeDefinitions=ATTRS,
            BillingMode="PAY_PER_REQUEST",
        )
        provisioned(client, "roomy", read=10_000, write=10_000)
        engine.clock.freeze()
        # 1,000 WCU per second per partition: a thousand small writes of one key, then throttled.
        for i in range(1000):
            put(client, "on-demand", "tenant-1", str(i))
        error = error_of(lambda: put(client, "on-demand", "tenant-1"))
        assert error.response["Error"]["Code"] == "ThrottlingException"
        assert error.response["Error"]["Message"] == HOT_KEY_MESSAGE
        assert error.response["throttlingReasons"] == key_range("on-demand")
        assert error.response["ResponseMetadata"]["HTTPStatusCode"] == 400
        put(client, "on-demand", "tenant-2")  # the table's other keys pass
        # Nor may a batch or a transaction write the hot key.
        error = error_of(
            lambda: client.batch_write_item(
                RequestItems={
                    "on-demand": [
                        {"PutRequest": {"Item": {"pk": {"S": "tenant-3"}}}},
                        {"PutRequest": {"Item": {"pk": {"S": "tenant-1"}}}},
                    ]
                }
            )
        )
        assert error.response["Error"]["Code"] == "ThrottlingException"
        engine.clock.advance(1)  # the partition's second is over
        put(client, "on-demand", "tenant-1", "again")

        # A PROVISIONED table with capacity to spare says ProvisionedThroughputExceeded, with
        # the key-range reason. Transactional writes cost 2 units: 500 fill the second.
        for i in range(500):
            client.transact_write_items(
                TransactItems=[
                    {"Put": {"TableName": "roomy", "Item": {"pk": {"S": "q"}, "n": {"N": str(i)}}}}
                ]
            )
        error = error_of(lambda: put(client, "roomy", "q"))
        assert error.response["Error"]["Code"] == PTEE
        assert error.response["ThrottlingReasons"] == key_range("roomy")
        # Reads have their own ceiling, 3,000 RCU: a consistent read of a 12 KB item costs 3.
        put(client, "roomy", "big", "x" * 12_000)
        for _ in range(1000):
            client.get_item(TableName="roomy", Key={"pk": {"S": "big"}}, ConsistentRead=True)
        error = error_of(
            lambda: client.get_item(
                TableName="roomy", Key={"pk": {"S": "big"}}, ConsistentRead=True
            )
        )
        assert error.response["ThrottlingReasons"] == key_range("roomy", "Read")

    # Without enforcement no partition is ever throttled.
    with Engine(tmp_path / "lenient.db") as engine:
        client = local_client(engine, config=Config(retries={"total_max_attempts": 1}))
        client.create_table(
            TableName="lenient",
            KeySchema=KEY,
            AttributeDefinitions=ATTRS,
            BillingMode="PAY_PER_REQUEST",
        )
        engine.clock.freeze()
        for i in range(1100):
            put(client, "lenient", "tenant-1", str(i))


def test_a_hot_key_fault(faults: Faults, client: Any, table_name: str) -> None:
    # Every matching call to one partition, count-limited.
    fault = faults.add("hot_key", table=table_name, key="tenant-1", count=2)
    assert fault["key"] == "tenant-1" and fault["remaining"] == 2
    for _ in range(2):
        error = error_of(lambda: put(client, table_name, "tenant-1"))
        assert error.response["Error"]["Code"] == "ThrottlingException"
        assert error.response["throttlingReasons"] == [
            {
                "reason": "TableWriteKeyRangeThroughputExceeded",
                "resource": f"arn:aws:dynamodb:us-east-1:000000000000:table/{table_name}",
            }
        ]
        put(client, table_name, "tenant-2")
    put(client, table_name, "tenant-1")
    assert faults.listed() == []

    # A ceiling for one key, per second of engine clock.
    faults.clock(freeze=True)
    fault = faults.add("hot_key", table=table_name, key="tenant-1", units=3)
    assert fault["units"] == 3
    for i in range(3):
        put(client, table_name, "tenant-1", str(i))
    error = error_of(lambda: put(client, table_name, "tenant-1"))
    assert error.response["throttlingReasons"][0]["reason"] == (
        "TableWriteKeyRangeThroughputExceeded"
    )
    # Reads have a bucket of their own: 3 units, 0.5 per eventually consistent small read.
    read = functools.partial(client.get_item, TableName=table_name, Key={"pk": {"S": "tenant-1"}})
    for _ in range(6):
        read()
    error = error_of(read)
    assert error.response["throttlingReasons"][0]["reason"] == (
        "TableReadKeyRangeThroughputExceeded"
    )
    for i in range(10):
        put(client, table_name, "tenant-2", str(i))
    faults.clock(advance=1)
    put(client, table_name, "tenant-1", "refilled")
    faults.clear()

    # A ceiling for every partition of the table: spread keys pass, a repeated one does not.
    faults.add("hot_key", table=table_name, units=2)
    for i in range(10):
        put(client, table_name, f"order-{i}")
    put(client, table_name, "queue")
    put(client, table_name, "queue")
    error_of(lambda: put(client, table_name, "queue"))


def test_hot_key_fault_arguments(engine: Engine, http_server: Any) -> None:
    with pytest.raises(ValueError, match="key="):
        engine.faults.add("hot_key", table="t")
    with pytest.raises(ValueError, match="AttributeValue"):
        engine.faults.add("hot_key", key={"S": "a", "N": "1"})
    with pytest.raises(ValueError, match="without count"):
        engine.faults.add("hot_key", key="a", units=5, count=1)
    with pytest.raises(ValueError, match="hot_key"):
        engine.faults.add("error", code=PTEE, key="a")
    assert engine.faults.hot_key({"N": "7"}, units=1).describe()["key"] == {"N": "7"}
    response = httpx.post(f"{http_server.url}/_firstwrite/faults", json={"kind": "hot_key"})
    assert response.status_code == 400 and "key=" in response.json()["detail"]


# --- crash points in a real server process ---------------------------------------------------


@pytest.mark.parametrize(("point", "lands"), [("after_commit", True), ("before_commit", False)])
def test_crash_points(
    cli_server: Callable[..., Any],
    tmp_path: Any,
    point: str,
    lands: bool,
    make_ddb: Callable[..., Any],
) -> None:
    import boto3

    from firstwrite.engine.binding.sync import dummy_session

    db = tmp_path / "crash.db"
    server = cli_server(db_path=db)

    def client_for(url: str) -> Any:
        session = boto3.session.Session(botocore_session=dummy_session("us-east-1"))
        return session.client(
            "dynamodb",
            region_name="us-east-1",
            endpoint_url=url,
            config=Config(retries={"total_max_attempts": 1}, read_timeout=20),
        )

    ddb = client_for(server.url)
    ddb.create_table(
        TableName="crashy", KeySchema=KEY, AttributeDefinitions=ATTRS, BillingMode="PAY_PER_REQUEST"
    )
    response = httpx.post(
        server.url + "/_firstwrite/faults",
        json={"kind": "crash", "point": point, "operation": "PutItem", "table": "crashy"},
    )
    assert response.status_code == 201
    with pytest.raises((ConnectionClosedError, EndpointConnectionError)):
        ddb.put_item(TableName="crashy", Item={"pk": {"S": "did-it-land"}})
    assert server.process.wait(timeout=30) == CRASH_EXIT_CODE
    assert f"reached {point}" in server.log()

    restarted = cli_server(db_path=db)
    item = client_for(restarted.url).get_item(
        TableName="crashy", Key={"pk": {"S": "did-it-land"}}, ConsistentRead=True
    )
    assert ("Item" in item) is lands


# --- the documented example ------------------------------------------------------------------


def test_the_documented_example_runs(tmp_path: Path) -> None:
    doc = Path(__file__).parents[3] / "docs" / "testing-with-faults.md"
    # The page's first block is the test module it explains (the skew section's block is a
    # script of its own, run by tests/docs).
    example = re.findall(r"```python\n(.*?)```", doc.read_text(), re.S)[0]
    assert "def test_" in example
    (tmp_path / "test_orders.py").write_text(example)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_orders.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "6 passed" in result.stdout
