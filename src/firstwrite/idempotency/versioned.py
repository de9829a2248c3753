"""Optimistic-version updates of business items: seed 001's Variant 2, for your own tables.

:func:`update_versioned` sets attributes of one item under ``version = :expected`` and writes
``version + 1`` in the same ``UpdateItem``, so of two writers that read the same version only
one moves the item on. The answer is one of the seed's three outcomes
(:class:`VersionOutcome`), never an exception for a lost race:

* ``UPDATED``: the item was at the expected version and now holds the changes, one higher;
* ``CONFLICT``: another writer moved the item on first; ``item`` is the item as it now is
  (``ReturnValuesOnConditionCheckFailure=ALL_OLD``, no extra read): re-read, re-decide, retry;
* ``MISSING``: no such item (or, with ``expected_version=None``, one already exists: then it
  is ``CONFLICT``).

``expected_version=None`` creates the item at version 1 only where none exists. Errors other
than the failed condition (throttling, validation) are the client's and propagate.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .client_errors import client_error_code, response_of

__all__ = ["VersionOutcome", "VersionedUpdate", "update_versioned"]


class VersionOutcome(enum.Enum):
    UPDATED = "updated"
    CONFLICT = "conflict"
    MISSING = "missing"


@dataclass(frozen=True, slots=True)
class VersionedUpdate:
    """What :func:`update_versioned` did: the outcome, the item's version now (``None`` when
    missing) and the item (new on ``UPDATED``, current on ``CONFLICT``, ``None`` when
    missing)."""

    outcome: VersionOutcome
    version: int | None
    item: dict[str, Any] | None


def update_versioned(
    client: Any,
    table: str,
    key: Mapping[str, Mapping[str, Any]],
    changes: Mapping[str, Mapping[str, Any]],
    expected_version: int | None,
    *,
    version_attribute: str = "version",
) -> VersionedUpdate:
    """Set ``changes`` (attribute name -> DynamoDB AttributeValue) on the item at ``key`` of
    ``table`` if its ``version_attribute`` equals ``expected_version`` (``None``: if no item
    exists), and set that attribute one higher; see the module docstring for the outcomes."""
    if version_attribute in changes or any(name in changes for name in key):
        raise ValueError("changes must not name the key attributes or the version attribute")
    names = {"#ver": version_attribute}
    values: dict[str, Any] = {":next": {"N": str((expected_version or 0) + 1)}}
    sets = ["#ver = :next"]
    for i, (name, value) in enumerate(changes.items()):
        names[f"#a{i}"] = name
        values[f":a{i}"] = dict(value)
        sets.append(f"#a{i} = :a{i}")
    if expected_version is None:
        names["#k"] = next(iter(key))
        condition = "attribute_not_exists(#k)"
    else:
        values[":expected"] = {"N": str(expected_version)}
        names["#k"] = next(iter(key))
        condition = "attribute_exists(#k) AND #ver = :expected"
    try:
        answer = client.update_item(
            TableName=table,
            Key=dict(key),
            UpdateExpression="SET " + ", ".join(sets),
            ConditionExpression=condition,
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
            ReturnValues="ALL_NEW",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
    except Exception as exc:
        if client_error_code(exc) != "ConditionalCheckFailedException":
            raise
        current = (response_of(exc) or {}).get("Item")
        if not current:
            return VersionedUpdate(VersionOutcome.MISSING, None, None)
        return VersionedUpdate(
            VersionOutcome.CONFLICT, _version(current, version_attribute), current
        )
    item = answer.get("Attributes") or {}
    return VersionedUpdate(VersionOutcome.UPDATED, _version(item, version_attribute), item)


def _version(item: Mapping[str, Any], name: str) -> int | None:
    value = item.get(name)
    return None if value is None or "N" not in value else int(value["N"])
