"""A stored record decoded for people: what ``firstwrite keys`` prints and the console shows.

Pure, no I/O. It reads the layer's item format (:class:`.record.Record`) in either layout
(:func:`.layout.layout_of` tells them apart, or the caller names one), decodes the stored
result and failure as a duplicate would get them (:mod:`.serialization`), and says what a
duplicate would get now from the layer's own verdict table (:func:`.verdicts.judge`). The front
ends keep only their presentation: the CLI's columns and JSON, the console's templates.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from firstwrite.shared import result_display

from . import serialization
from .errors import SerializationError
from .layout import DEFAULT, RecordLayout, layout_of
from .record import Record, Status
from .requests import NO_FINGERPRINT
from .result_placement import describe
from .verdicts import Verdict, judge

SUMMARY_CHARS = 120
TOMBSTONE = "(removed by TTL; a tombstone keeps only owner, fingerprint and status)"


def shorten(text: str, limit: int = SUMMARY_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def short_owner(owner: str) -> str:
    """The owner token's random tail (its head is the claim time, alike in every token)."""
    return "…" + owner[-8:] if len(owner) > 9 else owner


@dataclass(frozen=True, slots=True)
class StoredResult:
    """A COMPLETED record's ``result``: how it is stored, its size, the value as one line."""

    format: str  # serialization.stored_format, or "unreadable"
    stored_bytes: int
    summary: str  # shortened; for an unreadable result, why
    detail: tuple[str, ...] = ()  # the detailed view's lines (result_display.Shown.detail)

    @property
    def compressed(self) -> bool:
        return self.format.endswith("compressed")


@dataclass(frozen=True, slots=True)
class StoredFailure:
    """A FAILED record's ``error``, as :class:`.errors.ReplayedFailureError` replays it."""

    type: str
    message: str
    data: Any


def stored_result(raw: str | bytes, limit: int = SUMMARY_CHARS) -> StoredResult:
    """How ``raw`` (a record's ``result``) is stored, and its value in a line. A sealed
    result, or one kept in a result store, is described (where, how big, sealed), never
    shown: its bytes are ciphertext or a pointer (:func:`.result_placement.describe`)."""
    stored = len(raw.encode("utf-8")) if isinstance(raw, str) else len(raw)
    if isinstance(raw, bytes) and raw and raw[0] in (serialization.SEALED, serialization.POINTER):
        return _placed(raw, stored)
    try:
        value = serialization.decode(raw)
    except SerializationError as exc:  # corrupt or foreign: say so, never fail the display
        return StoredResult("unreadable", stored, str(exc))
    shown = result_display.show(value)  # a stored HTTP reply decoded; typed JSON's as text
    return StoredResult(
        serialization.stored_format(raw), stored, shown.summary(limit), shown.detail
    )


def _placed(raw: bytes, stored: int) -> StoredResult:
    try:
        where = describe(raw)
    except SerializationError as exc:
        return StoredResult("unreadable", stored, str(exc))
    sealed = "sealed (encrypted), " if where["sealed"] else ""
    if where["where"] == "inline":
        summary = f"<sealed result: {where['size']} B of ciphertext, not shown>"
    else:
        summary = (
            f"<{sealed}{where['size']} B in the {where['store']} result store at "
            f"{where['location']!r}>"
        )
    return StoredResult(serialization.stored_format(raw), stored, summary, ())


def stored_failure(text: str | None) -> StoredFailure:
    return StoredFailure(*serialization.read_error(text))


def record_of(item: Mapping[str, Any], layout: RecordLayout | None = None) -> Record | None:
    """The record in ``item`` (written in ``layout``; ``None``: the layout its attributes
    show), or ``None`` when the item is not an idempotency record (an ``owner`` of the form
    ``<token>:<version>`` and the layout's TTL attribute are required)."""
    layout = layout or layout_of(item)
    if layout is None:
        return None
    try:
        return Record.from_item(dict(item), layout)
    except (KeyError, ValueError, TypeError, AttributeError, IndexError):
        return None


