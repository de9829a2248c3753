"""The idempotency record: the DynamoDB item <-> :class:`Record`, and its :class:`Status`.

The item is as small as the guarantees allow (every attribute is paid for on every request):

* ``owner`` is the fence and carries the claim's version: ``<token>:<version>``. The token is
  32 hex digits, the first 12 of which are the claim time in epoch milliseconds (so
  ``claimed_at`` needs no attribute of its own), the other 20 random (80 bits).
* ``lease_expires_at`` (epoch milliseconds) is present exactly while the record may be taken
  over by the same request once it has passed: PENDING records, and retryable FAILED records
  (lease ``0``). ``expires_at`` is the TTL attribute, in epoch seconds. Both are integers.
* The status is which outcome attribute is present: ``result`` (COMPLETED), ``error``
  (FAILED), neither (PENDING).
* ``fingerprint`` is absent when payload validation was off for the claim.
* A tombstone (written by the TTL audit after TTL removed a finished record) carries the removed
  record's ``owner``, ``fingerprint`` and status (``removed_status``), and ``removed_at``.

These are the default layout's names; :meth:`Record.from_item` reads any
:class:`~.layout.RecordLayout` (an explicit ``status`` in either vocabulary; with one, also a
*hand-built* row without ``owner``: :func:`foreign_record`).
"""

from __future__ import annotations

import enum
import json
from typing import Any, NamedTuple

from . import requests as q
from .layout import DEFAULT, VOCABULARIES, FinalValue, RecordLayout, layout_of

# The item's wire names and owner-token helpers live with the requests (:mod:`.requests`);
# re-exported here, where older code imported them from.
from .requests import (
    A_CLAIMED_AT,
    A_ERROR,
    A_EXPIRES,
    A_FINGERPRINT,
    A_LEASE,
    A_OWNER,
    A_REGION,
    A_REMOVED_AT,
    A_REMOVED_STATUS,
    A_RESULT,
    NO_FINGERPRINT,
    TOKEN_TIME_DIGITS,
    TTL_ATTRIBUTE,
    fence,
    millis,
    same_request,
    split_fence,
    token_time,
)

__all__ = [
    "A_CLAIMED_AT",
    "A_ERROR",
    "A_EXPIRES",
    "A_FINGERPRINT",
    "A_LEASE",
    "A_OWNER",
    "A_REGION",
    "A_REMOVED_AT",
    "A_REMOVED_STATUS",
    "A_RESULT",
    "NO_FINGERPRINT",
    "TOKEN_TIME_DIGITS",
    "TTL_ATTRIBUTE",
    "Record",
    "Status",
    "as_seen",
    "claimed_at_of",
    "convert_item",
    "fence",
    "foreign_record",
    "millis",
    "same_request",
    "split_fence",
    "token_time",
]


class Status(enum.Enum):
    PENDING = "PENDING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"


# Every status word of every vocabulary (:data:`.layout.VOCABULARIES`), to its status.
_WORDS = {
    word: status
    for words in VOCABULARIES.values()
    for word, status in zip(words, (Status.PENDING, Status.COMPLETED, Status.FAILED), strict=True)
}
NEVER = 2**53  # the expiry of a hand-built row without ``expiresAt``: it never expires


def _integer(number: str) -> int:
    try:
        return int(number)
    except ValueError:  # a number with a fraction or an exponent (not written by this layer)
        return int(float(number))


def claimed_at_of(item: dict[str, Any], layout: RecordLayout = DEFAULT) -> float | None:
    """When the item's claim was made: its owner token, or a ``claimed_at`` attribute."""
    explicit = item.get(layout.claimed_at or A_CLAIMED_AT)
    if explicit is not None:
        return float(explicit["N"])
    owner = item.get(layout.owner)
    if owner is None:
        return None
    return token_time(split_fence(owner["S"])[0]) if ":" in owner["S"] else None


