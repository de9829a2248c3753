"""Regions that both said yes: finding claims another region's claim overwrote.

A conditional claim is linearizable only within its region: two regions can both accept one
key's claim before either sees the other's, and replication keeps the later write (last writer
wins) everywhere, though the losing claim's work may have run too.
:class:`CrossRegionReconciler` finds every such overwrite, whether or not a retry ever arrives.

Run one per region, on that region's stream (``NEW_AND_OLD_IMAGES``), with the layer's
``region`` configured. A stream record is an **overwrite** when it replaces a claim made in the
reconciler's region with one made in another region before the old claim's lease (or, once
finished, its retention) ran out: no legitimate takeover. Only the losing region's stream shows
that replacement (the winner never applies the older write), so each overwritten claim is
found once across regions; the optional ``guard`` makes each stream record count once across
redeliveries and restarts too.

Each is counted in ``dynamo_cross_region_duplicate_detected_total{region}`` (the winning
region), logged at ERROR with both owners and regions, and passed to ``on_overwrite``; run it
as a Lambda (:meth:`~CrossRegionReconciler.lambda_handler`) or a long-running poller
(:meth:`~CrossRegionReconciler.run`; :meth:`~CrossRegionReconciler.poll` reads once).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from firstwrite.idempotency import Metrics
from firstwrite.idempotency.keys import caller_key
from firstwrite.idempotency.layout import DEFAULT, RecordLayout
from firstwrite.idempotency.record import Record, Status
from firstwrite.idempotency.stream_reading import StreamPolling

from .core import Ordering, consume
from .guard import EventGuard
from .shapes import LambdaContext, PartialBatchResponse

__all__ = ["CrossRegionReconciler", "Overwrite", "find_overwrite"]

LOG = logging.getLogger("firstwrite.events.global_tables")
METRIC = "dynamo_cross_region_duplicate_detected_total"


@dataclass(frozen=True, slots=True)
class Overwrite:
    """One claim lost to another region's. Times are epoch seconds."""

    record_id: str
    key: str
    lost_owner: str
    lost_region: str
    lost_status: str
    won_owner: str
    won_region: str
    lost_claimed_at: float | None
    won_claimed_at: float | None


def _record(image: Mapping[str, Any] | None, layout: RecordLayout) -> Record | None:
    if not image or layout.owner not in image or layout.expires not in image:
        return None
    try:
        return Record.from_item(dict(image), layout)
    except (KeyError, ValueError):
        return None


def find_overwrite(
    stream_record: Mapping[str, Any],
    region: str,
    *,
    partition_key: str = "pk",
    sort_key: str | None = None,
    layout: RecordLayout = DEFAULT,
) -> Overwrite | None:
    """The overwrite ``stream_record`` (a GetRecords or Lambda stream record) shows in
    ``region``'s stream, or ``None`` (the module docstring says when a record is one)."""
    if stream_record.get("eventName") != "MODIFY":
        return None
    data = stream_record.get("dynamodb", {})
    old = _record(data.get("OldImage"), layout)
    new = _record(data.get("NewImage"), layout)
    if old is None or new is None or old.removed or new.removed:
        return None
    if old.region != region or new.region is None or new.region == region:
        return None
    if old.owner == new.owner:
        return None  # the same claim, completed or renewed (replicated back)
    won_at = new.claimed_at
    if won_at is not None and _takeover_allowed(old, won_at):
        return None
    keys = data.get("Keys", {})
    pk = str(keys[partition_key]["S"])
    sk = None if sort_key is None else str(keys[sort_key]["S"])
    return Overwrite(
        record_id=pk if sk is None else f"{pk}|{sk}",
        key=caller_key(pk, sk),
        lost_owner=f"{old.owner}:{old.version}",
        lost_region=region,
        lost_status=old.status.value,
        won_owner=f"{new.owner}:{new.version}",
        won_region=new.region,
        lost_claimed_at=old.claimed_at,
        won_claimed_at=won_at,
    )


