"""Every DynamoDB request the layer makes, built in one place, with no I/O.

This module is the record's wire shape: the attribute names, the owner-token format, each
condition expression written once *beside the Python predicate that mirrors it*, and the
builders of every request (claim, replace, complete, fail, renew, get, transact, and the table
set-up). A request is a :class:`Call`: the operation name and its parameters, exactly as the
boto3 low-level method takes them. The state machine (:mod:`._machine.machine`) yields Calls; the drivers
(:mod:`.guard`, :mod:`.aio`) perform them and nothing else.

Why mirrors: a failed conditional write comes back with the stored item (``ALL_OLD``), and the
machine decides what it means by evaluating the same condition in Python. Keeping the string and
its mirror side by side (and ``tests/idempotency/test_requests.py`` checking that DynamoDB and
the mirror agree on every stored state) is what keeps the two from drifting apart.

Expression strings and attribute-name maps are built once per configuration (from its
:class:`~.layout.RecordLayout`), so a request costs one ``Item``/values dict build.

Size: one concept, the wire shape, kept whole so that each expression sits beside its mirror.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Protocol

from .config import IdempotencyConfig
from .effects import Call
from .layout import DEFAULT, FinalValue

# -- the item -----------------------------------------------------------------------------------

# The default layout's names (:mod:`.layout`; a configuration's ``layout`` may name others).
A_OWNER = DEFAULT.owner
A_LEASE = DEFAULT.lease
A_EXPIRES = DEFAULT.expires
A_FINGERPRINT = DEFAULT.fingerprint
A_RESULT = DEFAULT.result
A_ERROR = DEFAULT.error
A_REGION = DEFAULT.region
A_CLAIMED_AT = "claimed_at"  # not written any more; read from records of older versions
# Tombstones (written by the TTL audit, see :mod:`.audit`): the record TTL removed, remembered.
A_REMOVED_AT = DEFAULT.removed_at
A_REMOVED_STATUS = DEFAULT.removed_status

TTL_ATTRIBUTE = A_EXPIRES
MAX_TRANSACT_ITEMS = 100  # DynamoDB's TransactWriteItems limit (25 until September 2022)
NO_FINGERPRINT = "-"  # a request without payload validation: matches any stored record
TOKEN_TIME_DIGITS = 12  # hex digits of epoch ms at the start of an owner token (to year 10889)

Item = dict[str, dict[str, Any]]
Key = dict[str, dict[str, str]]


def millis(now: float) -> int:
    """``now`` (epoch seconds) in whole milliseconds: the one rounding every check uses."""
    return int(now * 1000)


def new_token(now: float) -> str:
    """A claim's owner token: the claim time (epoch ms, 12 hex digits) then 80 random bits.
    Unique per claim, and it dates the claim without a ``claimed_at`` attribute."""
    return _TOKEN % (int(now * 1000), os.urandom(10).hex())  # millis(now)


_TOKEN = f"%0{TOKEN_TIME_DIGITS}x%s"


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


# A hand-built row (no ``owner``, :func:`.record.foreign_record`) is identified by what a
# takeover must find unchanged: ``~`` + its status word, ``claimedAt``, ``expiresAt`` and
# ``version`` (empty when absent), ``|``-separated. It stands where an owner token would.
FOREIGN = "~"


def foreign_seen(word: str, claimed: str | None, expires: str | None, version: str | None) -> str:
    """The as-seen identity of a hand-built row (its status word and number attributes)."""
    return FOREIGN + "|".join((word, claimed or "", expires or "", version or ""))


def foreign_seen_parts(seen: str) -> tuple[str, str | None, str | None, str | None]:
    """:func:`foreign_seen`'s parts back (``seen`` may carry the ``:<version>`` suffix that
    :func:`fence` adds)."""
    body = seen[1:].split("|")
    if len(body) == 4 and ":" in body[3]:
        body[3] = body[3].rpartition(":")[0]
    word, claimed, expires, version = body
    return word, claimed or None, expires or None, version or None


def attribute_value(value: FinalValue) -> dict[str, Any]:
    """A Python ``bool``/``int``/``str`` as a DynamoDB AttributeValue."""
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, int):
        return {"N": str(value)}
    return {"S": value}


class Stored(Protocol):
    """What the mirrors read of a stored record (a :class:`.record.Record`)."""

    @property
    def owner(self) -> str: ...
    @property
    def version(self) -> int: ...
    @property
    def lease_expires_at(self) -> int | None: ...
    @property
    def expires_at(self) -> int: ...
    @property
    def fingerprint(self) -> str | None: ...


# -- conditions, each beside its mirror ----------------------------------------------------------
# ``:now`` is epoch seconds (as ``expires_at``), ``:now_ms`` milliseconds (as the lease); the
# mirrors round ``now`` the same way. A comparison with a missing attribute is false in DynamoDB,
# which the mirrors spell out as ``is not None``.


def past_retention(expires_at: int, now: float) -> bool:
    """``#exp < :now``. TTL removes items late, so an expired item still there counts as absent."""
    return expires_at < int(now)


