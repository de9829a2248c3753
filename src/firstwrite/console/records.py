"""Idempotency records as the console shows them, decoded with the layer's own types.

An item is a record when :meth:`firstwrite.idempotency.Record.from_item` can read it (an
``owner`` of the form ``<token>:<version>`` and an ``expires_at``); anything else in a table is
shown as a plain item. Stored results and failures are decoded through
:class:`firstwrite.idempotency.Replay`, exactly as a duplicate request would see them.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from firstwrite.idempotency import Record, Replay, ReplayedFailureError, Status

Item = Mapping[str, Any]

SUMMARY_CHARS = 120


def wire_json(value: Any, *, indent: int | None = None) -> str:
    """``value`` (items, requests, responses) as DynamoDB JSON text: bytes become base64."""
    return json.dumps(value, indent=indent, default=_wire_default, ensure_ascii=False)


def pretty(value: Any, width: int = 72, _indent: int = 0) -> str:
    """Indented DynamoDB JSON that keeps short values on one line: an AttributeValue such as
    ``{"S": "abc"}``, a small key or item, stays whole instead of taking four lines."""
    flat = wire_json(value)
    if len(flat) + 2 * _indent <= width or not isinstance(value, (dict, list)) or not value:
        return flat
    pad, inner = "  " * _indent, "  " * (_indent + 1)
    if isinstance(value, dict):
        lines = [
            f"{inner}{json.dumps(str(k), ensure_ascii=False)}: {pretty(v, width, _indent + 1)}"
            for k, v in value.items()
        ]
        return "{\n" + ",\n".join(lines) + f"\n{pad}}}"
    lines = [f"{inner}{pretty(v, width, _indent + 1)}" for v in value]
    return "[\n" + ",\n".join(lines) + f"\n{pad}]"


def _wire_default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(f"{type(value).__name__} has no JSON form")


def shorten(text: str, limit: int = SUMMARY_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def key_text(item: Item, key_names: Sequence[str]) -> str:
    """The item's key as one line: ``pk`` alone, or ``pk | sk``."""
    parts = []
    for name in key_names:
        value = item.get(name)
        if isinstance(value, Mapping) and len(value) == 1:
            ((kind, raw),) = value.items()
            parts.append(wire_json(raw).strip('"') if kind != "S" else str(raw))
        else:
            parts.append("?")
    return " | ".join(parts)


@dataclass(frozen=True, slots=True)
class RecordView:
    """One record, decoded for display. Times are epoch seconds; ``None`` when absent."""

    key: str
    status: Status
    retryable: bool
    owner: str
    version: int
    claimed_at: float | None
    lease_expires_ms: int | None
    expires_at: float
    fingerprint: str | None
    region: str | None
    result: str
    removed_at: float | None = None  # a tombstone: TTL removed the record, the audit kept this

    @property
    def state(self) -> str:
        """PENDING, COMPLETED, or FAILED with whether the same request may claim it again."""
        if self.removed_at is not None:
            return f"{self.status.value} (tombstone)"
        if self.status is Status.FAILED:
            return "FAILED (retryable)" if self.retryable else "FAILED (final)"
        return str(self.status.value)

    @property
    def state_class(self) -> str:
        if self.removed_at is not None:
            return "tombstone"
        if self.status is Status.FAILED:
            return "failed-retryable" if self.retryable else "failed-final"
        return str(self.status.value).lower()

    @property
    def owner_short(self) -> str:
        """The owner token's random tail (its head is the claim time, alike in every token)."""
        return "…" + self.owner[-8:] if len(self.owner) > 9 else self.owner

    def expired(self, now: float) -> bool:
        """Past retention (what the claim condition's ``#exp < :now`` says)."""
        return self.expires_at < int(now)

    @property
    def lease_expires_at(self) -> float | None:
        return None if self.lease_expires_ms is None else self.lease_expires_ms / 1000

    def lease_over(self, now: float) -> bool:
        """Mirrors the claim condition's ``#lease < :now_ms``."""
        return self.lease_expires_ms is not None and self.lease_expires_ms < int(now * 1000)

    def condition(self, now: float) -> str:
        """What a duplicate of the same request would get now, in words."""
        if self.removed_at is not None and not self.expired(now):
            return "TTL removed this record; the audit's tombstone marks a retry of it as late"
        if self.expired(now):
            return "past retention: a retry of it is late, whether or not TTL deleted it"
        if self.status is Status.COMPLETED:
            return "a duplicate gets the stored result"
        if self.status is Status.FAILED and not self.retryable:
            return "a duplicate gets the stored failure"
        if self.status is Status.FAILED:
            return "the same request may claim it again at once"
        if self.lease_over(now):
            return "lease over: the same request may take it over"
        return "in progress: a duplicate is told to retry later"


