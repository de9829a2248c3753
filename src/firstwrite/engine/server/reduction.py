"""Shrinking a big write request to a small one that the engine answers the same way.

The screening worker (:mod:`.screening`, a separate process) decodes a big body and calls
:func:`reduce_request`, which walks every item of a ``PutItem``, ``BatchWriteItem`` or
``TransactWriteItems`` with the engine's own value checks and replaces each heavy item by a
small stand-in that gets the same answer:

* an item with an invalid value keeps only the path to its first invalid value, so the engine
  stops on the same error (the checks run in the item's order; their messages name no position);
* a valid item keeps only the attributes some table or index of the engine has as a key
  (``keys``; placeholders of the same type for non-scalars), one name over the length limit if
  it has one, and padding that gives the stand-in the original's size (:attr:`Reduced.scratch`)
  or, when that is over 400 KB, just past 400 KB (:attr:`Reduced.server`).

Every check the engine makes of an item reads only its values' validity, its size, its names'
lengths and its key attributes, so the stand-in gets the same answer, provided the request is
refused whatever the tables hold (an item over 400 KB): the worker checks that, and runs the
request's table-free checks itself (:mod:`.screening`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import DynamoDBError
from ..values import (
    MAX_ITEM_SIZE,
    MAX_NESTING,
    SET_TYPES,
    TYPES,
    check_name,
    parse_item_sized,
    parse_value,
    value_size,
)

__all__ = ["LIGHT_VALUES", "Reduced", "Unreducible", "reduce_request", "weight"]

# An item of at most this many values is kept as it is.
LIGHT_VALUES = 256
PAD_NAME = "\x00firstwrite-pad"
_MEMO_MAX = 4096
_NULL = {"NULL": True}


class Unreducible(Exception):
    """The request has an error that no small stand-in reproduces (a huge set with duplicates,
    whose message lists every member): it is decoded as it is."""


class _Invalid(Exception):
    """A value the engine refuses; ``reduced`` is a small value it refuses the same way."""

    def __init__(self, reduced: Any) -> None:
        super().__init__()
        self.reduced = reduced


@dataclass
class Reduced:
    """The two stand-ins of a request: ``scratch`` (sizes kept) for the table-free checks,
    ``server`` (smaller) for the engine; ``over`` when some item is over 400 KB."""

    scratch: dict[str, Any]
    server: dict[str, Any]
    over: bool


def weight(value: Any, cap: int) -> int:
    """How many JSON values ``value`` holds, counting no further than ``cap``."""
    count = 0
    pending = [value]
    while pending and count < cap:
        current = pending.pop()
        count += 1
        if type(current) is dict:
            pending.extend(current.values())
        elif type(current) is list:
            pending.extend(current)
    return count


class _Walk:
    """Sizes and checks one item's values as :func:`.values.parse_value` does, without keeping
    a copy: the containers are walked here (in parse_value's order, with its header checks),
    every other value is parsed by the engine's own code."""

    def __init__(self) -> None:
        self.values = 0
        self.long_name: str | None = None
        # Sizes of the scalars seen, by (type, text): parsing one depends on nothing else.
        self._scalars: dict[tuple[str, Any], int] = {}

    def name(self, name: str) -> None:
        if self.long_name is None:
            try:
                check_name(name)
            except DynamoDBError:
                self.long_name = name

    def value(self, value: Any, depth: int) -> int:
        self.values += 1
        if type(value) is not dict:
            return self._leaf(value, depth)
        if len(value) != 1:
            # parse_value reads a value of several members as its one non-null known member,
            # and refuses it without reading any member when there is not exactly one.
            present = [k for k in value if k in TYPES and value[k] is not None]
            if len(present) != 1:
                raise _Invalid({k: (0 if k in present else None) for k in value})
            kind = present[0]
            ignored = {k: None for k in value if k != kind}
            try:
                return self.value({kind: value[kind]}, depth)
            except _Invalid as bad:
                raise _Invalid({**ignored, **bad.reduced}) from None
        ((kind, raw),) = value.items()
        if kind not in TYPES or raw is None:
            raise _Invalid({kind: None})
        if depth > MAX_NESTING:
            raise _Invalid({kind: 0})
        if kind == "L" and type(raw) is list:
            size = 3
            self.values += len(raw)  # (elements walked below count twice: a bound is all it is)
            scalars = self._scalars if depth < MAX_NESTING else {}
            for element in raw:
                # The commonest element by far, a scalar seen before: its size, at once.
                if type(element) is dict and len(element) == 1:
                    ((tag, text),) = element.items()
                    if type(text) is str or type(text) is bool:
                        known = scalars.get((tag, text))
                        if known is not None:
                            size += 1 + known
                            continue
                try:
                    size += 1 + self.value(element, depth + 1)
                except _Invalid as bad:
                    raise _Invalid({"L": [bad.reduced]}) from None
            return size
        if kind == "M" and type(raw) is dict:
            size = 3
            for name, element in raw.items():
                self.name(name)
                try:
                    size += 1 + _utf8(name) + self.value(element, depth + 1)
                except _Invalid as bad:
                    raise _Invalid({"M": {name: bad.reduced}}) from None
            return size
        if kind in SET_TYPES and type(raw) is list:
            self.values += len(raw)
        elif type(raw) is str or type(raw) is bool:
            key = (kind, raw)
            known = self._scalars.get(key)
            if known is None:
                known = self._leaf(value, depth)
                if len(self._scalars) < _MEMO_MAX:
                    self._scalars[key] = known
            return known
        return self._leaf(value, depth)

    def _leaf(self, value: Any, depth: int) -> int:
        try:
            return value_size(parse_value(value, wire=True, depth=depth))
        except DynamoDBError as error:
            raise _Invalid(_refused_alike(value, depth, error)) from None


def _refused_alike(value: Any, depth: int, error: DynamoDBError) -> Any:
    """A small value that parse_value refuses with ``error``, as it refused ``value``: the value
    itself when small; else the same tag with an empty container, or a set of its first member
    refused on its own (checked, not assumed)."""
    if weight(value, LIGHT_VALUES + 1) <= LIGHT_VALUES:
        return value
    candidates: list[Any] = []
    if type(value) in (list, dict):  # not an AttributeValue at all: its JSON type is all it says
        candidates.append(type(value)())
    if type(value) is dict and len(value) == 1:
        ((kind, raw),) = value.items()
        if type(raw) in (list, dict):
            candidates.append({kind: type(raw)()})
        if kind in SET_TYPES and type(raw) is list:
            for member in raw:
                try:
                    parse_value({kind: [member]}, wire=True, depth=depth)
                except DynamoDBError:
                    candidates.append({kind: [member]})
                    break
    for candidate in candidates:
        try:
            parse_value(candidate, wire=True, depth=depth)
        except DynamoDBError as again:
            if (again.code, again.message) == (error.code, error.message):
                return candidate
    raise Unreducible  # e.g. a huge set with duplicates: the message lists every member


def _utf8(name: str) -> int:
    return len(name) if name.isascii() else len(name.encode("utf-8"))


def _placeholder(value: Any) -> Any:
    """A small valid value of the same type as the valid ``value``."""
    if type(value) is dict and len(value) != 1:
        value = {k: v for k, v in value.items() if k in TYPES and v is not None}
    ((kind, raw),) = value.items()
    if kind == "L":
        return {"L": []}
    if kind == "M":
        return {"M": {}}
    if kind in SET_TYPES:
        return {kind: raw[:1]}
    return {kind: raw}


@dataclass
class _Item:
    """One item of the request, checked: its size, or its first error as a small item."""

    size: int = 0
    values: int = 0
    error: dict[str, Any] | None = None
    long_name: str | None = None


def _check_item(item: dict[str, Any]) -> _Item:
    walk = _Walk()
    size = 0
    for name, value in item.items():
        try:
            parse_item_sized({name: _NULL}, wire=True)  # the name's own checks
        except DynamoDBError:
            return _Item(error={name: _NULL})
        walk.name(name)
        try:
            size += _utf8(name) + walk.value(value, 1)
        except _Invalid as bad:
            return _Item(error={name: bad.reduced})
    return _Item(size, walk.values, None, walk.long_name)


def _stand_in(
    item: dict[str, Any], checked: _Item, keys: frozenset[str], size: int, *, over: bool = False
) -> Any:
    """The valid ``item`` as its key attributes (and long name) padded to ``size`` bytes (or
    to at least ``size`` bytes when ``over``)."""
    small = {name: _placeholder(value) for name, value in item.items() if name in keys}
    if checked.long_name is not None:
        small[checked.long_name] = _NULL
    pad = PAD_NAME
    while pad in keys or pad in small:
        pad += "-"
    room = size - parse_item_sized(small, wire=True)[1] - _utf8(pad)
    if over:
        room = max(room, 0)
    elif room < 0:
        return None
    small[pad] = {"S": "x" * room}
    return small


def _items(operation: str, request: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    """Where ``request`` holds items: (the map holding one, its member name), in the order the
    engine checks them."""
    found: list[tuple[dict[str, Any], str]] = []
    if operation == "PutItem":
        found.append((request, "Item"))
    elif operation == "BatchWriteItem":
        tables = request.get("RequestItems")
        for requests in tables.values() if type(tables) is dict else ():
            for entry in requests if type(requests) is list else ():
                put = entry.get("PutRequest") if type(entry) is dict else None
                if type(put) is dict:
                    found.append((put, "Item"))
    elif operation == "TransactWriteItems":
        actions = request.get("TransactItems")
        for action in actions if type(actions) is list else ():
            put = action.get("Put") if type(action) is dict else None
            if type(put) is dict:
                found.append((put, "Item"))
    return [(holder, member) for holder, member in found if type(holder.get(member)) is dict]


def reduce_request(operation: str, request: dict[str, Any], keys: frozenset[str]) -> Reduced | None:
    """The stand-ins of a write ``request`` (see the module docstring); ``None`` when it has no
    heavy item (nothing to gain) or cannot be shrunk. ``keys``: every attribute name that is a
    key of some table or index."""
    scratch, server = _copy_path(operation, request), _copy_path(operation, request)
    reduced = over = False
    for (holder, member), (scratch_holder, _), (server_holder, _) in zip(
        _items(operation, request),
        _items(operation, scratch),
        _items(operation, server),
        strict=True,
    ):
        item = holder[member]
        checked = _check_item(item)
        if checked.error is not None:
            if weight(item, LIGHT_VALUES + 1) > LIGHT_VALUES:
                scratch_holder[member] = server_holder[member] = checked.error
                reduced = True
            continue
        over = over or checked.size > MAX_ITEM_SIZE
        if checked.values <= LIGHT_VALUES:
            continue
        same = _stand_in(item, checked, keys, checked.size)
        if checked.size > MAX_ITEM_SIZE:
            smaller = _stand_in(item, checked, keys, MAX_ITEM_SIZE + 1, over=True)
        else:
            smaller = same
        if same is None or smaller is None:
            continue
        scratch_holder[member], server_holder[member] = same, smaller
        reduced = True
    if not reduced:
        return None
    return Reduced(scratch, server, over)


def _copy_path(operation: str, request: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``request`` whose containers down to its items are new (the items are not),
    so that replacing an item leaves ``request`` as it was."""
    copy = dict(request)
    if operation == "BatchWriteItem" and type(copy.get("RequestItems")) is dict:
        copy["RequestItems"] = {
            table: [_copy_entry(entry, "PutRequest") for entry in requests]
            if type(requests) is list
            else requests
            for table, requests in copy["RequestItems"].items()
        }
    elif operation == "TransactWriteItems" and type(copy.get("TransactItems")) is list:
        copy["TransactItems"] = [_copy_entry(action, "Put") for action in copy["TransactItems"]]
    return copy


def _copy_entry(entry: Any, member: str) -> Any:
    if type(entry) is not dict:
        return entry
    copy = dict(entry)
    if type(copy.get(member)) is dict:
        copy[member] = dict(copy[member])
    return copy
