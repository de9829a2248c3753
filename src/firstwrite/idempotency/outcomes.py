"""What a claim gives back.

A :class:`Claim` to complete or fail, or a :class:`Replay` of the stored outcome. Plain immutable values, shared by the machine and both drivers."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from . import serialization
from .errors import ReplayedFailureError
from .record import Status
from .requests import Key

if TYPE_CHECKING:
    from .recovery import Interrupted
    from .result_placement import Placement


class _Unset(enum.Enum):
    UNSET = enum.auto()


UNSET = _Unset.UNSET
"""``payload`` not given: the request is identified by its key alone (no mismatch check)."""


@dataclass(frozen=True, slots=True)
class Claim:
    """Proof that this caller holds a key. Pass it to complete/fail/renew."""

    record_id: str
    key: Key  # the record's DynamoDB key
    owner: str
    version: int
    fingerprint: str
    claimed_at: float
    lease_expires_at: int  # epoch ms
    previous: Status | None = None  # what the claim replaced (None: a first claim)
    region: str | None = None
    expires_at: int = 0  # epoch s: the record's retention end (set by claim and renew)
    idempotency_key: str | None = None  # the caller's key, as given to claim()
    # the replaced record's recovery points, when it had any (.recovery): reconciled first
    recovering: Interrupted | None = None

    @property
    def taken_over(self) -> bool:
        """This claim replaced an abandoned PENDING claim (its worker may have done part of the
        side effect: make the side effect itself idempotent or check business state)."""
        return self.previous is Status.PENDING

    @property
    def fencing_token(self) -> str:
        """Pass downstream to let other systems refuse a stale worker."""
        return f"{self.owner}:{self.version}"


class Attempt(NamedTuple):
    """A claim being tried: what its :class:`Claim` will be, far cheaper to build than a frozen
    dataclass, and most duplicates never become one."""

    record_id: str
    key: Key
    owner: str
    fingerprint: str
    claimed_at: float
    lease_expires_at: int
    region: str | None
    expires_at: int
    idempotency_key: str

    def claim(self, previous: Status | None = None) -> Claim:
        # positional, in Claim's field order: a fifth cheaper than keywords (once per request)
        return Claim(
            self.record_id,
            self.key,
            self.owner,
            1,  # version
            self.fingerprint,
            self.claimed_at,
            self.lease_expires_at,
            previous,
            self.region,
            self.expires_at,
            self.idempotency_key,
        )


@dataclass(frozen=True, slots=True)
class Replay:
    """The stored outcome of an earlier request with the same key and fingerprint."""

    record_id: str
    status: Status
    raw_result: str | bytes | None
    error: str | None
    expires_at: int
    idempotency_key: str | None = None  # the caller's key, as given to claim()
    # A hand-built row's ``resultId`` goes through the configuration's ``load_result``.
    load: Callable[[Any], Any] | None = None
    placement: Placement | None = None  # the result store and cipher, when configured

    @property
    def completed(self) -> bool:
        return self.status is Status.COMPLETED

    def value(self, result_type: Any = None) -> Any:
        """The replayed result, or :class:`ReplayedFailureError` for a stored failure. A
        result in a result store is read from it (size and digest checked) and a sealed one
        opened (:mod:`.result_placement`); their errors are raised as they are."""
        if self.status is Status.COMPLETED:
            if self.load is not None:
                return self.load(serialization.decode(self.raw_result))
            if self.placement is None:
                return serialization.decode(self.raw_result, result_type)
            raw = self.placement.inner(serialization.from_text(self.raw_result), self.record_id)
            return serialization.decode(raw, result_type)
        error_type, message, data = serialization.read_error(self.error)
        raise ReplayedFailureError(
            self.idempotency_key or self.record_id,
            error_type,
            message,
            data,
            record_id=self.record_id,
        )

    def answer(self, result_type: Any, on_replay: Callable[[str, Any], Any] | None) -> Any:
        """:meth:`value`, passed through ``on_replay(key, value)`` when there is one (the
        configuration's hook: what it returns, unless ``None``, is the answer)."""
        value = self.value(result_type)
        if on_replay is not None:
            marked = on_replay(self.idempotency_key or self.record_id, value)
            if marked is not None:
                return marked
        return value


Outcome = Claim | Replay


def key_of(holder: Claim | Attempt | Replay) -> str:
    """The caller's key for messages and logs (a hand-built claim may only have its id)."""
    return holder.idempotency_key or holder.record_id