def _takeover_allowed(old: Record, at: float) -> bool:
    """Whether a claim made at ``at`` could legitimately replace ``old`` (the claim
    condition's rules: a lease run out, a retryable failure, a retention ended)."""
    if old.expired(at):
        return True
    if old.status is Status.COMPLETED:
        return False
    return old.lease_over(at)


class CrossRegionReconciler(StreamPolling):
    """Finds the claims of ``region`` that another region's claim overwrote (module docstring).

    ``guard`` (an :class:`~.guard.EventGuard`, best on a table or scope of its own) makes each
    stream record count once however often it is delivered; without it, a record delivered
    twice is counted twice. ``metrics`` defaults to the guard's sink.
    """

    def __init__(
        self,
        region: str,
        *,
        guard: EventGuard | None = None,
        metrics: Metrics | None = None,
        on_overwrite: Callable[[Overwrite], object] | None = None,
        partition_key: str = "pk",
        sort_key: str | None = None,
        layout: RecordLayout = DEFAULT,
        scope: str = "firstwrite-cross-region",
    ) -> None:
        self.region = region
        self.guard = guard
        self.metrics = metrics if metrics is not None else (guard.metrics if guard else None)
        self.on_overwrite = on_overwrite
        self.partition_key = partition_key
        self.sort_key = sort_key
        self.layout = layout
        self.scope = scope
        self.found: list[Overwrite] = []

    def examine(self, stream_record: Mapping[str, Any]) -> Overwrite | None:
        """Judge one stream record; an overwrite is reported (counted, logged, handed on)."""
        found = find_overwrite(
            stream_record,
            self.region,
            partition_key=self.partition_key,
            sort_key=self.sort_key,
            layout=self.layout,
        )
        if found is not None:
            self._report(found)
        return found

    def _report(self, found: Overwrite) -> None:
        self.found.append(found)
        LOG.error(
            "cross-region duplicate: the claim of %r made in %s (owner %s, %s) was overwritten "
            "by a claim made in %s (owner %s) before its lease ran out; the work may have run "
            "in both regions",
            found.key,
            found.lost_region,
            found.lost_owner,
            found.lost_status,
            found.won_region,
            found.won_owner,
            extra={
                "idempotency_key": found.key,
                "record_id": found.record_id,
                "lost_owner": found.lost_owner,
                "won_owner": found.won_owner,
                "lost_region": found.lost_region,
                "won_region": found.won_region,
            },
        )
        if self.metrics is not None and self.metrics.enabled:
            self.metrics.count(METRIC, region=found.won_region)
        if self.on_overwrite is not None:
            self.on_overwrite(found)

    def process(self, records: Iterable[Mapping[str, Any]]) -> int:
        """Examine stream records in order; returns how many overwrites were found now (with a
        guard, a record examined before is not examined again)."""
        before = len(self.found)
        if self.guard is None:
            for record in records:
                self.examine(record)
            return len(self.found) - before
        batch = consume(
            records,
            self.examine,
            guard=self.guard,
            key=lambda r: str(r["eventID"]),
            payload=lambda r: r.get("dynamodb", {}).get("SequenceNumber"),
            ordering=Ordering.STREAM,
            source="cross_region_reconciler",
            scope=self.scope,
            metrics=self.metrics,
        )
        if batch.redeliver:
            raise RuntimeError(
                f"{len(batch.redeliver)} stream record(s) not examined (first: "
                f"{batch.redeliver[0]}); read them again"
            )
        return len(self.found) - before

    def lambda_handler(
        self, event: Mapping[str, Any], context: LambdaContext | None = None
    ) -> PartialBatchResponse:
        """A Lambda handler for the region's stream: the records not examined (running
        elsewhere, or failed) are reported for Lambda to deliver again."""
        from .dynamodb_streams import DynamoDBStreamBatch

        if self.guard is None:
            self.process(event.get("Records", []))
            return {"batchItemFailures": []}
        batch = DynamoDBStreamBatch(
            self.guard, payload=False, scope=self.scope, metrics=self.metrics
        )
        return batch.handle(event, context, self.examine)  # type: ignore[arg-type]