def lease_passed(lease_ms: int | None, now: float) -> bool:
    """``#lease < :now_ms``: false without a lease (COMPLETED, final FAILED, tombstones)."""
    return lease_ms is not None and lease_ms < millis(now)


def same_request(stored: str | None, given: str) -> bool:
    """``(#fp = :fp OR attribute_not_exists(#fp))``; a claim without a fingerprint (``given`` is
    ``"-"``) uses the condition without that clause, so it matches any record."""
    return stored is None or stored == given or given == NO_FINGERPRINT


# Claimable: absent; past retention; or, for the same request only, a lease that is over (an
# abandoned PENDING claim, or a retryable FAILED one, whose lease is 0). Only those two states
# carry a lease, so the lease test needs no status test. The fingerprint guard keeps a different
# request reusing the key from taking over a half-done or failed claim.
CLAIM_CONDITION = (
    "attribute_not_exists(#pk) OR #exp < :now OR "
    "(#lease < :now_ms AND (#fp = :fp OR attribute_not_exists(#fp)))"
)
CLAIM_CONDITION_ANY = "attribute_not_exists(#pk) OR #exp < :now OR #lease < :now_ms"
# With ``refuse_late_retries``: a record past retention is not claimable by the condition, so the
# machine sees it (``ALL_OLD``) before anything is written, and refuses a late retry of the same
# request or replaces the record for a new one (REPLACE_CONDITION).
CLAIM_CONDITION_LIVE = (
    "attribute_not_exists(#pk) OR (#lease < :now_ms AND (#fp = :fp OR attribute_not_exists(#fp)))"
)
CLAIM_CONDITION_LIVE_ANY = "attribute_not_exists(#pk) OR #lease < :now_ms"
# With a layout that keeps recovery points, the lease branch also asks that the record carries
# none: a marked record past its lease refuses the claim and comes back (``ALL_OLD``), so the
# machine takes it over as seen with its marks in the claim's own item (never a moment without
# them; a transaction could not see them at all), then reconciles (``_machine.recovery``).
# Mirror: the item has no ``layout.marks`` attribute (the layer never stores an empty list).
LEASE_OVER = "#lease < :now_ms"
UNMARKED = f"({LEASE_OVER} AND attribute_not_exists(#mk))"


def claim_allows(
    stored: Stored | None, fingerprint: str, now: float, *, retention_branch: bool = True
) -> bool:
    """Mirror of the claim condition (``retention_branch=False``: the ``_LIVE`` variants). A
    hand-built row has no ``#lease`` attribute (its ``lease_expires_at`` is derived), so only
    the retention branch can accept it."""
    if stored is None:
        return True
    if retention_branch and past_retention(stored.expires_at, now):
        return True
    return (
        lease_passed(stored.lease_expires_at, now)
        and stored.owner[:1] != FOREIGN
        and same_request(stored.fingerprint, fingerprint)
    )


# Replace a record exactly as it was seen (a tombstone, or a record past retention when the
# retention branch is off): its owner value is unique to it. A hand-built row (``seen`` from
# :func:`foreign_seen`) is taken over only while it still has no owner and the same status word,
# claimedAt, expiresAt and version (:func:`foreign_takeover_condition`), each ``= :s..`` or
# ``attribute_not_exists`` as seen: e.g. ``attribute_not_exists(#own) AND #st = :sst AND
# #ca = :sca AND #exp = :sexp AND attribute_not_exists(#ver)``.
REPLACE_CONDITION = "#own = :seen"


