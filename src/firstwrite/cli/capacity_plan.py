"""The capacity planner behind ``firstwrite capacity``.

Write and read units, partitions,
storage and monthly cost of the idempotency table for a :class:`Workload`.

Pure arithmetic, no I/O. It applies DynamoDB's capacity rules to the layer's request mix (a
claim and a completion per new request, a charged failed claim per duplicate, optional
strongly consistent polls, the claim written twice through variant 3 (its completion is a plain
UpdateItem), the business items those transactions write at 2x, an index write per claim and
completion for each GSI, and each GSI's copy of every record in the storage); docs/operating-on-aws.md
("Planning capacity") lists each rule with its source and shows a worked example that a test
checks against the command's output.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

WRITE_UNIT_BYTES = 1024
READ_UNIT_BYTES = 4096
PARTITION_WCU = 1000
PARTITION_RCU = 3000
PARTITION_BYTES = 10 * 1024**3
ITEM_OVERHEAD_BYTES = 100  # per item, storage billing only
GIB = 1024**3  # DynamoDB's "GB" is binary
HOURS_PER_MONTH = 730  # AWS's billing month
MAX_TTL_LAG_HOURS = 48.0
# The claim item the layer writes for a 36-character key with payload validation, as the layer's
# own item size (numbers counted at one byte per digit, an upper bound); a test re-measures it.
DEFAULT_RECORD_BYTES = 215
# Autoscaling's default target: provisioned capacity is the peak divided by this.
DEFAULT_TARGET_UTILIZATION = 0.7
# The layer's defaults (IdempotencyConfig.in_progress_wait and poll_interval; a test compares
# them) and its backoff cap between polls, for the polls a duplicate of a live request makes.
LAYER_IN_PROGRESS_WAIT = 1.0
LAYER_POLL_INTERVAL = 0.02
LAYER_POLL_CAP = 0.5


def polls_within(wait: float, interval: float = LAYER_POLL_INTERVAL) -> int:
    """The most strongly consistent reads a duplicate of a live request makes while it waits
    ``wait`` seconds: one after each sleep, the sleeps doubling from ``interval`` up to
    :data:`LAYER_POLL_CAP`, the last one cut at the end of the wait."""
    polls, slept = 0, 0.0
    while slept < wait:
        slept += min(interval, wait - slept)
        interval = min(interval * 2, LAYER_POLL_CAP)
        polls += 1
    return polls


DEFAULT_POLLS = polls_within(LAYER_IN_PROGRESS_WAIT)


def write_units(size: float) -> int:
    """Write units for one standard write of an item of ``size`` bytes (at least one)."""
    return max(1, math.ceil(size / WRITE_UNIT_BYTES))


def read_units(size: float) -> int:
    """Read units for one strongly consistent read of an item of ``size`` bytes."""
    return max(1, math.ceil(size / READ_UNIT_BYTES))


def _whole(value: float) -> int:
    """Units rounded up, ignoring float noise (``2000 * 1.15`` is 2299.9999999999995)."""
    return math.ceil(round(value, 6))


@dataclass(frozen=True)
class Prices:
    """Prices in USD: DynamoDB Standard table class, us-east-1, as published on
    https://aws.amazon.com/dynamodb/pricing/ (on-demand after the 1 November 2024 reduction),
    checked 2026-12-03. Every one is configurable: prices change and differ by region."""

    write_request_per_million: float = 0.625
    read_request_per_million: float = 0.125
    wcu_hour: float = 0.00065
    rcu_hour: float = 0.00013
    gb_month: float = 0.25
    as_of: str = "2026-12-03"

    def __post_init__(self) -> None:
        for name in ("write_request_per_million", "read_request_per_million", "wcu_hour"):
            _check(getattr(self, name) >= 0, f"{name} must be >= 0")
        _check(self.rcu_hour >= 0 and self.gb_month >= 0, "prices must be >= 0")


@dataclass(frozen=True)
class Workload:
    """What the planner needs to know. Rates are per second at peak; sizes in bytes.

    ``peak_rps`` counts new requests (first attempts); duplicates come on top of it, at
    ``duplicate_ratio`` per new request (0.15: 15 duplicates per 100 requests). ``average_rps``
    (default: the peak) drives monthly cost and storage. ``in_progress_share`` of the duplicates
    arrive while the first attempt still runs and each makes ``polls`` strongly consistent reads
    (default: :data:`DEFAULT_POLLS`, those the layer's default ``in_progress_wait`` of 1 s
    allows). ``transactional_share`` of the requests use variant 3, each writing
    ``business_items`` items of ``business_item_bytes`` in the same transaction. ``gsis`` global secondary indexes on the idempotency table, each
    projecting the whole record, take an index write for every claim and completion."""

    peak_rps: float
    duplicate_ratio: float = 0.0
    record_bytes: int = DEFAULT_RECORD_BYTES
    result_bytes: int = 0
    retention_hours: float = 24.0
    ttl_lag_hours: float = MAX_TTL_LAG_HOURS
    average_rps: float | None = None
    in_progress_share: float = 0.0
    polls: float = DEFAULT_POLLS
    transactional_share: float = 0.0
    target_utilization: float = DEFAULT_TARGET_UTILIZATION
    gsis: int = 0
    business_items: float = 0.0
    business_item_bytes: int = WRITE_UNIT_BYTES

    def __post_init__(self) -> None:
        _check(self.peak_rps > 0, "peak_rps must be > 0")
        _check(self.duplicate_ratio >= 0, "duplicate_ratio must be >= 0")
        _check(self.record_bytes > 0, "record_bytes must be > 0")
        _check(self.result_bytes >= 0, "result_bytes must be >= 0")
        _check(
            self.record_bytes + self.result_bytes <= 400 * 1024,
            "record_bytes + result_bytes exceeds DynamoDB's 400 KB item limit",
        )
        _check(self.retention_hours > 0, "retention_hours must be > 0")
        _check(self.ttl_lag_hours >= 0, "ttl_lag_hours must be >= 0")
        _check(
            self.average_rps is None or 0 <= self.average_rps <= self.peak_rps,
            "average_rps must be within 0..peak_rps",
        )
        _check(0 <= self.in_progress_share <= 1, "in_progress_share must be within 0..1")
        _check(self.polls >= 0, "polls must be >= 0")
        _check(0 <= self.transactional_share <= 1, "transactional_share must be within 0..1")
        _check(0 < self.target_utilization <= 1, "target_utilization must be within 0..1")
        _check(self.gsis >= 0, "gsis must be >= 0")
        _check(self.business_items >= 0, "business_items must be >= 0")
        _check(
            0 < self.business_item_bytes <= 400 * 1024,
            "business_item_bytes must be within 1..400 KB",
        )

    @property
    def average(self) -> float:
        return self.peak_rps if self.average_rps is None else self.average_rps


@dataclass(frozen=True)
class Line:
    """One kind of DynamoDB call: how often at peak, what each costs, the total."""

    name: str
    call: str
    rate: float
    wcu_each: float
    rcu_each: float
    on_table: bool = True  # False: an index's or another table's partitions take it

    @property
    def wcu(self) -> float:
        return self.rate * self.wcu_each

    @property
    def rcu(self) -> float:
        return self.rate * self.rcu_each


@dataclass(frozen=True)
class Cost:
    throughput: float
    storage: float

    @property
    def total(self) -> float:
        return self.throughput + self.storage


@dataclass(frozen=True)
class Plan:
    workload: Workload
    prices: Prices
    lines: tuple[Line, ...]
    rule_of_thumb_wcu: int
    wcu: int
    rcu: int
    items_stored: int
    item_bytes: int
    storage_bytes: int
    partitions_for_throughput: int
    partitions_for_storage: int
    provisioned_wcu: int
    provisioned_rcu: int
    on_demand: Cost
    provisioned: Cost
    notes: tuple[str, ...] = field(default=())
    index_storage_bytes: int = 0  # the GSIs' copies, part of storage_bytes

    @property
    def table_storage_bytes(self) -> int:
        """The idempotency table's own storage (what its partitions hold)."""
        return self.storage_bytes - self.index_storage_bytes

    @property
    def partitions(self) -> int:
        return max(self.partitions_for_throughput, self.partitions_for_storage)

    @property
    def storage_gib(self) -> float:
        return self.storage_bytes / GIB

    @property
    def table_wcu(self) -> int:
        """The write units the idempotency table's own partitions take (not its indexes',
        nor the business tables')."""
        return _whole(sum(line.wcu for line in self.lines if line.on_table))

    @property
    def table_rcu(self) -> int:
        return _whole(sum(line.rcu for line in self.lines if line.on_table))

    @property
    def missed_by_rule_of_thumb(self) -> int:
        return self.wcu - self.rule_of_thumb_wcu

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view (``firstwrite capacity --json``)."""
        return {
            "workload": asdict(self.workload) | {"average_rps": self.workload.average},
            "prices": asdict(self.prices),
            "rule_of_thumb_wcu": self.rule_of_thumb_wcu,
            "lines": [
                asdict(line) | {"wcu": _round(line.wcu), "rcu": _round(line.rcu)}
                for line in self.lines
            ],
            "wcu": self.wcu,
            "rcu": self.rcu,
            "missed_by_rule_of_thumb_wcu": self.missed_by_rule_of_thumb,
            "partitions": {
                "table_wcu": self.table_wcu,
                "table_rcu": self.table_rcu,
                "throughput": self.partitions_for_throughput,
                "storage": self.partitions_for_storage,
                "needed": self.partitions,
            },
            "storage": {
                "items": self.items_stored,
                "item_bytes": self.item_bytes,
                "bytes": self.storage_bytes,
                "index_bytes": self.index_storage_bytes,
                "gib": _round(self.storage_gib),
            },
            "monthly_cost_usd": {
                "hours": HOURS_PER_MONTH,
                "on_demand": _cost(self.on_demand),
                "provisioned": _cost(self.provisioned)
                | {"wcu": self.provisioned_wcu, "rcu": self.provisioned_rcu},
            },
            "notes": list(self.notes),
        }


def plan(workload: Workload, prices: Prices | None = None) -> Plan:
    """The capacity plan for ``workload`` at ``prices`` (default: :class:`Prices`)."""
    w = workload
    prices = prices or Prices()
    # The transactional share pays twice for its claim (a TransactWriteItems action); its
    # completion is a plain UpdateItem (guard.complete), as in seed 001's example.
    tx = 1 + w.transactional_share
    completed = w.record_bytes + w.result_bytes
    duplicates = w.peak_rps * w.duplicate_ratio
    lines: tuple[Line, ...] = (
        Line("claim", "PutItem, new key", w.peak_rps, write_units(w.record_bytes) * tx, 0.0),
        Line(
            "completion",
            f"UpdateItem, record + result = {completed} B",
            w.peak_rps,
            float(write_units(completed)),
            0.0,
        ),
        Line(
            "duplicate claim",
            "PutItem, condition fails: charged",
            duplicates,
            write_units(w.record_bytes) * tx,
            0.0,
        ),
        Line(
            "in-progress polls",
            "GetItem, strongly consistent",
            duplicates * w.in_progress_share * w.polls,
            0.0,
            float(read_units(completed)),
        ),
    )
    if w.gsis:
        lines += (
            Line(
                "index writes",
                f"{w.gsis} GSI(s) x (claim + completion)",
                w.peak_rps * w.gsis,
                float(write_units(w.record_bytes) + write_units(completed)),
                0.0,
                on_table=False,
            ),
        )
    if w.business_items and w.transactional_share:
        lines += (
            Line(
                "business items",
                f"TransactWriteItems, {number_text(w.business_items)} per request, 2x",
                w.peak_rps * w.transactional_share * w.business_items,
                write_units(w.business_item_bytes) * 2.0,
                0.0,
                on_table=False,
            ),
        )
    wcu = _whole(sum(line.wcu for line in lines))
    rcu = _whole(sum(line.rcu for line in lines))

    item_bytes = completed + ITEM_OVERHEAD_BYTES
    items = _whole(w.average * (w.retention_hours + w.ttl_lag_hours) * 3600)
    # Each GSI projecting the record keeps its own copy (+100 B overhead): billed storage, on
    # the index's own partitions.
    index_storage_bytes = w.gsis * items * item_bytes
    storage_bytes = items * item_bytes + index_storage_bytes
    storage_cost = storage_bytes / GIB * prices.gb_month

    scale = w.average / w.peak_rps  # on-demand pays for what is used, on average
    seconds = HOURS_PER_MONTH * 3600
    on_demand = Cost(
        throughput=(
            wcu * scale * seconds / 1e6 * prices.write_request_per_million
            + rcu * scale * seconds / 1e6 * prices.read_request_per_million
        ),
        storage=storage_cost,
    )
    provisioned_wcu = max(1, _whole(wcu / w.target_utilization))
    provisioned_rcu = max(1, _whole(rcu / w.target_utilization))
    provisioned = Cost(
        throughput=HOURS_PER_MONTH
        * (provisioned_wcu * prices.wcu_hour + provisioned_rcu * prices.rcu_hour),
        storage=storage_cost,
    )
    notes = []
    if w.gsis or (w.business_items and w.transactional_share):
        notes.append(
            "business items are written to your business tables, index entries to the "
            "indexes' own partitions: both are in the total and the cost, not in the "
            "idempotency table's partitions"
        )
    if w.ttl_lag_hours > MAX_TTL_LAG_HOURS:
        notes.append("ttl_lag_hours is beyond the 48 hours DynamoDB typically takes")
    if w.record_bytes + w.result_bytes > 4 * 1024:
        notes.append(
            "results above compress_threshold (4 KB) are zlib-compressed before they are "
            "stored: pass the compressed size as result_bytes"
        )
    return Plan(
        workload=w,
        prices=prices,
        lines=lines,
        rule_of_thumb_wcu=_whole(w.peak_rps + duplicates),
        wcu=wcu,
        rcu=rcu,
        items_stored=items,
        item_bytes=item_bytes,
        storage_bytes=storage_bytes,
        partitions_for_throughput=max(
            1,
            _whole(
                sum(line.wcu for line in lines if line.on_table) / PARTITION_WCU
                + sum(line.rcu for line in lines if line.on_table) / PARTITION_RCU
            ),
        ),
        partitions_for_storage=max(
            1, math.ceil((storage_bytes - index_storage_bytes) / PARTITION_BYTES)
        ),
        provisioned_wcu=provisioned_wcu,
        provisioned_rcu=provisioned_rcu,
        on_demand=on_demand,
        provisioned=provisioned,
        notes=tuple(notes),
        index_storage_bytes=index_storage_bytes,
    )


def number_text(value: float) -> str:
    """``2`` for 2.0, ``1.5`` for 1.5."""
    return f"{value:g}"


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(message)


def _round(value: float) -> float:
    return round(value, 2)


def _cost(cost: Cost) -> dict[str, float]:
    return {
        "throughput": _round(cost.throughput),
        "storage": _round(cost.storage),
        "total": _round(cost.total),
    }