class Record(NamedTuple):
    """One stored record, decoded. ``result`` is the raw stored value (``str`` JSON or
    ``bytes``); :mod:`.serialization` turns it back into the caller's type. Times:
    ``expires_at`` epoch seconds, ``lease_expires_at`` epoch milliseconds.

    A *tombstone* (``removed_at`` set) stands for a record the TTL service removed: its status,
    owner and fingerprint are the removed record's, and nothing else is kept (see
    :mod:`.audit`).

    An immutable named tuple rather than a frozen dataclass: one is decoded per duplicate
    request, and a named tuple is the cheaper of the two to build."""

    status: Status
    version: int
    owner: str
    lease_expires_at: int | None
    expires_at: int
    fingerprint: str | None
    result: str | bytes | None = None
    error: str | None = None
    region: str | None = None
    removed_at: int | None = None

    @property
    def retryable(self) -> bool:
        """A FAILED record the same request may claim again at once (it keeps a lease of 0)."""
        return self.status is Status.FAILED and self.lease_expires_at is not None

    @property
    def finished(self) -> bool:
        """COMPLETED, or FAILED for good: an answer every duplicate gets."""
        return self.status is Status.COMPLETED or (
            self.status is Status.FAILED and self.lease_expires_at is None
        )

    @property
    def removed(self) -> bool:
        """A tombstone of a record TTL removed."""
        return self.removed_at is not None

    @property
    def foreign(self) -> bool:
        """A hand-built row (no ``owner``): see :func:`foreign_record`."""
        return self.owner[:1] == q.FOREIGN

    @property
    def claimed_at(self) -> float | None:
        """The claim time (epoch seconds), from the owner token (a hand-built row's
        ``claimedAt``)."""
        if self.owner[:1] == q.FOREIGN:
            claimed = q.foreign_seen_parts(self.owner)[1]
            return None if claimed is None else float(claimed)
        return token_time(self.owner)

    def expired(self, now: float) -> bool:
        """Past its retention: the claim condition's ``#exp < :now``
        (:func:`.requests.past_retention`)."""
        return q.past_retention(self.expires_at, now)

    def lease_over(self, now: float) -> bool:
        """The claim condition's ``#lease < :now_ms`` (:func:`.requests.lease_passed`)."""
        return q.lease_passed(self.lease_expires_at, now)

    def claimable(self, now: float, fingerprint: str) -> bool:
        """Would the claim condition accept a claim with ``fingerprint`` over this record?
        (:func:`.requests.claim_allows`)."""
        return q.claim_allows(self, fingerprint, now)

    @classmethod
    def from_item(cls, item: dict[str, Any], layout: RecordLayout = DEFAULT) -> Record:
        """The record in ``item``, written in ``layout``."""
        # Once per duplicate: positional fields (a third of the keyword build), the fence split
        # inline.
        get = item.get
        a_own, a_lease, a_exp, a_fp, a_res, a_err, a_reg, a_rem, a_rem_st, a_st = layout.reading
        lease = get(a_lease)
        fp = get(a_fp)
        result = get(a_res)
        error = get(a_err)
        region = get(a_reg)
        removed = get(a_rem)
        explicit = None if a_st is None else get(a_st)
        owner = get(a_own)
        if owner is None and explicit is not None:
            return foreign_record(item, layout)
        token, _, version = owner["S"].rpartition(":")  # type: ignore[index]
        if removed is not None:
            status = Status(item[a_rem_st]["S"])
        elif explicit is not None:
            status = _WORDS[explicit["S"]]
        elif result is not None:
            status = Status.COMPLETED
        elif error is not None:
            status = Status.FAILED
        else:
            status = Status.PENDING
        return cls(
            status,
            int(version),
            token,
            None if lease is None else _integer(lease["N"]),
            _integer(item[a_exp]["N"]),
            None if fp is None else fp["S"],
            None if result is None else _raw(result),
            None if error is None else error["S"],
            None if region is None else region["S"],
            None if removed is None else _integer(removed["N"]),
        )


def foreign_record(item: dict[str, Any], layout: RecordLayout) -> Record:
    """A hand-built row of seed 001's model (``status``, ``resultId``, ``claimedAt``,
    ``expiresAt``, no ``owner``) as a :class:`Record`; raises ``KeyError`` for an unknown status
    word and ``ValueError`` for an in-progress row with no end (no ``expiresAt``, and no
    ``claimedAt`` with ``layout.hold``).

    * in progress: a claim held until its ``expiresAt``, or ``claimedAt + layout.hold`` when
      earlier (``lease_expires_at``), then taken over under the as-seen condition
      (:func:`.requests.foreign_seen`);
    * succeeded: replayed; its ``resultId`` is the result as stored (a string, a number, bytes);
    * failed: reclaimable at once (lease ``0``), unless ``layout.final`` marks it final.

    ``owner`` is the as-seen identity (``~`` + status word, ``claimedAt``, ``expiresAt``,
    ``version``), so the machine's replace path takes such a row over only as it was seen."""
    word = item[layout.status or ""]["S"]
    status = _WORDS[word]
    claimed = item.get(layout.claimed_at or "")
    expires = item.get(layout.expires)
    version = item.get(layout.version or "")
    expires_at = NEVER if expires is None else _integer(expires["N"])
    lease: int | None = None
    if status is Status.PENDING:
        ends = [] if expires is None else [expires_at * 1000]
        if claimed is not None and layout.hold is not None:
            ends.append(int((float(claimed["N"]) + layout.hold) * 1000))
        if not ends:
            raise ValueError(
                "an in-progress row without expiresAt needs claimedAt and the layout's hold "
                "(RecordLayout.seed_001(hold=seconds))"
            )
        lease = min(ends)
    elif status is Status.FAILED and not _marked_final(item, layout.final):
        lease = 0
    result = item.get(layout.result)
    raw: str | bytes | None = None
    if result is not None and status is Status.COMPLETED:
        if "S" in result:
            raw = json.dumps(result["S"], ensure_ascii=False)
        elif "N" in result:
            raw = result["N"]
        elif "B" in result:
            raw = b"\x02" + bytes(result["B"])  # serialization's raw-bytes tag
    fp = item.get(layout.fingerprint)
    error = item.get(layout.error)
    seen = q.foreign_seen(
        word,
        None if claimed is None else claimed["N"],
        None if expires is None else expires["N"],
        None if version is None else version["N"],
    )
    return Record(
        status,
        0 if version is None else _integer(version["N"]),
        seen,
        lease,
        expires_at,
        None if fp is None else fp.get("S"),
        raw,
        None if error is None else error.get("S"),
    )


