"""The record's attribute names: one frozen :class:`RecordLayout`, the default or seed 001's.

Every request builder (:mod:`.requests`), the item decoder (:class:`.record.Record`), the TTL
audit and the tools read the names from a layout, so both layouts take one code path. The
default is the layer's own compact item (snake_case, the status derived from which outcome is
stored). :meth:`RecordLayout.seed_001` reads and writes seed 001's item: ``status`` written
explicitly on every status change, the result in ``resultId``, ``claimedAt`` and the TTL
attribute ``expiresAt`` in epoch seconds, camelCase everywhere else. :func:`layout_of` tells the
two apart from a stored item (for tools that read tables they did not write).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import ConfigurationError

Reading = tuple[str, str, str, str, str, str, str, str, str, str | None]
"""owner, lease, expires, fingerprint, result, error, region, removed_at, removed_status, status"""


@dataclass(frozen=True, slots=True)
class RecordLayout:
    """The attribute names of a record (the key attributes are configured apart).

    ``status`` and ``claimed_at`` name attributes written explicitly on every claim (and
    ``status`` on every completion and failure); ``None`` (the default layout) writes neither and
    derives them: the status from ``result``/``error``, the claim time from the owner token.
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
    # What Record.from_item reads, in its order, looked up once per duplicate as one tuple.
    reading: Reading = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names = [n for n in (getattr(self, role) for role in _ROLES) if n is not None]
        if len(set(names)) != len(names) or not all(names):
            raise ConfigurationError(f"record layout {self.name!r}: names must be distinct")
        reading: Reading = (
            *(self.owner, self.lease, self.expires, self.fingerprint, self.result),
            *(self.error, self.region, self.removed_at, self.removed_status, self.status),
        )
        object.__setattr__(self, "reading", reading)

    @classmethod
    def seed_001(cls) -> RecordLayout:
        """Seed 001's item: ``status``, ``resultId``, ``claimedAt``, ``expiresAt`` (TTL)."""
        return SEED_001

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


def layout_of(item: Mapping[str, Any]) -> RecordLayout | None:
    """The known layout ``item`` was written in (by its TTL attribute, which every record and
    tombstone carries), or ``None`` for an item of neither."""
    for layout in LAYOUTS.values():
        if layout.expires in item and layout.owner in item:
            return layout
    return None
