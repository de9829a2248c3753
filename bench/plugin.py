"""Issue 14: a DynamoDB test, per test, under the pytest plugin's redirect vs under moto.

One "test" is what a typical test of DynamoDB code does, written once and run under each
contender unchanged: create a client with ``boto3.client`` (as code under test does), create a
table, make 100 conditional puts (10 of them duplicates that fail their condition) and 20
queries. Each contender wraps it exactly as its pytest setup would wrap a test:

* **firstwrite_mock (memory engine, the default)**: what the plugin's ``firstwrite_mock``
  fixture does per test with its defaults: a fresh in-memory ``Engine``,
  ``mock_dynamodb(engine=...)`` around the test, the engine closed after it.
* **firstwrite_mock (file engine)**: the same with ``storage="file"``: a fresh SQLite file
  per test.
* **moto mock_aws**: ``with mock_aws():``, moto's documented per-test pattern.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ._common import (
    Contender,
    Section,
    Settings,
    Table,
    Target,
    dummy_aws_env,
    package_version,
    run_interleaved,
    scratch_dir,
    try_import,
)

TARGET = 3.0  # tests/s, the plugin with its defaults >= 3x moto
PUTS, DUPLICATES, QUERIES, PARTITIONS = 100, 10, 20, 10
DEFAULT = "firstwrite_mock (memory engine, the default)"
FILE = "firstwrite_mock (file engine)"
MOTO = "moto mock_aws"
UNIT = "tests/s"


def one_test() -> int:
    """The test body, as a moto-style test writes it; returns the items its queries saw."""
    import boto3

    client = boto3.client("dynamodb", region_name="us-east-1")
    client.create_table(
        TableName="orders",
        KeySchema=[
            {"AttributeName": "customer", "KeyType": "HASH"},
            {"AttributeName": "order_id", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": "customer", "AttributeType": "S"},
            {"AttributeName": "order_id", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    failed = 0
    for n in range(PUTS):
        order = n if n < PUTS - DUPLICATES else n - (PUTS - DUPLICATES)  # the last 10 repeat
        try:
            client.put_item(
                TableName="orders",
                Item={
                    "customer": {"S": f"c{order % PARTITIONS}"},
                    "order_id": {"S": f"o-{order:04d}"},
                    "total": {"N": str(order * 10)},
                },
                ConditionExpression="attribute_not_exists(order_id)",
            )
        except client.exceptions.ConditionalCheckFailedException:
            failed += 1
    if failed != DUPLICATES:
        raise AssertionError(f"{failed} conditional failures, expected {DUPLICATES}")
    seen = 0
    for q in range(QUERIES):
        response = client.query(
            TableName="orders",
            KeyConditionExpression="customer = :c AND begins_with(order_id, :o)",
            ExpressionAttributeValues={":c": {"S": f"c{q % PARTITIONS}"}, ":o": {"S": "o-"}},
        )
        seen += response["Count"]
    return seen


# Each partition holds (PUTS - DUPLICATES) / PARTITIONS orders; each query reads one partition.
EXPECTED_SEEN = QUERIES * (PUTS - DUPLICATES) // PARTITIONS


def check(seen: int) -> None:
    """A wrong answer stops the benchmark (run_interleaved lets it through): no fast nonsense."""
    if seen != EXPECTED_SEEN:
        raise AssertionError(f"queries saw {seen} items, expected {EXPECTED_SEEN}")


class PluginFile(Contender):
    name = FILE

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def op(self, i: int) -> None:
        from firstwrite.engine.api import Engine
        from firstwrite.testing import mock_dynamodb

        with Engine(self.directory / f"test-{i}.db") as engine, mock_dynamodb(engine=engine):
            check(one_test())


class PluginMemory(Contender):
    name = DEFAULT

    def op(self, i: int) -> None:
        from firstwrite.engine.api import Engine
        from firstwrite.testing import mock_dynamodb

        with Engine() as engine, mock_dynamodb(engine=engine):
            check(one_test())


class Moto(Contender):
    name = MOTO

    def op(self, i: int) -> None:
        from moto import mock_aws

        with mock_aws():
            check(one_test())


def run(settings: Settings, log: Callable[[str], None]) -> Section:
    section = Section(
        key="plugin",
        title="A DynamoDB test under the pytest plugin vs under moto (issue 14)",
        method=[
            f"One test: `boto3.client('dynamodb')` made inside it, `CreateTable`, {PUTS} "
            f"conditional `PutItem`s ({DUPLICATES} of them duplicates that fail "
            f"`attribute_not_exists`), {QUERIES} `Query`s of one partition each; every test "
            "checks its conditional failures and the items its queries saw (a wrong answer "
            "stops the benchmark).",
            f"**{DEFAULT}**: what the plugin's `firstwrite_mock` fixture does per test with its "
            "defaults: `Engine()` (in memory), `mock_dynamodb(engine=...)` around the test, "
            f"closed after. **{FILE}**: the same on a fresh SQLite file per test "
            "(`storage='file'`). "
            f"**{MOTO}**: `with moto.mock_aws():` (moto {package_version('moto')}), its "
            "documented per-test pattern. boto3 "
            f"{package_version('boto3')}; the same test function for all three.",
            f"{settings.reps} repetitions of at least {settings.duration:g} s (16 tests at "
            "least) per contender, interleaved; the ratio is the median of per-repetition "
            "ratios.",
        ],
    )
    dummy_aws_env()
    skipped: dict[str, str] = {}
    contenders: list[Contender] = []
    _mod, why = try_import("firstwrite.testing", "mock_dynamodb")
    with scratch_dir("plugin-") as directory:
        if why is None:
            contenders += [PluginMemory(), PluginFile(directory)]
        else:
            skipped[DEFAULT] = skipped[FILE] = why
        contenders.append(Moto())
        log("  plugin / one test per op")
        series, more = run_interleaved(contenders, settings, log=log)
    skipped.update(more)
    for s in series:
        s.unit = UNIT
    table = Table(
        title=f"tests per second ({PUTS} conditional puts + {QUERIES} queries per test)",
        series=series,
        ours=[DEFAULT, FILE],
        targets=[Target(DEFAULT, MOTO, minimum=TARGET)],
        skipped=skipped,
    )
    for s in series:
        if s.values and s.median > 0:
            table.extra.setdefault("ms per test", {})[s.name] = f"{1e3 / s.median:.1f}"
    section.tables.append(table)
    return section