def _marked_final(item: dict[str, Any], final: tuple[str, FinalValue] | None) -> bool:
    if final is None:
        return False
    name, value = final
    return item.get(name) == q.attribute_value(value)


def _raw(value: dict[str, Any]) -> str | bytes:
    if "S" in value:
        return str(value["S"])
    raw = value["B"]
    return bytes(raw)


def convert_item(
    item: dict[str, Any], target: RecordLayout, source: RecordLayout | None = None
) -> dict[str, Any]:
    """``item`` (a record or tombstone written in ``source``; ``None``: the layout its
    attributes show) rewritten in ``target``: every layout attribute renamed, ``status``,
    ``claimedAt`` and ``version`` written or dropped as ``target`` has them, every other attribute (the key
    included) kept. A hand-built row (no owner) is returned as it is for a ``target`` with a
    status (which reads it). Raises ``ValueError`` for an item of no known layout, or a
    hand-built row and a ``target`` without a status."""
    from_ = source or layout_of(item)
    if from_ is None:
        raise ValueError("not an idempotency record of a known layout")
    record = Record.from_item(item, from_)  # also checks that it is one
    if record.foreign:  # a hand-built row: read as it is by any layout with a status
        if target.status is None or target.claimed_at is None:
            raise ValueError("a hand-built row (no owner) needs a layout with a status")
        return dict(item)
    roles = from_.names()
    derived = {roles.get("status"), roles.get("claimed_at"), roles.get("version")}
    renamed = {name: role for role, name in roles.items()}
    out: dict[str, Any] = {}
    for name, value in item.items():
        if name in derived:
            continue
        out[target.names()[renamed[name]] if name in renamed else name] = value
    if target.status is not None and not record.removed:
        out[target.status] = {"S": record.status.value}
    if target.version is not None and not record.removed:
        # Variant 2's version: the owner's while the claim is live (what fenced writes expect)
        out[target.version] = {"N": str(record.version)}
    claimed = claimed_at_of(item, from_)
    if target.claimed_at is not None and not record.removed and claimed is not None:
        out[target.claimed_at] = {"N": str(int(claimed))}
    return out


def as_seen(item: dict[str, Any], layout: RecordLayout | None = None) -> dict[str, Any]:
    """A condition (``ConditionExpression`` with its names and values) that holds only while
    the stored record is as ``item`` shows it: the same owner and version, the same lease, and
    the same outcome attributes present. Every transition changes one of them (completing keeps
    the owner and version but removes the lease and adds the result), so a write under it never
    undoes a claim, completion, failure or renewal made since. A hand-built row (no owner) is
    held to its status word, ``claimedAt``, ``expiresAt`` and ``version``, and to having no
    owner (:func:`.requests.foreign_takeover_condition`)."""
    n = layout or layout_of(item) or DEFAULT
    if n.owner not in item and n.status is not None and n.claimed_at is not None:
        rec = foreign_record(item, n)  # a hand-built row: as seen, still without an owner
        condition, foreign_names, foreign_values = q.foreign_takeover_condition(
            rec.owner, n.status, n.claimed_at, n.expires, n.version
        )
        return {
            "ConditionExpression": condition,
            "ExpressionAttributeNames": {"#own": n.owner, **foreign_names},
            "ExpressionAttributeValues": foreign_values,
        }
    names = {"#own": n.owner, "#lease": n.lease, "#res": n.result, "#err": n.error}
    values = {":own": item[n.owner]}
    parts = ["#own = :own"]
    if n.lease in item:
        parts.append("#lease = :lease")
        values[":lease"] = item[n.lease]
    else:
        parts.append("attribute_not_exists(#lease)")
    for name, attribute in (("#res", n.result), ("#err", n.error)):
        exists = "attribute_exists" if attribute in item else "attribute_not_exists"
        parts.append(f"{exists}({name})")
    return {
        "ConditionExpression": " AND ".join(parts),
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }
