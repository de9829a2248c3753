"""Items as the lines of an S3 export or import: DynamoDB JSON, Amazon Ion text, and CSV.

As the developer guide's "DynamoDB table export output format" and "Import format quotas and
validation" describe them:

* DynamoDB JSON: one ``{"Item": {...}}`` object a line, AttributeValues in the wire form (B
  as base64).
* Ion: a ``$ion_1_0`` version marker, then one ``{Item:{...}}`` struct a line. S is an Ion
  string, N an Ion decimal, B a blob, BOOL a bool, NULL ``null``, L a list, M a struct, and the
  sets lists annotated ``$dynamodb_SS``, ``$dynamodb_NS``, ``$dynamodb_BS``. The reader takes
  the Ion text DynamoDB writes (and Ion's other number forms, comments and symbols).
* CSV (imports only): a header line (or the request's HeaderList), then one item a line; key
  attributes take the type AttributeDefinitions gives them, every other value is a string (an
  empty one is left out).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator, Mapping
from decimal import Decimal
from typing import Any

from ..values import Item, to_wire

__all__ = ["ION_HEADER", "csv_items", "ion_item", "ion_line", "json_item", "json_line"]

ION_HEADER = "$ion_1_0"


def json_line(item: Item) -> str:
    return json.dumps({"Item": item}, default=to_wire, ensure_ascii=False, separators=(",", ":"))


def json_item(line: str) -> Mapping[str, Any]:
    """The wire-form item of one DynamoDB JSON line (``ValueError`` when it is not one)."""
    document = json.loads(line)
    if not isinstance(document, dict) or not isinstance(document.get("Item"), dict):
        raise ValueError('a DynamoDB JSON line is an object with an "Item" object')
    return document["Item"]  # type: ignore[no-any-return]


# --- Ion ------------------------------------------------------------------------------------


def _ion_number(text: str) -> str:
    sign, digits, exponent = Decimal(text).as_tuple()
    coefficient = "".join(map(str, digits)) or "0"
    return f"{'-' if sign else ''}{coefficient}d{exponent}"


def _ion_blob(raw: Any) -> str:
    return "{{" + base64.b64encode(bytes(raw)).decode("ascii") + "}}"


def _ion_value(value: Mapping[str, Any]) -> str:
    ((kind, raw),) = value.items()
    if kind == "S":
        return json.dumps(raw, ensure_ascii=False)
    if kind == "N":
        return _ion_number(raw)
    if kind == "B":
        return _ion_blob(raw)
    if kind == "BOOL":
        return "true" if raw else "false"
    if kind == "NULL":
        return "null"
    if kind == "L":
        return "[" + ",".join(_ion_value(v) for v in raw) + "]"
    if kind == "M":
        return _ion_struct(raw)
    if kind == "SS":
        return "$dynamodb_SS::[" + ",".join(json.dumps(s, ensure_ascii=False) for s in raw) + "]"
    if kind == "NS":
        return "$dynamodb_NS::[" + ",".join(_ion_number(n) for n in raw) + "]"
    return "$dynamodb_BS::[" + ",".join(_ion_blob(b) for b in raw) + "]"


def _ion_struct(item: Mapping[str, Any]) -> str:
    fields = (f"{json.dumps(k, ensure_ascii=False)}:{_ion_value(v)}" for k, v in item.items())
    return "{" + ",".join(fields) + "}"


def ion_line(item: Item) -> str:
    return "{Item:" + _ion_struct(item) + "}"


_TOKEN = re.compile(
    r"""\s+|//[^\n]*|/\*.*?\*/
    |(?P<blob>\{\{[^}]*\}\})
    |(?P<string>"(?:[^"\\]|\\.)*")
    |(?P<quoted>'(?:[^'\\]|\\.)*')
    |(?P<annotation>::)
    |(?P<punct>[\[\]{},:])
    |(?P<atom>[^\s\[\]{},:"']+)""",
    re.VERBOSE | re.DOTALL,
)
_NUMBER = re.compile(r"[+-]?(?:\d[\d_]*)(?:\.[\d_]*)?(?:[dDeE][+-]?\d+)?\Z|[+-]?\.\d+\Z")


def _tokens(text: str) -> Iterator[tuple[str, str]]:
    position = 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            raise ValueError(f"unreadable Ion text at offset {position}")
        position = match.end()
        kind = match.lastgroup
        if kind is not None:
            yield kind, match.group(kind)


class _IonReader:
    """A recursive reader of the Ion text values an export holds."""

    def __init__(self, text: str) -> None:
        self._tokens = list(_tokens(text))
        self._at = 0

    def values(self) -> Iterator[Any]:
        while self._at < len(self._tokens):
            yield self._value()

    def _next(self) -> tuple[str, str]:
        if self._at >= len(self._tokens):
            raise ValueError("Ion text ends inside a value")
        token = self._tokens[self._at]
        self._at += 1
        return token

    def _value(self) -> Any:
        annotations: list[str] = []
        kind, text = self._next()
        while (
            kind in ("atom", "quoted")
            and self._at < len(self._tokens)
            and self._tokens[self._at][0] == "annotation"
        ):
            annotations.append(_symbol(kind, text))
            self._at += 1
            kind, text = self._next()
        value = self._plain(kind, text)
        set_kind = next((a[-2:] for a in annotations if a.startswith("$dynamodb_")), None)
        if set_kind is not None:
            if not isinstance(value, list):
                raise ValueError(f"{annotations[0]} annotates a list")
            return ("set", set_kind, value)
        return value

    def _plain(self, kind: str, text: str) -> Any:
        if kind == "string":
            return json.loads(text)
        if kind == "blob":
            return base64.b64decode("".join(text[2:-2].split()), validate=True)
        if kind == "punct" and text == "[":
            items: list[Any] = []
            while self._tokens[self._at] != ("punct", "]"):
                items.append(self._value())
                if self._tokens[self._at] == ("punct", ","):
                    self._at += 1
            self._at += 1
            return items
        if kind == "punct" and text == "{":
            fields: dict[str, Any] = {}
            while self._tokens[self._at] != ("punct", "}"):
                name_kind, name = self._next()
                name = json.loads(name) if name_kind == "string" else _symbol(name_kind, name)
                if self._next() != ("punct", ":"):
                    raise ValueError("an Ion struct field needs a ':'")
                fields[name] = self._value()
                if self._tokens[self._at] == ("punct", ","):
                    self._at += 1
            self._at += 1
            return fields
        if kind == "atom":
            if text in ("true", "false"):
                return text == "true"
            if text == "null" or text.startswith("null."):
                return None
            if _NUMBER.match(text):
                return (
                    "number",
                    str(Decimal(text.replace("_", "").replace("d", "e").replace("D", "e"))),
                )
            return ("symbol", text)
        if kind == "quoted":
            return ("symbol", _symbol(kind, text))
        raise ValueError(f"unexpected Ion token {text!r}")


def _symbol(kind: str, text: str) -> str:
    return json.loads('"' + text[1:-1].replace('"', '\\"') + '"') if kind == "quoted" else text


def _attribute(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        return {"S": value}
    if isinstance(value, bool):
        return {"BOOL": value}
    if value is None:
        return {"NULL": True}
    if isinstance(value, bytes):
        return {"B": value}
    if isinstance(value, list):
        return {"L": [_attribute(v) for v in value]}
    if isinstance(value, dict):
        return {"M": {k: _attribute(v) for k, v in value.items()}}
    tag = value[0]
    if tag == "number":
        return {"N": value[1]}
    if tag == "set":
        kind, members = value[1], value[2]
        if kind == "NS":
            return {"NS": [_attribute(m)["N"] for m in members]}
        return {kind: list(members)}
    return {"S": value[1]}  # a symbol: its text


def ion_item(text: str) -> Iterator[Item]:
    """The items of an Ion text (the ``{Item:{...}}`` structs; a version marker is skipped)."""
    for value in _IonReader(text).values():
        if value == ("symbol", ION_HEADER):
            continue
        if not isinstance(value, dict) or not isinstance(value.get("Item"), dict):
            raise ValueError("an Ion export value is a struct with an Item struct")
        yield {k: _attribute(v) for k, v in value["Item"].items()}


# --- CSV ------------------------------------------------------------------------------------


def csv_items(
    rows: Iterator[list[str]], header: list[str] | None, key_types: Mapping[str, str]
) -> Iterator[Item | ValueError]:
    """The items of CSV ``rows`` (the first is the header unless ``header`` is given); a row
    that cannot be one (a key value of its type) is yielded as its ``ValueError``."""
    names = header
    for row in rows:
        if names is None:
            names = row
            continue
        item: Item = {}
        try:
            for name, text in zip(names, row, strict=False):
                kind = key_types.get(name)
                if kind == "N":
                    item[name] = {"N": str(Decimal(text))}
                elif kind == "B":
                    item[name] = {"B": base64.b64decode(text, validate=True)}
                elif text or kind is not None:
                    item[name] = {"S": text}
        except (ArithmeticError, ValueError) as error:
            yield ValueError(f"row {row!r}: {error}")
            continue
        yield item
