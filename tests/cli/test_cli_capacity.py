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
    # 216 + 808 = 1,024 B: one unit; one byte more: two.
    fits = model.plan(model.Workload(peak_rps=100, result_bytes=808))
    over = model.plan(model.Workload(peak_rps=100, result_bytes=809))
    assert (fits.lines[1].wcu_each, over.lines[1].wcu_each) == (1, 2)
    assert (fits.wcu, over.wcu) == (200, 300)
    big = model.plan(model.Workload(peak_rps=100, result_bytes=10 * 1024))
    assert big.lines[1].wcu_each == 11  # ceil((216 + 10240) / 1024)


def test_failed_conditional_writes_and_transactions_are_charged() -> None:
    plain = model.plan(model.Workload(peak_rps=1000, duplicate_ratio=0.5))
    assert plain.lines[2].rate == 500 and plain.lines[2].wcu == 500
    all_tx = model.plan(model.Workload(peak_rps=1000, duplicate_ratio=0.5, transactional_share=1))
    assert all_tx.wcu == 2 * plain.wcu
    half = model.plan(model.Workload(peak_rps=1000, duplicate_ratio=0.5, transactional_share=0.5))
    assert half.wcu == 1.5 * plain.wcu


def test_in_progress_polls_are_read_units() -> None:
    p = model.plan(
        model.Workload(
            peak_rps=1000, duplicate_ratio=0.2, result_bytes=5000, in_progress_share=0.5, polls=4
        )
    )
    polls = p.lines[3]
    assert polls.rate == 1000 * 0.2 * 0.5 * 4
    assert polls.rcu_each == 2  # 216 + 5000 bytes: two 4 KB units
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
    per_item = 216 + 900 + 100
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
    from firstwrite.idempotency._machine.serialization import item_size
    from firstwrite.idempotency.keys import fingerprint
    from firstwrite.idempotency.requests import Requests, new_token

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