def replace_allows(stored: Stored | None, seen: str) -> bool:
    """Mirror of REPLACE_CONDITION and of :func:`foreign_takeover_condition`; ``seen`` is the
    owner value (``fence(token, version)``), of a hand-built row its :func:`foreign_seen`."""
    return stored is not None and fence(stored.owner, stored.version) == seen


def foreign_takeover_condition(
    seen: str, status: str, claimed_at: str, expires: str, version: str | None
) -> tuple[str, dict[str, str], dict[str, Any]]:
    """(condition, names, values) that hold only while the hand-built row is as ``seen``
    (``status`` ... ``version``: the layout's attribute names; the owner's is ``#own``)."""
    word, claimed, expires_value, version_value = foreign_seen_parts(seen)
    parts = ["attribute_not_exists(#own)", "#st = :sst"]
    names = {"#st": status}
    values: dict[str, Any] = {":sst": {"S": word}}
    checks = [("#ca", claimed_at, claimed), ("#exp", expires, expires_value)]
    if version is not None:
        checks.append(("#ver", version, version_value))
    for alias, name, value in checks:
        names[alias] = name
        if value is None:
            parts.append(f"attribute_not_exists({alias})")
        else:
            parts.append(f"{alias} = :s{alias[1:]}")
            values[f":s{alias[1:]}"] = {"N": value}
    return " AND ".join(parts), names, values


# The fence: requiring the lease makes COMPLETED and final FAILED records immune to any later
# fenced write; renew and fail bump the version, so a copy of the claim from before them is
# refused too. Completion is terminal and keeps the version.
FENCE = "#own = :own AND attribute_exists(#lease)"
# A layout with a ``version`` attribute (seed 001's Variant 2) also conditions every fenced
# write on it and sets it one higher (:func:`_with_version`), completion included. While a record
# is PENDING (or a retryable FAILED) the layer keeps it equal to the owner's version, so the
# mirror is :func:`fence_allows` unchanged.
FENCE_VERSIONED = FENCE + " AND #ver = :ver"


def fence_allows(stored: Stored | None, owner: str, version: int) -> bool:
    """Mirror of FENCE."""
    return (
        stored is not None
        and stored.owner == owner
        and stored.version == version
        and stored.lease_expires_at is not None
    )


# A tombstone is written only where nothing is stored: a claim made after the TTL delete wins.
ABSENT = "attribute_not_exists(#pk)"


def absent(stored: Stored | None) -> bool:
    """Mirror of ABSENT."""
    return stored is None


# Retention runs from the claim (or the last renewal): client retries are bounded by the time
# since their first attempt, which is when the claim was made, so completing or failing need not
# move ``expires_at``. A layout with an explicit status also sets ``#st`` (:data:`_SET_STATUS`)
# on completion and failure; a renewal leaves a PENDING record PENDING.
COMPLETE_UPDATE = "SET #res = :res REMOVE #lease"
FAIL_UPDATE = "SET #err = :err, #own = :nown REMOVE #lease"
FAIL_RETRYABLE_UPDATE = "SET #err = :err, #own = :nown, #lease = :zero"
RENEW_UPDATE = "SET #lease = :lease, #own = :nown, #exp = :exp"
_SET_STATUS = "SET #st = :st, "

_ZERO = {"N": "0"}
_ONE = {"N": "1"}