@dataclass(frozen=True, slots=True)
class RecordView:
    """One record for display. Times are epoch seconds (``None`` when absent)."""

    record: Record
    result: StoredResult | None
    error: StoredFailure | None
    limit: int = SUMMARY_CHARS
    layout: RecordLayout = DEFAULT  # the layout the record was read in

    @property
    def status(self) -> Status:
        return self.record.status

    @property
    def version(self) -> int:
        return self.record.version

    @property
    def owner(self) -> str:
        return self.record.owner

    @property
    def owner_short(self) -> str:
        """The owner token shortened; ``hand-built`` for a row without owner."""
        return "hand-built" if self.record.foreign else short_owner(self.record.owner)

    @property
    def fingerprint(self) -> str | None:
        return self.record.fingerprint

    @property
    def region(self) -> str | None:
        return self.record.region

    @property
    def retryable(self) -> bool:
        return self.record.retryable

    @property
    def claimed_at(self) -> float | None:
        return self.record.claimed_at

    @property
    def lease_expires_ms(self) -> int | None:
        return self.record.lease_expires_at

    @property
    def lease_expires_at(self) -> float | None:
        lease = self.record.lease_expires_at
        return None if lease is None else lease / 1000

    @property
    def expires_at(self) -> int:
        return self.record.expires_at

    @property
    def removed_at(self) -> int | None:
        """Set on a tombstone: when TTL removed the record (the audit kept this)."""
        return self.record.removed_at

    @property
    def state(self) -> str:
        """PENDING, COMPLETED, or FAILED with whether the same request may claim it again; a
        tombstone says so."""
        if self.record.removed:
            return f"{self.status.value} (tombstone)"
        hand = ", hand-built" if self.record.foreign else ""
        if self.status is Status.FAILED:
            return ("FAILED (retryable" if self.retryable else "FAILED (final") + hand + ")"
        return str(self.status.value) + (" (hand-built)" if hand else "")

    @property
    def kind(self) -> str:
        """The state as one lower-case word: pending, completed, failed-retryable,
        failed-final or tombstone."""
        if self.record.removed:
            return "tombstone"
        return self.state.lower().replace(" (", "-").rstrip(")")

    @property
    def outcome(self) -> str:
        """What a duplicate gets back, on one line: the result's JSON, or the failure's type and
        message (empty while PENDING)."""
        if self.record.removed:
            return TOMBSTONE
        if self.result is not None:
            if self.result.format == "unreadable":
                return f"(cannot decode: {self.result.summary})"
            return self.result.summary
        if self.error is not None:
            return shorten(f"{self.error.type}: {self.error.message}", self.limit)
        return ""

    def expired(self, now: float) -> bool:
        """Past retention (the claim condition's ``#exp < :now``)."""
        return self.record.expired(now)

    def lease_over(self, now: float) -> bool:
        """The claim condition's ``#lease < :now_ms``."""
        return self.record.lease_over(now)

    def condition(self, now: float) -> str:
        """What a duplicate of the same request would get now, in words (with the default
        configuration: ``refuse_late_retries`` off)."""
        rec = self.record
        verdict = judge(rec, "", rec.fingerprint or NO_FINGERPRINT, now)
        if verdict is Verdict.LATE:
            return "TTL removed this record; the audit's tombstone marks a retry of it as late"
        if verdict is Verdict.REPLACE:
            return "TTL removed this record; a request with its key runs again"
        if verdict is Verdict.REPLAY:
            if rec.status is Status.COMPLETED:
                return "a duplicate gets the stored result"
            return "a duplicate gets the stored failure"
        if verdict is Verdict.IN_PROGRESS:
            return "in progress: a duplicate is told to retry later"
        # CLAIMABLE (our own owner and another fingerprint cannot be: none was given)
        if rec.removed:
            return "TTL removed this record and its tombstone's window is over: a retry runs again"
        if rec.expired(now):
            return "past retention: a retry of it is late, whether or not TTL deleted it"
        if rec.status is Status.FAILED:
            return "the same request may claim it again at once"
        return "lease over: the same request may take it over"


def view(
    record: Record, *, limit: int = SUMMARY_CHARS, layout: RecordLayout = DEFAULT
) -> RecordView:
    """``record`` (as :meth:`~.guard.Idempotency.get` returns it) for display; results shortened to
    ``limit`` characters."""
    result = None if record.result is None else stored_result(record.result, limit)
    error = None if record.error is None else stored_failure(record.error)
    return RecordView(record, result, error, limit, layout)


def decode(
    item: Mapping[str, Any], *, limit: int = SUMMARY_CHARS, layout: RecordLayout | None = None
) -> RecordView | None:
    """The record in a stored ``item`` for display (in ``layout``, or the one its attributes
    show), or ``None`` when it is not a record."""
    layout = layout or layout_of(item)
    record = None if layout is None else record_of(item, layout)
    return None if record is None or layout is None else view(record, limit=limit, layout=layout)
