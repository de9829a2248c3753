"""The idempotency record: the DynamoDB item <-> :class:`Record`, and its :class:`Status`.

Attribute names are fixed (except the key attributes) so every expression string is a module
constant, built once. Times: ``claimed_at`` and ``expires_at`` are epoch seconds (``expires_at``
is the table's TTL attribute, which DynamoDB requires in seconds); ``lease_expires_at`` is epoch
milliseconds, because leases are short and compared precisely.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

A_STATUS = "status"
A_VERSION = "version"
A_OWNER = "owner"
A_CLAIMED_AT = "claimed_at"
A_LEASE = "lease_expires_at"
A_EXPIRES = "expires_at"
A_FINGERPRINT = "fingerprint"
A_RESULT = "result"
A_ERROR = "error"
A_RETRYABLE = "retryable"
A_REGION = "region"

TTL_ATTRIBUTE = A_EXPIRES


class Status(enum.Enum):
    PENDING = "PENDING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"


_STATUS = {s.value: s for s in Status}


@dataclass(frozen=True, slots=True)
class Record:
    """One stored record, decoded. ``result`` is the raw stored value (``str`` JSON or
    ``bytes``); :mod:`.serialization` turns it back into the caller's type."""

    status: Status
    version: int
    owner: str
    claimed_at: int
    lease_expires_at: int | None
    expires_at: int
    fingerprint: str | None
    result: str | bytes | None = None
    error: str | None = None
    retryable: bool = False
    region: str | None = None

    def expired(self, now: float) -> bool:
        """Past its retention (mirrors the claim condition's ``expires_at < :now``). TTL removes
        items late, so an expired item that is still there counts as absent."""
        return self.expires_at < int(now)

    def lease_over(self, now: float) -> bool:
        return self.lease_expires_at is not None and self.lease_expires_at < int(now * 1000)

    def claimable(self, now: float, fingerprint: str) -> bool:
        """Would the claim condition accept a claim with ``fingerprint`` over this record?"""
        if self.expired(now):
            return True
        if not _same(self.fingerprint, fingerprint):
            return False
        if self.status is Status.PENDING:
            return self.lease_over(now)
        return self.status is Status.FAILED and self.retryable

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> Record:
        lease = item.get(A_LEASE)
        fp = item.get(A_FINGERPRINT)
        result = item.get(A_RESULT)
        error = item.get(A_ERROR)
        region = item.get(A_REGION)
        retryable = item.get(A_RETRYABLE)
        return cls(
            status=_STATUS[item[A_STATUS]["S"]],
            version=int(item[A_VERSION]["N"]),
            owner=item[A_OWNER]["S"],
            claimed_at=int(float(item[A_CLAIMED_AT]["N"])),
            lease_expires_at=None if lease is None else int(float(lease["N"])),
            expires_at=int(float(item[A_EXPIRES]["N"])),
            fingerprint=None if fp is None else fp["S"],
            result=None if result is None else _raw(result),
            error=None if error is None else error["S"],
            retryable=bool(retryable and retryable.get("BOOL")),
            region=None if region is None else region["S"],
        )


def _raw(value: dict[str, Any]) -> str | bytes:
    if "S" in value:
        return str(value["S"])
    raw = value["B"]
    return bytes(raw)


def _same(stored: str | None, given: str) -> bool:
    # Mirrors the claim condition's ``#fp IN (:fp, :nofp)`` (or no check when given is "-").
    from .keys import NO_FINGERPRINT

    return stored == given or NO_FINGERPRINT in (stored, given)
