"""``firstwrite capacity`` and its planner (:mod:`firstwrite.cli.capacity_plan`): DynamoDB's
rules, the rule of thumb, and the worked example in docs/operating-on-aws.md checked against the
command's output."""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from firstwrite.cli import capacity_plan as model

DOC = Path(__file__).resolve().parents[2] / "docs" / "operating-on-aws.md"


def test_the_seeds_rule_of_thumb() -> None:
    p = model.plan(model.Workload(peak_rps=2000, duplicate_ratio=0.15))
    assert p.rule_of_thumb_wcu == 2300
    # The full model adds the completion write the rule of thumb leaves out.
    assert p.wcu == 2000 + 2000 + 300
    assert p.missed_by_rule_of_thumb == 2000


def test_units_follow_dynamodbs_rounding() -> None:
    assert [model.write_units(n) for n in (1, 1024, 1025, 2048, 2049)] == [1, 1, 2, 2, 3]
    assert [model.read_units(n) for n in (1, 4096, 4097)] == [1, 1, 2]
    assert model.write_units(0) == 1  # a failed write of nothing still costs a unit


def test_completion_is_sized_by_the_result() -> None:
    # record + result = 1,024 B: one unit; one byte more: two.
    room = 1024 - model.DEFAULT_RECORD_BYTES
    fits = model.plan(model.Workload(peak_rps=100, result_bytes=room))
    over = model.plan(model.Workload(peak_rps=100, result_bytes=room + 1))
    assert (fits.lines[1].wcu_each, over.lines[1].wcu_each) == (1, 2)
    assert (fits.wcu, over.wcu) == (200, 300)
    big = model.plan(model.Workload(peak_rps=100, result_bytes=10 * 1024))
    assert big.lines[1].wcu_each == 11  # ceil((215 + 10240) / 1024)


def test_failed_conditional_writes_and_transactions_are_charged() -> None:
    plain = model.plan(model.Workload(peak_rps=1000, duplicate_ratio=0.5))
    assert plain.lines[2].rate == 500 and plain.lines[2].wcu == 500
    all_tx = model.plan(model.Workload(peak_rps=1000, duplicate_ratio=0.5, transactional_share=1))
    # The claims (new and duplicate) are TransactWriteItems actions: twice; the completion is a
    # plain UpdateItem (guard.complete, as in seed 001's example): once.
    claims = plain.lines[0].wcu + plain.lines[2].wcu
    assert all_tx.wcu == plain.wcu + claims == 4000
    assert all_tx.lines[1].wcu == plain.lines[1].wcu == 1000
    half = model.plan(model.Workload(peak_rps=1000, duplicate_ratio=0.5, transactional_share=0.5))
    assert half.wcu == plain.wcu + 0.5 * claims


def test_in_progress_polls_are_read_units() -> None:
    p = model.plan(
        model.Workload(
            peak_rps=1000, duplicate_ratio=0.2, result_bytes=5000, in_progress_share=0.5, polls=4
        )
    )
    polls = p.lines[3]
    assert polls.rate == 1000 * 0.2 * 0.5 * 4
    assert polls.rcu_each == 2  # 215 + 5000 bytes: two 4 KB units
    assert p.rcu == 800


