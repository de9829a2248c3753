"""The idempotency record: the DynamoDB item <-> :class:`Record`, and its :class:`Status`.

The item is kept as small as the guarantees allow, because every attribute is paid for on every
request (botocore validates, serialises and parses each one, DynamoDB bills item size):

* ``owner`` is the fence and carries the claim's version: ``<token>:<version>``. The token is
  32 hex digits, the first 12 of which are the claim time in epoch milliseconds (so
  ``claimed_at`` needs no attribute of its own), the other 20 random (80 bits).
* ``lease_expires_at`` (epoch milliseconds) is present exactly while the record may be taken
  over by the same request once it has passed: PENDING records, and retryable FAILED records
  (lease ``0``). ``expires_at`` is the TTL attribute, which DynamoDB requires in epoch seconds.
  Both are integers: a number with a fraction costs DynamoDB clients and our engine more to
  validate and compare than a second placeholder does.
* The status is which outcome attribute is present: ``result`` (COMPLETED), ``error``
  (FAILED), neither (PENDING).
* ``fingerprint`` is absent when payload validation was off for the claim.

Attribute names are fixed (except the key attributes) so every expression string is a module
constant, built once.
"""

from __future__ import annotations

import enum
from typing import Any, NamedTuple

A_OWNER = "owner"
A_LEASE = "lease_expires_at"
A_EXPIRES = "expires_at"
A_FINGERPRINT = "fingerprint"
A_RESULT = "result"
A_ERROR = "error"
A_REGION = "region"
A_CLAIMED_AT = "claimed_at"  # not written any more; read from records of older versions

TTL_ATTRIBUTE = A_EXPIRES
NO_FINGERPRINT = "-"  # a request without payload validation: matches any stored record

TOKEN_TIME_DIGITS = 12  # hex digits of epoch ms at the start of an owner token (to year 10889)


class Status(enum.Enum):
    PENDING = "PENDING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"


def millis(now: float) -> int:
    """``now`` (epoch seconds) in whole milliseconds: the one rounding every check uses."""
    return int(now * 1000)


def _integer(number: str) -> int:
    return int(number) if number.lstrip("-").isdigit() else int(float(number))


def fence(token: str, version: int) -> str:
    """The ``owner`` attribute value: token and version, what fenced writes compare."""
    return f"{token}:{version}"


def split_fence(value: str) -> tuple[str, int]:
    token, _, version = value.rpartition(":")
    return token, int(version)


def token_time(token: str) -> float | None:
    """The claim time (epoch seconds) an owner token carries, or ``None`` for a foreign one."""
    try:
        return int(token[:TOKEN_TIME_DIGITS], 16) / 1000
    except ValueError:
        return None


def claimed_at_of(item: dict[str, Any]) -> float | None:
    """When the item's claim was made: its owner token, or a ``claimed_at`` attribute."""
    explicit = item.get(A_CLAIMED_AT)
    if explicit is not None:
        return float(explicit["N"])
    owner = item.get(A_OWNER)
    if owner is None:
        return None
    return token_time(split_fence(owner["S"])[0]) if ":" in owner["S"] else None


class Record(NamedTuple):
    """One stored record, decoded. ``result`` is the raw stored value (``str`` JSON or
    ``bytes``); :mod:`.serialization` turns it back into the caller's type. Times:
    ``expires_at`` epoch seconds, ``lease_expires_at`` epoch milliseconds.

    An immutable named tuple rather than a frozen dataclass: one is decoded per duplicate
    request, and building a frozen dataclass costs three times as much (1.4 us, measured)."""

    status: Status
    version: int
    owner: str
    lease_expires_at: int | None
    expires_at: int
    fingerprint: str | None
    result: str | bytes | None = None
    error: str | None = None
    region: str | None = None

    @property
    def retryable(self) -> bool:
        """A FAILED record the same request may claim again at once (it keeps a lease of 0)."""
        return self.status is Status.FAILED and self.lease_expires_at is not None

    @property
    def claimed_at(self) -> float | None:
        """The claim time (epoch seconds), from the owner token."""
        return token_time(self.owner)

    def expired(self, now: float) -> bool:
        """Past its retention (mirrors the claim condition's ``#exp < :now``). TTL removes
        items late, so an expired item that is still there counts as absent."""
        return self.expires_at < int(now)

    def lease_over(self, now: float) -> bool:
        """Mirrors ``#lease < :now_ms``: false without a lease (COMPLETED, final FAILED)."""
        return self.lease_expires_at is not None and self.lease_expires_at < millis(now)

    def claimable(self, now: float, fingerprint: str) -> bool:
        """Would the claim condition accept a claim with ``fingerprint`` over this record?"""
        if self.expired(now):
            return True
        return same_request(self.fingerprint, fingerprint) and self.lease_over(now)

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> Record:
        lease = item.get(A_LEASE)
        fp = item.get(A_FINGERPRINT)
        result = item.get(A_RESULT)
        error = item.get(A_ERROR)
        region = item.get(A_REGION)
        token, version = split_fence(item[A_OWNER]["S"])
        if result is not None:
            status = Status.COMPLETED
        elif error is not None:
            status = Status.FAILED
        else:
            status = Status.PENDING
        return cls(
            status=status,
            version=version,
            owner=token,
            lease_expires_at=None if lease is None else _integer(lease["N"]),
            expires_at=_integer(item[A_EXPIRES]["N"]),
            fingerprint=None if fp is None else fp["S"],
            result=None if result is None else _raw(result),
            error=None if error is None else error["S"],
            region=None if region is None else region["S"],
        )


def _raw(value: dict[str, Any]) -> str | bytes:
    if "S" in value:
        return str(value["S"])
    raw = value["B"]
    return bytes(raw)


def same_request(stored: str | None, given: str) -> bool:
    """May a request with fingerprint ``given`` use a record stored with ``stored``? Mirrors the
    claim condition's ``(#fp = :fp OR attribute_not_exists(#fp))``; a claim without a
    fingerprint (``given`` is ``"-"``) uses the condition without the check."""
    return stored is None or stored == given or given == NO_FINGERPRINT