def decode(item: Item, key_names: Sequence[str]) -> RecordView | None:
    """The record in ``item``, or ``None`` when the item is not an idempotency record."""
    try:
        record = Record.from_item(dict(item))
    except (KeyError, ValueError, TypeError, AttributeError, IndexError):
        return None
    return view(record, key_text(item, key_names))


def view(record: Record, key: str) -> RecordView:
    """``record`` (as :meth:`Idempotency.get` returns it) for display under ``key``."""
    return RecordView(
        key=key,
        status=record.status,
        retryable=record.retryable,
        owner=record.owner,
        version=record.version,
        claimed_at=record.claimed_at,
        lease_expires_ms=record.lease_expires_at,
        expires_at=float(record.expires_at),
        fingerprint=record.fingerprint,
        region=record.region,
        result=result_summary(record),
        removed_at=None if record.removed_at is None else float(record.removed_at),
    )


def result_summary(record: Record) -> str:
    """The stored outcome as a duplicate would get it, shortened: the result's JSON, or the
    failure's type and message."""
    if record.status is Status.PENDING:
        return ""
    if record.removed_at is not None:
        return "(removed by TTL; a tombstone keeps only owner, fingerprint and status)"
    replay = Replay("", record.status, record.result, record.error, record.expires_at)
    try:
        value = replay.value()
    except ReplayedFailureError as failure:
        return shorten(f"{failure.error_type}: {failure.message}")
    except Exception as exc:  # a foreign or damaged record: say so, never fail the page
        return f"(cannot decode: {type(exc).__name__})"
    if isinstance(value, (bytes, bytearray)):
        return f"{len(value)} bytes"
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        text = repr(value)
    stored = "compressed, " if isinstance(record.result, bytes) else ""
    return shorten(text) + (
        f" ({stored}{len(record.result or b'')} bytes stored)" if stored else ""
    )


# --- time, in words ---------------------------------------------------------------------------


def iso(at: float) -> str:
    """UTC ISO 8601 with seconds, as ``<time datetime>`` wants it."""
    return dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def span(seconds: float) -> str:
    """A duration in the two largest units: ``42 s``, ``3 min 5 s``, ``23 h 59 min``, ``2 d 4 h``."""
    total = int(abs(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    units = [(days, "d"), (hours, "h"), (minutes, "min"), (secs, "s")]
    while len(units) > 1 and units[0][0] == 0:
        units.pop(0)
    lead = units[:2]
    if len(lead) == 2 and lead[1][0] == 0:
        lead = lead[:1]
    return " ".join(f"{n} {u}" for n, u in lead)


def until(at: float, now: float) -> str:
    """``in 42 s`` or ``42 s ago`` (``now`` for less than a second either way)."""
    delta = at - now
    if abs(delta) < 1:
        return "now"
    return f"in {span(delta)}" if delta > 0 else f"{span(delta)} ago"


def relative(at: float, t0: float) -> str:
    """``t0 + 31 s`` / ``t0 - 5 s``: a scenario's times, counted from its start."""
    delta = at - t0
    if abs(delta) < 0.5:
        return "t0"
    sign = "+" if delta > 0 else "-"
    return f"t0 {sign} {span(delta)}"
