"""ConsumedCapacity, computed from item sizes as DynamoDB computes it.

Reads: ceil(size / 4 KB) units, halved for eventually consistent reads, doubled in transactions;
a missing item still costs one unit (half, eventually). Writes: ceil(size / 1 KB) units of the
larger of the old and new item, at least one, doubled in transactions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_READ_UNIT = 4096
_WRITE_UNIT = 1024


def read_units(size: int, *, consistent: bool, transactional: bool = False) -> float:
    units = float(max(1, -(-size // _READ_UNIT)))
    if transactional:
        return units * 2
    return units if consistent else units / 2


def write_units(size: int, *, transactional: bool = False) -> float:
    units = float(max(1, -(-size // _WRITE_UNIT)))
    return units * 2 if transactional else units


def capacity(
    mode: str | None, table: str, units: float, *, read: bool | None = None
) -> dict[str, Any] | None:
    """The ConsumedCapacity member for ReturnConsumedCapacity ``mode`` (None for NONE)."""
    if mode not in ("TOTAL", "INDEXES"):
        return None
    out: dict[str, Any] = {"TableName": table, "CapacityUnits": units}
    if read is True:
        out["ReadCapacityUnits"] = units
    elif read is False:
        out["WriteCapacityUnits"] = units
    if mode == "INDEXES":
        out["Table"] = {"CapacityUnits": units}
        if read is True:
            out["Table"]["ReadCapacityUnits"] = units
        elif read is False:
            out["Table"]["WriteCapacityUnits"] = units
    return out


def attach(
    response: dict[str, Any],
    params: Mapping[str, Any],
    table: str,
    units: float,
    *,
    read: bool | None = None,
) -> dict[str, Any]:
    """Add ConsumedCapacity to ``response`` when the request asked for it."""
    mode = params.get("ReturnConsumedCapacity")
    if mode == "TOTAL" or mode == "INDEXES":
        response["ConsumedCapacity"] = capacity(mode, table, units, read=read)
    return response