def test_partitions_for_throughput_and_for_storage() -> None:
    # 2,500 WCU and 1,500 RCU: 2.5 + 0.5 = 3 partitions (the combined formula).
    p = model.plan(
        model.Workload(
            peak_rps=1000,
            duplicate_ratio=0.5,
            in_progress_share=1,
            polls=3,
            average_rps=1,
            retention_hours=1,
            ttl_lag_hours=0,
        )
    )
    assert (p.wcu, p.rcu) == (2500, 1500)
    assert p.partitions_for_throughput == 3
    assert p.partitions_for_storage == 1
    assert p.partitions == 3
    # Storage decides when records pile up: 10 GiB per partition.
    stored = model.plan(model.Workload(peak_rps=1000, result_bytes=900))
    per_item = model.DEFAULT_RECORD_BYTES + 900 + 100
    assert stored.items_stored == 1000 * 72 * 3600
    assert stored.storage_bytes == stored.items_stored * per_item
    assert stored.partitions_for_storage == -(-stored.storage_bytes // (10 * 1024**3))
    assert stored.partitions == stored.partitions_for_storage > stored.partitions_for_throughput


def test_storage_counts_the_ttl_lag() -> None:
    without = model.plan(model.Workload(peak_rps=10, ttl_lag_hours=0))
    with_lag = model.plan(model.Workload(peak_rps=10))
    assert without.items_stored == 10 * 24 * 3600
    assert with_lag.items_stored == 10 * (24 + 48) * 3600


def test_monthly_cost_on_demand_and_provisioned() -> None:
    prices = model.Prices(
        write_request_per_million=1.0,
        read_request_per_million=0.5,
        wcu_hour=0.001,
        rcu_hour=0.0002,
        gb_month=0.3,
    )
    p = model.plan(
        model.Workload(
            peak_rps=100,
            average_rps=50,
            duplicate_ratio=0.1,
            in_progress_share=1,
            polls=2,
            target_utilization=0.5,
        ),
        prices,
    )
    assert (p.wcu, p.rcu) == (210, 20)
    seconds = 730 * 3600
    assert p.on_demand.throughput == pytest.approx(
        (210 * 0.5 * seconds / 1e6) * 1.0 + (20 * 0.5 * seconds / 1e6) * 0.5
    )
    assert (p.provisioned_wcu, p.provisioned_rcu) == (420, 40)
    assert p.provisioned.throughput == pytest.approx(730 * (420 * 0.001 + 40 * 0.0002))
    assert p.on_demand.storage == p.provisioned.storage == pytest.approx(p.storage_gib * 0.3)


@pytest.mark.parametrize(
    "changes",
    [
        {"peak_rps": 0},
        {"duplicate_ratio": -0.1},
        {"result_bytes": 400 * 1024},
        {"average_rps": 3000},
        {"in_progress_share": 1.5},
        {"target_utilization": 0},
    ],
)
def test_bad_workloads_are_refused(changes: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        model.Workload(**{"peak_rps": 2000, **changes})


def test_default_record_size_is_the_layers_claim(tmp_path: Path) -> None:
    """The planner's default record is what the layer writes for a UUID key, measured."""
    from firstwrite.engine import Engine, local_client
    from firstwrite.idempotency import Idempotency
    from firstwrite.idempotency.keys import fingerprint
    from firstwrite.idempotency.requests import Requests, new_token
    from firstwrite.idempotency.serialization import item_size

    with Engine(tmp_path / "size.db") as engine:
        guard = Idempotency(client=local_client(engine))
        key = guard.dynamodb_key("6f1c9f4e-8a0b-4c8e-9d4a-2b7c1e5f3a90")
        now = time.time()
        requests = Requests(guard.config)
        item = requests.claim_item(key, new_token(now), fingerprint({"a": 1}), now, 60)
    assert item_size(item) == model.DEFAULT_RECORD_BYTES


# -- the command --------------------------------------------------------------------------------


def test_json_output(cli: Callable[..., Any]) -> None:
    result = cli("capacity", "--peak-rps", "2000", "--duplicate-ratio", "15%", "--json")
    assert result.code == 0, result.err
    data = result.json()
    assert data["rule_of_thumb_wcu"] == 2300
    assert data["wcu"] == 4300 and data["rcu"] == 0
    assert [line["name"] for line in data["lines"]] == [
        "claim",
        "completion",
        "duplicate claim",
        "in-progress polls",
    ]
    assert data["partitions"]["needed"] == max(
        data["partitions"]["throughput"], data["partitions"]["storage"]
    )
    assert data["prices"]["as_of"] == model.Prices().as_of
    assert data["monthly_cost_usd"]["hours"] == 730


def test_prices_are_configurable(cli: Callable[..., Any]) -> None:
    base = ["capacity", "--peak-rps", "100", "--json"]
    default = cli(*base).json()
    doubled = cli(*base, "--price-write-million", "1.25", "--price-wcu-hour", "0.0013").json()
    assert doubled["prices"]["as_of"] == "given"
    d, x = default["monthly_cost_usd"], doubled["monthly_cost_usd"]
    assert x["on_demand"]["throughput"] == pytest.approx(2 * d["on_demand"]["throughput"], 0.01)
    assert x["provisioned"]["throughput"] > d["provisioned"]["throughput"]


def test_text_output_shows_both_estimates(cli: Callable[..., Any]) -> None:
    result = cli("capacity", "--peak-rps", "2000", "--duplicate-ratio", "0.15")
    assert result.code == 0
    assert "rule of thumb: peak x (1 + duplicate ratio) = 2,300 WCU" in result.out
    assert re.search(r"total\s+4,300\s+0", result.out)
    assert "on-demand" in result.out and "provisioned" in result.out


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["capacity"], 2),  # --peak-rps is required
        (["capacity", "--peak-rps", "-5"], 2),
        (["capacity", "--peak-rps", "10", "--duplicate-ratio", "lots"], 2),
        (["capacity", "--peak-rps", "10", "--in-progress-share", "150%"], 2),
        (["capacity", "--peak-rps", "10", "--average-rps", "20"], 2),  # the model refuses it
    ],
)
def test_bad_input_is_a_usage_error(cli: Callable[..., Any], argv: list[str], code: int) -> None:
    result = cli(*argv)
    assert result.code == code
    assert "Traceback" not in result.err and result.err.strip()