class Requests:
    """The request builders for one configuration."""

    __slots__ = (
        "_claim_any",
        "_claim_fp",
        "_complete_names",
        "_complete_update",
        "_fail_names",
        "_fail_updates",
        "_fence",
        "_names",
        "_pk_names",
        "_renew_names",
        "_renew_update",
        "_replace_names",
        "_words",
        "capacity",
        "claim_conditions",
        "config",
        "layout",
        "region",
        "retention",
        "retention_branch",
        "table",
    )

    def __init__(self, config: IdempotencyConfig) -> None:
        self.config = config
        self.table = config.table_name
        self.retention = config.retention
        self.region = None if config.region is None else {"S": config.region}
        self.capacity = (
            {"ReturnConsumedCapacity": "TOTAL"} if config.return_consumed_capacity else {}
        )
        # (with a fingerprint, without one)
        self.claim_conditions = (
            (CLAIM_CONDITION_LIVE, CLAIM_CONDITION_LIVE_ANY)
            if config.refuse_late_retries
            else (CLAIM_CONDITION, CLAIM_CONDITION_ANY)
        )
        self.layout = n = config.layout
        self._words = tuple({"S": word} for word in n.words)  # pending, completed, failed
        # The item's names, in the order :meth:`new_item` writes them.
        self._names = (n.owner, n.lease, n.expires, n.fingerprint, n.region, n.status, n.claimed_at)
        self._pk_names = {"#pk": config.partition_key}
        self.retention_branch = not config.refuse_late_retries
        names_any = {"#pk": config.partition_key, "#lease": n.lease}
        if self.retention_branch:
            names_any["#exp"] = n.expires
        with_fp, without_fp = self.claim_conditions
        if n.marks is not None:  # a marked record past its lease refuses the claim (UNMARKED)
            with_fp = with_fp.replace(LEASE_OVER, UNMARKED)
            without_fp = without_fp.replace(LEASE_OVER, UNMARKED)
            names_any["#mk"] = n.marks
        # (condition, its attribute names) for a claim with a fingerprint, and without one
        self._claim_fp = (with_fp, names_any | {"#fp": n.fingerprint})
        self._claim_any = (without_fp, names_any)
        self._replace_names = {"#own": n.owner}
        fenced = {"#own": n.owner, "#lease": n.lease}
        status = {} if n.status is None else {"#st": n.status}
        versioned = {} if n.version is None else {"#ver": n.version}
        self._complete_names = fenced | {"#res": n.result} | status | versioned
        self._fail_names = fenced | {"#err": n.error} | status | versioned
        self._renew_names = fenced | {"#exp": n.expires} | versioned
        self._complete_update = _with_version(
            _with_status(COMPLETE_UPDATE, bool(status)), bool(versioned)
        )
        self._fail_updates = (
            _with_version(_with_status(FAIL_UPDATE, bool(status)), bool(versioned)),
            _with_version(_with_status(FAIL_RETRYABLE_UPDATE, bool(status)), bool(versioned)),
        )
        self._renew_update = _with_version(RENEW_UPDATE, bool(versioned))
        self._fence = FENCE_VERSIONED if versioned else FENCE

    # -- items -----------------------------------------------------------------------------------

    def claim_item(self, key: Key, owner: str, fingerprint: str, now: float, lease: float) -> Item:
        return self.new_item(
            key, owner, fingerprint, millis(now + lease), int(now + self.retention)
        )

    def new_item(
        self, key: Key, owner: str, fingerprint: str, lease_ms: int, expires_at: int
    ) -> Item:
        """:meth:`claim_item` for a claim whose lease end (epoch ms) and retention end (epoch
        s) are already worked out."""
        a_owner, a_lease, a_expires, a_fp, a_region, a_status, a_claimed = self._names
        item: Item = {
            **key,
            a_owner: {"S": owner + ":1"},  # fence(owner, 1)
            a_lease: {"N": str(lease_ms)},
            a_expires: {"N": str(expires_at)},
        }
        if fingerprint != NO_FINGERPRINT:
            item[a_fp] = {"S": fingerprint}
        if self.region is not None:
            item[a_region] = self.region
        if a_status is not None:  # seed 001: the status, and the claim time in epoch seconds
            item[a_status] = self._words[0]
            if a_claimed is not None:
                item[a_claimed] = {"N": str(int(owner[:TOKEN_TIME_DIGITS], 16) // 1000)}
        if self.layout.version is not None:
            item[self.layout.version] = _ONE
        return item

    def _claim_condition(
        self, fingerprint: str, now: float
    ) -> tuple[str, dict[str, str], dict[str, Any]]:
        """(ConditionExpression, ExpressionAttributeNames, ExpressionAttributeValues)."""
        values = {":now_ms": {"N": str(millis(now))}}
        if self.retention_branch:
            values[":now"] = {"N": str(int(now))}
        if fingerprint == NO_FINGERPRINT:
            return (*self._claim_any, values)
        values[":fp"] = {"S": fingerprint}
        return (*self._claim_fp, values)

    # -- the record's requests -------------------------------------------------------------------

    def put_claim(self, item: Item, fingerprint: str, now: float) -> Call:
        condition, names, values = self._claim_condition(fingerprint, now)
        params = {
            "TableName": self.table,
            "Item": item,
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
            # On success ALL_OLD tells a takeover from a first claim (and costs nothing for a
            # new key); on failure it carries the stored record, so a duplicate costs one
            # write and no read.
            "ReturnValues": "ALL_OLD",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        if self.capacity:
            params.update(self.capacity)
        return Call("PutItem", params)

    def _replace(self, item: Item, seen: str) -> dict[str, Any]:
        n = self.layout
        if seen[:1] == FOREIGN and n.status is not None and n.claimed_at is not None:
            condition, names, values = foreign_takeover_condition(
                seen, n.status, n.claimed_at, n.expires, n.version
            )
            return {
                "TableName": self.table,
                "Item": item,
                "ConditionExpression": condition,
                "ExpressionAttributeNames": {**self._replace_names, **names},
                "ExpressionAttributeValues": values,
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        return {
            "TableName": self.table,
            "Item": item,
            "ConditionExpression": REPLACE_CONDITION,
            "ExpressionAttributeNames": self._replace_names,
            "ExpressionAttributeValues": {":seen": {"S": seen}},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }

    def replace_claim(self, item: Item, seen: str) -> Call:
        """A claim over a record exactly as seen (owner value ``seen``): a tombstone or a record
        past retention that the claim condition leaves to the machine."""
        return Call(
            "PutItem", {**self._replace(item, seen), "ReturnValues": "ALL_OLD", **self.capacity}
        )

    def transact_replace_claim(self, item: Item, seen: str) -> dict[str, Any]:
        """:meth:`replace_claim` as a TransactWriteItems action."""
        return {"Put": self._replace(item, seen)}

    def transact_claim(self, item: Item, fingerprint: str, now: float) -> dict[str, Any]:
        """The claim as a TransactWriteItems action."""
        condition, names, values = self._claim_condition(fingerprint, now)
        return {
            "Put": {
                "TableName": self.table,
                "Item": item,
                "ConditionExpression": condition,
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def _complete(
        self, key: Key, owner: str, version: int, result: dict[str, Any]
    ) -> dict[str, Any]:
        values = {":own": {"S": fence(owner, version)}, ":res": result}
        if self.layout.status is not None:
            values[":st"] = self._words[1]
        if self.layout.version is not None:
            values.update(_versions(version))
        return {
            "TableName": self.table,
            "Key": key,
            "ConditionExpression": self._fence,
            "UpdateExpression": self._complete_update,
            "ExpressionAttributeNames": self._complete_names,
            "ExpressionAttributeValues": values,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }

    def complete(self, key: Key, owner: str, version: int, result: dict[str, Any]) -> Call:
        params = self._complete(key, owner, version, result)
        if self.capacity:
            params.update(self.capacity)
        return Call("UpdateItem", params)

    def transact_complete(
        self, key: Key, owner: str, version: int, result: dict[str, Any]
    ) -> dict[str, Any]:
        """The completion as a TransactWriteItems action."""
        return {"Update": self._complete(key, owner, version, result)}

    def transact_fence(self, key: Key, owner: str, version: int) -> dict[str, Any]:
        """A TransactWriteItems ``ConditionCheck`` that the claim (``owner``, ``version``)
        still holds the record under ``key`` (the fence of complete, fail and renew)."""
        names = {"#own": self.layout.owner, "#lease": self.layout.lease}
        values = {":own": {"S": fence(owner, version)}}
        if self.layout.version is not None:
            names["#ver"] = self.layout.version
            values[":ver"] = {"N": str(version)}
        check = {
            "TableName": self.table,
            "Key": key,
            "ConditionExpression": self._fence,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        return {"ConditionCheck": check}

    def fail(self, key: Key, owner: str, version: int, error: str, retryable: bool) -> Call:
        values = {
            ":own": {"S": fence(owner, version)},
            ":nown": {"S": fence(owner, version + 1)},
            ":err": {"S": error},
        }
        if retryable:
            values[":zero"] = _ZERO
        if self.layout.status is not None:
            values[":st"] = self._words[2]
        if self.layout.version is not None:
            values.update(_versions(version))
        return Call(
            "UpdateItem",
            {
                "TableName": self.table,
                "Key": key,
                "ConditionExpression": self._fence,
                "UpdateExpression": self._fail_updates[retryable],
                "ExpressionAttributeNames": self._fail_names,
                "ExpressionAttributeValues": values,
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                **self.capacity,
            },
        )

    def renew(self, key: Key, owner: str, version: int, lease_ms: int, now: float) -> Call:
        values = {
            ":own": {"S": fence(owner, version)},
            ":nown": {"S": fence(owner, version + 1)},
            ":lease": {"N": str(lease_ms)},
            ":exp": {"N": str(int(now + self.retention))},
        }
        if self.layout.version is not None:
            values.update(_versions(version))
        return Call(
            "UpdateItem",
            {
                "TableName": self.table,
                "Key": key,
                "ConditionExpression": self._fence,
                "UpdateExpression": self._renew_update,
                "ExpressionAttributeNames": self._renew_names,
                "ExpressionAttributeValues": values,
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                **self.capacity,
            },
        )

    def get(self, key: Key) -> Call:
        return Call(
            "GetItem",
            {"TableName": self.table, "Key": key, "ConsistentRead": True, **self.capacity},
        )

    def batch_get(self, keys: Sequence[Key]) -> Call:
        """One consistent ``BatchGetItem`` of up to 100 distinct ``keys``."""
        request = {self.table: {"Keys": list(keys), "ConsistentRead": True}}
        return Call("BatchGetItem", {"RequestItems": request, **self.capacity})

    def transact(self, items: Sequence[dict[str, Any]], token: str) -> Call:
        return Call(
            "TransactWriteItems",
            {"TransactItems": list(items), "ClientRequestToken": token, **self.capacity},
        )

    def tombstone(
        self,
        key: Key,
        owner: str,
        fingerprint: str | None,
        status: str,
        removed_at: float,
        remember: float,
    ) -> Call:
        """Remember a record TTL removed (its owner value, fingerprint and status) for
        ``remember`` seconds, unless a new claim has been made meanwhile."""
        n = self.layout
        item: Item = {
            **key,
            n.owner: {"S": owner},
            n.expires: {"N": str(int(removed_at + remember))},
            n.removed_at: {"N": str(int(removed_at))},
            n.removed_status: {"S": status},
        }
        if fingerprint is not None:
            item[n.fingerprint] = {"S": fingerprint}
        return Call(
            "PutItem",
            {
                "TableName": self.table,
                "Item": item,
                "ConditionExpression": ABSENT,
                "ExpressionAttributeNames": self._pk_names,
            },
        )

    # -- the table -------------------------------------------------------------------------------

    def create_table(self) -> Call:
        cfg = self.config
        schema = [{"AttributeName": cfg.partition_key, "KeyType": "HASH"}]
        attrs = [{"AttributeName": cfg.partition_key, "AttributeType": "S"}]
        if cfg.sort_key is not None:
            schema.append({"AttributeName": cfg.sort_key, "KeyType": "RANGE"})
            attrs.append({"AttributeName": cfg.sort_key, "AttributeType": "S"})
        return Call(
            "CreateTable",
            {
                "TableName": self.table,
                "KeySchema": schema,
                "AttributeDefinitions": attrs,
                "BillingMode": "PAY_PER_REQUEST",
            },
        )

    def describe_table(self) -> Call:
        return Call("DescribeTable", {"TableName": self.table})

    def describe_ttl(self) -> Call:
        return Call("DescribeTimeToLive", {"TableName": self.table})

    def enable_ttl(self) -> Call:
        return Call(
            "UpdateTimeToLive",
            {
                "TableName": self.table,
                "TimeToLiveSpecification": {"Enabled": True, "AttributeName": self.layout.expires},
            },
        )


def _with_status(update: str, explicit: bool) -> str:
    """``update`` also setting ``#st = :st`` when the layout writes its status."""
    return _SET_STATUS + update[4:] if explicit else update


def _with_version(update: str, versioned: bool) -> str:
    """``update`` also setting ``#ver = :nver`` when the layout has a version attribute."""
    return "SET #ver = :nver, " + update[4:] if versioned else update


def _versions(version: int) -> dict[str, dict[str, str]]:
    """``:ver`` (the version the write expects) and ``:nver`` (the one it writes)."""
    return {":ver": {"N": str(version)}, ":nver": {"N": str(version + 1)}}


def tables_of(call: Call) -> list[str]:
    """The table names a request touches (for messages about a missing table)."""
    name = call.params.get("TableName")
    if isinstance(name, str):
        return [name]
    names: list[str] = list(call.params.get("RequestItems", ()))  # BatchGetItem
    for action in call.params.get("TransactItems", ()):
        for body in action.values():
            table = body.get("TableName") if isinstance(body, dict) else None
            if isinstance(table, str) and table not in names:
                names.append(table)
    return names
