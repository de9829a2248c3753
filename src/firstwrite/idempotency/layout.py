"""The record's attribute names: one frozen :class:`RecordLayout`, the default or seed 001's.

Every request builder (:mod:`.requests`), the item decoder (:class:`.record.Record`), the TTL
audit and the tools read the names from a layout, so both layouts take one code path. The
default is the layer's own compact item (snake_case, the status derived from which outcome is
stored). :meth:`RecordLayout.seed_001` reads and writes seed 001's item: ``status`` written
explicitly on every status change, the result in ``resultId``, ``claimedAt`` and the TTL
attribute ``expiresAt`` in epoch seconds, camelCase everywhere else. :func:`layout_of` tells the
two apart from a stored item (for tools that read tables they did not write).

A layout with an explicit status also reads *hand-built* rows (no ``owner``: the seed's four
attributes) in either status vocabulary (:data:`VOCABULARIES`), and writes the one it names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from .errors import ConfigurationError

Vocabulary = Literal["upper", "lower"]
VOCABULARIES: dict[str, tuple[str, str, str]] = {
    "upper": ("PENDING", "COMPLETED", "FAILED"),
    "lower": ("in_progress", "succeeded", "failed"),
}
"""The status words (pending, completed, failed) of each vocabulary: seed 001's two."""

FinalValue = bool | int | str

Reading = tuple[str, str, str, str, str, str, str, str, str, str | None]
"""owner, lease, expires, fingerprint, result, error, region, removed_at, removed_status, status"""


@dataclass(frozen=True, slots=True)
class RecordLayout:
    """The attribute names of a record (the key attributes are configured apart).

    ``status`` and ``claimed_at`` name attributes written explicitly on every claim (and
    ``status`` on every completion and failure); ``None`` (the default layout) writes neither and
    derives them: the status from ``result``/``error``, the claim time from the owner token.

    ``marks`` names the list of recovery points a claim's work records
    (:mod:`firstwrite.idempotency.recovery`); ``None``: this layout refuses them.
    ``vocabulary`` is the status words written (both are read). ``version`` names a number
    written 1 at claim and +1 on every transition (seed 001's Variant 2), also part of every
    fenced write's condition. For hand-built rows (no ``owner``): ``hold`` (seconds) holds an
    in-progress row until ``claimedAt + hold`` when that is before its ``expiresAt`` (a row
    without ``expiresAt`` needs it); ``final`` = ``(attribute, value)`` marks a failed row final
    (not reclaimable), e.g. ``("retryable", False)``.
    """

    name: str = "default"
    owner: str = "owner"
    lease: str = "lease_expires_at"
    expires: str = "expires_at"
    fingerprint: str = "fingerprint"
    result: str = "result"
    error: str = "error"
    region: str = "region"
    removed_at: str = "removed_at"
    removed_status: str = "removed_status"
    status: str | None = None
    claimed_at: str | None = None
    version: str | None = None
    marks: str | None = "marks"
    vocabulary: Vocabulary = "upper"
    hold: float | None = None
    final: tuple[str, FinalValue] | None = None
    # What Record.from_item reads, in its order, looked up once per duplicate as one tuple.
    reading: Reading = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names = [n for n in (getattr(self, role) for role in _ROLES) if n is not None]
        if len(set(names)) != len(names) or not all(names):
            raise ConfigurationError(f"record layout {self.name!r}: names must be distinct")
        if self.vocabulary not in VOCABULARIES:
            raise ConfigurationError(
                f"record layout {self.name!r}: unknown vocabulary {self.vocabulary!r} "
                f"(known: {', '.join(VOCABULARIES)})"
            )
        if self.hold is not None and not self.hold > 0:
            raise ConfigurationError(f"record layout {self.name!r}: hold must be > 0 seconds")
        reading: Reading = (
            *(self.owner, self.lease, self.expires, self.fingerprint, self.result),
            *(self.error, self.region, self.removed_at, self.removed_status, self.status),
        )
        object.__setattr__(self, "reading", reading)

    @classmethod
    def seed_001(
        cls,
        vocabulary: Vocabulary = "upper",
        *,
        hold: float | None = None,
        final: tuple[str, FinalValue] | None = None,
    ) -> RecordLayout:
        """Seed 001's item: ``status``, ``resultId``, ``claimedAt``, ``expiresAt`` (TTL),
        ``version``; ``vocabulary`` ``"upper"`` (``PENDING``...) or ``"lower"``
        (``in_progress``...); ``hold`` and ``final`` as in the class docstring."""
        if (vocabulary, hold, final) == ("upper", None, None):
            return SEED_001
        return replace(SEED_001, vocabulary=vocabulary, hold=hold, final=final)

    @property
    def words(self) -> tuple[str, str, str]:
        """The status words written: pending, completed, failed."""
        return VOCABULARIES[self.vocabulary]

    @property
    def explicit(self) -> bool:
        """Whether ``status`` (and ``claimedAt``) are written rather than derived."""
        return self.status is not None

    def names(self) -> dict[str, str]:
        """Role -> attribute name, for display (``table describe``, the docs)."""
        return {role: value for role in _ROLES if (value := getattr(self, role)) is not None}


_ROLES = (
    "owner",
    "lease",
    "expires",
    "fingerprint",
    "result",
    "error",
    "region",
    "removed_at",
    "removed_status",
    "status",
    "claimed_at",
    "version",
    "marks",
)

DEFAULT = RecordLayout()
SEED_001 = RecordLayout(
    name="seed-001",
    owner="owner",
    lease="leaseExpiresAt",
    expires="expiresAt",
    fingerprint="fingerprint",
    result="resultId",
    error="error",
    region="region",
    removed_at="removedAt",
    removed_status="removedStatus",
    status="status",
    claimed_at="claimedAt",
    version="version",
    marks="recoveryPoints",
)
LAYOUTS = {DEFAULT.name: DEFAULT, SEED_001.name: SEED_001}


def named(name: str) -> RecordLayout:
    """The layout called ``name`` (``default`` or ``seed-001``)."""
    try:
        return LAYOUTS[name]
    except KeyError:
        raise ConfigurationError(
            f"unknown record layout {name!r} (known: {', '.join(LAYOUTS)})"
        ) from None


STATUS_WORDS = frozenset(w for words in VOCABULARIES.values() for w in words)


def layout_of(item: Mapping[str, Any]) -> RecordLayout | None:
    """The known layout ``item`` was written in (by its TTL attribute, which every record and
    tombstone carries, beside ``owner``; or, for a hand-built row without ``owner``, a known
    status word beside ``expiresAt`` or ``claimedAt``), or ``None`` for an item of neither."""
    for layout in LAYOUTS.values():
        if layout.expires in item and layout.owner in item:
            return layout
    status = item.get(SEED_001.status or "")
    if (
        status is not None
        and status.get("S") in STATUS_WORDS
        and (SEED_001.expires in item or (SEED_001.claimed_at or "") in item)
    ):
        return SEED_001
    return None


def vocabulary_of(item: Mapping[str, Any], layout: RecordLayout) -> Vocabulary | None:
    """The vocabulary of ``item``'s status word, or ``None`` (no status attribute, or a
    tombstone)."""
    value = item.get(layout.status or "")
    word = None if value is None else value.get("S")
    for name, words in VOCABULARIES.items():
        if word in words:
            return "upper" if name == "upper" else "lower"
    return None