# -- the worked example in the docs ---------------------------------------------------------------


def _worked_example() -> tuple[list[str], str]:
    text = DOC.read_text()
    match = re.search(r"```console\n\$ firstwrite (capacity [^\n]*)\n(.*?)```", text, re.S)
    assert match, "docs/operating-on-aws.md has no `$ firstwrite capacity` console block"
    return shlex.split(match.group(1)), match.group(2)


def _doc_table() -> dict[str, str]:
    text = DOC.read_text().split("### A worked example", 1)[1]
    rows = re.findall(r"^\| ([^|]+?) \| ([^|]+?) \|$", text, re.M)
    return {name: value for name, value in rows if name not in ("quantity", "---")}


def test_docs_worked_example_is_the_commands_output(cli: Callable[..., Any]) -> None:
    argv, shown = _worked_example()
    result = cli(*argv)
    assert result.code == 0, result.err
    assert result.out == shown


def test_docs_worked_example_numbers_match_the_json(cli: Callable[..., Any]) -> None:
    argv, _ = _worked_example()
    data = cli(*argv, "--json").json()
    table = _doc_table()
    money = data["monthly_cost_usd"]
    assert table["rule of thumb"] == f"{data['rule_of_thumb_wcu']:,} WCU"
    assert table["full model"] == f"{data['wcu']:,} WCU + {data['rcu']:,} RCU"
    parts = data["partitions"]
    assert table["partitions"] == (
        f"{parts['needed']} ({parts['throughput']} for throughput, {parts['storage']} for storage)"
    )
    assert table["storage"] == f"{data['storage']['gib']:.1f} GiB"
    assert table["on-demand, per month"] == f"${money['on_demand']['total']:,.2f}"
    assert table["provisioned, per month"] == f"${money['provisioned']['total']:,.2f}"
    # The seed's figure is in the example too.
    assert data["rule_of_thumb_wcu"] == 2300


# -- indexes, business items, alarms -------------------------------------------------------------


def test_gsis_take_an_index_write_per_claim_and_completion() -> None:
    plain = model.plan(model.Workload(peak_rps=1000, duplicate_ratio=0.5, result_bytes=2000))
    two = model.plan(model.Workload(peak_rps=1000, duplicate_ratio=0.5, result_bytes=2000, gsis=2))
    [index] = [line for line in two.lines if line.name == "index writes"]
    # Each index: the claim (216 B: 1 unit) and the completion (2,216 B: 3 units), not the
    # failed duplicate claims (nothing is written).
    assert (index.rate, index.wcu_each, index.wcu) == (2000, 4, 8000)
    assert two.wcu == plain.wcu + 8000
    # The indexes have partitions of their own: the table's count stays.
    assert two.table_wcu == plain.wcu
    assert two.partitions_for_throughput == plain.partitions_for_throughput


def test_gsis_are_counted_in_the_storage_figure() -> None:
    w = {"peak_rps": 1000, "result_bytes": 2000, "average_rps": 1000}
    plain = model.plan(model.Workload(**w))
    two = model.plan(model.Workload(**w, gsis=2))
    # Each index keeps a copy of every projected record (+100 B): 3x the table's bytes, billed.
    assert two.index_storage_bytes == 2 * plain.storage_bytes
    assert two.storage_bytes == 3 * plain.storage_bytes
    assert two.on_demand.storage == pytest.approx(3 * plain.on_demand.storage)
    # ... on the indexes' own partitions: the table's storage partitions stay.
    assert two.table_storage_bytes == plain.storage_bytes
    assert two.partitions_for_storage == plain.partitions_for_storage
    assert two.to_dict()["storage"]["index_bytes"] == two.index_storage_bytes


def test_business_items_in_transactions_are_charged_twice() -> None:
    w = {"peak_rps": 1000, "transactional_share": 0.5}
    plain = model.plan(model.Workload(**w))
    with_items = model.plan(model.Workload(**w, business_items=2, business_item_bytes=1500))
    [items] = [line for line in with_items.lines if line.name == "business items"]
    assert (items.rate, items.wcu_each) == (1000, 4)  # 500 tx x 2 items; 2 units x 2
    assert with_items.wcu == plain.wcu + 4000
    assert with_items.table_wcu == plain.wcu
    assert any("business tables" in note for note in with_items.notes)
    # Without transactions there are no business writes in the layer's requests.
    assert model.plan(model.Workload(peak_rps=1000, business_items=2)).wcu == 2000


def test_gsis_from_the_tables_description(cli: Callable[..., Any], tmp_path: Path) -> None:
    from firstwrite.engine import Engine, local_client

    db = tmp_path / "gsi.db"
    with Engine(db) as engine:
        local_client(engine).create_table(
            TableName="with-gsis",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "tenant", "AttributeType": "S"},
            ],
            GlobalSecondaryIndexes=[
                {
                    "IndexName": f"by-tenant-{i}",
                    "KeySchema": [{"AttributeName": "tenant", "KeyType": "HASH"}],
                    "Projection": {"ProjectionType": "ALL"},
                    "ProvisionedThroughput": {"ReadCapacityUnits": 5, "WriteCapacityUnits": 5},
                }
                for i in range(2)
            ],
            ProvisionedThroughput={"ReadCapacityUnits": 5, "WriteCapacityUnits": 5},
        )
    base = ("capacity", "--peak-rps", "100", "--json")
    read = cli(*base, "--db", str(db), "--table", "with-gsis")
    assert read.code == 0, read.err
    given = cli(*base, "--gsi", "2").json()
    assert read.json()["workload"]["gsis"] == 2 and read.json()["wcu"] == given["wcu"] == 600
    assert cli(*base, "--db", str(db), "--table", "nope").code != 0
    assert cli(*base, "--gsi", "1", "--table", "with-gsis").code == 2
    text = cli("capacity", "--peak-rps", "100", "--gsi", "2").out
    assert "index writes       2 GSI(s) x (claim + completion)" in text
    # The alarms know the table is PROVISIONED.
    alarms = cli(
        "capacity", "--peak-rps", "100", "--db", str(db), "--table", "with-gsis", "--alarms"
    )
    assert "    Default: with-gsis\n" in alarms.out and "    Default: PROVISIONED\n" in alarms.out


def cfn_lint(path: Path) -> Any:
    import subprocess
    import sys

    lint = Path(sys.executable).with_name("cfn-lint")
    return subprocess.run(
        [str(lint), "--", str(path)], capture_output=True, text=True, timeout=300, check=False
    )


def test_alarms_are_a_template_cfn_lint_accepts(cli: Callable[..., Any], tmp_path: Path) -> None:
    result = cli("capacity", "--peak-rps", "500", "--alarms")
    assert result.code == 0, result.err
    template = result.out
    for metric in (
        "ThrottledRequests",
        "ReadThrottleEvents",
        "WriteThrottleEvents",
        "ConsumedWriteCapacityUnits",
        "ProvisionedWriteCapacityUnits",
        "ConsumedReadCapacityUnits",
        "ReplicationLatency",
        "firstwrite_lost_claims_total",
        "dynamo_ttl_delete_before_retry_total",
        "firstwrite_late_retries_total",
        "dynamo_cross_region_duplicate_detected_total",
    ):
        assert f"MetricName: {metric}\n" in template, metric
    assert "    Default: PAY_PER_REQUEST\n" in template
    assert "    Default: 80\n" in template  # utilization alarm: target 70% + 10 points
    path = tmp_path / "alarms.yaml"
    path.write_text(template)
    linted = cfn_lint(path)
    assert linted.returncode == 0, linted.stdout + linted.stderr
    # cfn-lint does check it: a comparison CloudWatch does not have is refused.
    path.write_text(template.replace("GreaterThanThreshold", "GreaterThan", 1))
    refused = cfn_lint(path)
    assert refused.returncode != 0 and "E3030" in refused.stdout


def test_the_planners_poll_default_is_what_the_layers_defaults_make(engine: Any) -> None:
    """The planner's default ``polls`` follows the layer: its mirrored defaults are
    IdempotencyConfig's, and a duplicate of a live claim through a real guard on the engine,
    waiting the default ``in_progress_wait`` (a clock the test moves, so nothing sleeps), makes
    exactly :data:`DEFAULT_POLLS` strongly consistent reads before "in progress"."""
    from firstwrite.engine.binding.sync import local_client
    from firstwrite.idempotency import Idempotency, IdempotencyConfig, InProgressError
    from firstwrite.idempotency.metrics import MemoryMetrics

    defaults = IdempotencyConfig()
    assert defaults.in_progress_wait == model.LAYER_IN_PROGRESS_WAIT
    assert defaults.poll_interval == model.LAYER_POLL_INTERVAL
    assert model.Workload(peak_rps=1).polls == model.DEFAULT_POLLS > 0

    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    metrics = MemoryMetrics()
    client = local_client(engine, region="us-east-1")
    config = IdempotencyConfig(table_name="idem-polls")
    first = Idempotency(config, client=client, clock=engine.clock.now)
    first.ensure_table()
    first.claim("k")
    second = Idempotency(
        config,
        client=client,
        clock=engine.clock.now,
        metrics=metrics,
        sleep=sleep,
        monotonic=lambda: now[0],
    )
    with pytest.raises(InProgressError):
        second.claim("k")
    assert metrics.total("firstwrite_in_progress_polls_total") == model.DEFAULT_POLLS
    assert now[0] == pytest.approx(defaults.in_progress_wait)
