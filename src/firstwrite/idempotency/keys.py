"""Keys and fingerprints.

* A record's key is ``<prefix>#<scope>#<key>``, or ``<prefix>#<key>`` with no scope. The scope
  (tenant, principal, operation) keeps one caller from ever reading another's stored result.
  ``%`` and ``#`` inside the parts are percent-escaped, so scope ``"a#b"`` + key ``"c"``, scope
  ``"a"`` + key ``"b#c"`` and no scope + key ``"a#b#c"`` can never collide. Keys longer than ``max_key_length`` bytes
  are replaced by ``%<hash name>:<hex digest>`` (:data:`HASHED_MARK` first): an escaped key has
  a ``%`` only before ``23`` or ``25``, so no literal key, however it is spelt, is stored as the
  hashed form of another.
* A fingerprint is the hash (SHA-256 by default) of the canonical JSON of the request: keys
  sorted, no whitespace, UTF-8, integral floats written as integers (as RFC 8785 does, so ``1``
  and ``1.0`` agree), NaN/Infinity refused.
* A selector is a JMESPath expression (compiled once, with :mod:`.bodies`' functions) or a
  callable. Over an HTTP event, an expression reading ``body`` reads the decoded body.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as _dt
import decimal
import enum
import functools
import hashlib
import json
import uuid
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any, NamedTuple

from jmespath.exceptions import JMESPathError, JMESPathTypeError

from .bodies import DECODING_ERRORS, FUNCTION_NAMES, BodyFunctions, decoded_body, http_event
from .errors import MissingKeyError, SerializationError
from .record import NO_FINGERPRINT as NO_FINGERPRINT

Selector = str | Callable[[Any], Any]


_PLAIN = frozenset({str, int, bool, type(None)})


def normalise(value: Any) -> Any:
    """Turn ``value`` into plain JSON types (dicts, lists, str, int, float, bool, None)."""
    # Fast paths for the exact built-in types a request is usually made of; anything else
    # (subclasses included) takes the general path below, which gives the same answer for these.
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind is dict:
        return {k if type(k) is str else str(k): normalise(v) for k, v in value.items()}
    if kind is list:
        return [normalise(v) for v in value]
    return _normalise(value)


def _normalise(value: Any) -> Any:
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise SerializationError("NaN and Infinity have no JSON form")
        return int(value) if value.is_integer() and abs(value) < 2**53 else value
    if isinstance(value, Mapping):
        return {str(k): normalise(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [normalise(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((normalise(v) for v in value), key=_canonical_text)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: normalise(getattr(value, f.name)) for f in dataclasses.fields(value)}
    dump = getattr(value, "model_dump", None)  # pydantic v2, without importing pydantic
    if callable(dump):
        return normalise(dump(mode="json"))
    if isinstance(value, decimal.Decimal):
        return normalise(int(value)) if value == value.to_integral_value() else str(value)
    if isinstance(value, enum.Enum):
        return normalise(value.value)
    if isinstance(value, (_dt.datetime, _dt.date, _dt.time)):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    raise SerializationError(f"cannot fingerprint a {type(value).__name__}")


# Built once: ``json.dumps`` with options builds a new encoder on every call. Input is always
# normalised (a fresh tree, NaN refused), so the circularity check has nothing to find.
_canonical_text = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, check_circular=False
).encode


@lru_cache(maxsize=16)
def _hasher(name: str) -> Callable[[bytes], Any]:
    """The hash constructor (``hashlib.sha256`` rather than the slower ``hashlib.new``)."""
    direct = getattr(hashlib, name, None)
    if callable(direct) and name in hashlib.algorithms_guaranteed:
        return direct  # type: ignore[no-any-return]
    return lambda data: hashlib.new(name, data)


def _plain_encoder() -> Callable[[Any], str]:
    """``_canonical_text`` for plain trees, without the C encoder ``JSONEncoder.encode`` builds
    afresh on every call (a third of an encode's cost). That constructor is the stdlib's private
    ``c_make_encoder``: used only if present and giving the very same text."""
    try:
        from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]

        # markers, default, encoder, indent, key and item separators, sort_keys, skipkeys,
        # allow_nan: what JSONEncoder passes for _canonical_text's options.
        make = c_make_encoder(None, None, encode_basestring, None, ":", ",", True, False, True)
    except (ImportError, TypeError):  # pragma: no cover - another Python's json
        return _canonical_text

    def encode(value: Any) -> str:
        return "".join(make(value, 0))

    sample = {"b": [1, "é\n", None, True, (2, -3)], "a": {"": "x"}, "c": 10**40}
    return encode if encode(sample) == _canonical_text(sample) else _canonical_text


def canonical_json(value: Any) -> bytes:
    """The canonical JSON bytes of ``value`` (see the module docstring)."""
    # A tree of nothing but str-keyed dicts, lists, tuples, str, int, bool and None encodes the
    # same with or without normalising it: checking that allocates nothing, normalising copies.
    if _is_plain(value):
        return _plain_text(value).encode("utf-8")
    return _canonical_text(normalise(value)).encode("utf-8")


def _is_plain(value: Any) -> bool:
    kind = type(value)
    if kind in _PLAIN:
        return True
    if kind is dict:
        for k, v in value.items():
            if type(k) is not str or not (type(v) in _PLAIN or _is_plain(v)):
                return False
        return True
    if kind is list or kind is tuple:
        for v in value:  # noqa: SIM110 - a loop: all() over a generator is slower here
            if not (type(v) in _PLAIN or _is_plain(v)):
                return False
        return True
    return False


_plain_text = _plain_encoder()


def fingerprint(value: Any, hash_function: str = "sha256") -> str:
    """Hex digest of the canonical JSON of ``value``."""
    return str(_hasher(hash_function)(canonical_json(value)).hexdigest())


def fingerprinter(hash_function: str = "sha256") -> Callable[[Any], str]:
    """:func:`fingerprint` with ``hash_function`` looked up once (a guard's, per request)."""
    hasher = _hasher(hash_function)

    def fingerprint_with(value: Any) -> str:
        digest: str = hasher(canonical_json(value)).hexdigest()
        return digest

    return fingerprint_with


class _Compiled(NamedTuple):
    """A selector expression, compiled once (:func:`_compiled`)."""

    search: Callable[[Any], Any]  # the expression over a normalised payload
    path: tuple[str, ...] | None  # its field names, when a plain path (``a.b.c``)
    decodes_http_body: bool  # reads ``body`` and calls no decoding function (bodies.py)


_OPTIONS: Any = None  # jmespath.Options with BodyFunctions: made at the first compile


@lru_cache(maxsize=256)
def _compiled(expression: str) -> _Compiled:
    """The compiled expression, its plain path, and whether an HTTP event's body is decoded
    for it."""
    global _OPTIONS
    import jmespath

    if _OPTIONS is None:
        _OPTIONS = jmespath.Options(custom_functions=BodyFunctions())
    parsed = jmespath.compile(expression)
    fields, calls = _names(parsed.parsed)
    search = functools.partial(parsed.search, options=_OPTIONS)
    auto = "body" in fields and calls.isdisjoint(FUNCTION_NAMES)
    return _Compiled(search, _field_path(parsed.parsed), auto)


def _names(node: dict[str, Any]) -> tuple[set[str], set[str]]:
    """The field names and the function names anywhere in a parsed expression."""
    fields: set[str] = set()
    calls: set[str] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if current.get("type") == "field":
            fields.add(str(current["value"]))
        elif current.get("type") == "function_expression":
            calls.add(str(current["value"]))
        stack.extend(c for c in current.get("children", ()) if isinstance(c, dict))
    return fields, calls


def key_path(expression: str) -> tuple[str, ...] | None:
    """The field names of a JMESPath expression that is a plain path (``a.b.c``), else
    ``None``; for :func:`walk`. Raises jmespath's ``ParseError`` for an invalid expression."""
    compiled = _compiled(expression)
    return None if compiled.decodes_http_body else compiled.path


def _field_path(node: dict[str, Any]) -> tuple[str, ...] | None:
    if node.get("type") == "field":
        return (str(node["value"]),)
    if node.get("type") == "subexpression":
        parts: list[str] = []
        for child in node.get("children", ()):
            path = _field_path(child)
            if path is None:
                return None
            parts.extend(path)
        return tuple(parts)
    return None


_STR_ONLY = frozenset({str})


def walk(payload: Any, path: tuple[str, ...]) -> Any:
    """A plain path (:func:`key_path`) through plain dicts (string keys only, where normalising changes nothing),
    normalising only what it selects; ``None`` where the general search must decide."""
    value = payload
    for name in path:
        if type(value) is not dict or not _STR_ONLY.issuperset(map(type, value)):
            return None
        value = value.get(name)
    return None if value is None else normalise(value)


def select(payload: Any, selector: Selector | None) -> Any:
    """The part of ``payload`` that identifies the request: all of it, a JMESPath expression's
    result (over the normalised payload), or a callable's return value.

    An expression that reads ``body`` and calls no decoding function, over an HTTP event
    (:func:`~.bodies.http_event`), reads the decoded body (:func:`~.bodies.decoded_body`); a
    body that cannot be decoded is :class:`MissingKeyError`, as is an explicit decoding
    function's failure."""
    if selector is None:
        return payload
    if callable(selector):
        return selector(payload)
    compiled = _compiled(selector)
    try:
        if compiled.decodes_http_body and http_event(payload):
            payload = {**payload, "body": decoded_body(payload)}
        path = compiled.path
        if path is not None:
            found = walk(payload, path)
            if found is not None:
                return found
        return compiled.search(payload if _searchable(payload) else normalise(payload))
    except DECODING_ERRORS as exc:
        if isinstance(exc, JMESPathError) and not isinstance(exc, JMESPathTypeError):
            raise
        raise MissingKeyError(f"no idempotency key in the request ({selector!r}: {exc})") from exc


def _searchable(value: Any) -> bool:
    """Whether ``normalise(value) == value`` with the same types throughout (str-keyed dicts,
    lists, str, int, bool, None: a decoded JSON event without floats), so jmespath may search
    it as it is instead of a normalised copy."""
    kind = type(value)
    if kind is dict:
        for k, v in value.items():
            if type(k) is not str or not (type(v) in _PLAIN or _searchable(v)):
                return False
        return True
    if kind is list:
        for v in value:  # noqa: SIM110 - a loop: all() over a generator is slower here
            if not (type(v) in _PLAIN or _searchable(v)):
                return False
        return True
    return kind in _PLAIN


def key_from(payload: Any, selector: Selector | None, hash_function: str = "sha256") -> str:
    """An idempotency key derived from selected fields: their fingerprint.

    Raises :class:`MissingKeyError` when the selection is empty (``None``, or a container of
    nothing but ``None``): an empty key would make every request a duplicate of the first.
    """
    selected = select(payload, selector)
    if _empty(selected):
        raise MissingKeyError(f"no idempotency key in the request (selector {selector!r})")
    if isinstance(selected, str):
        return selected
    return fingerprint(selected, hash_function)


def _empty(value: Any) -> bool:
    if value is None or value == "":
        return True
    if isinstance(value, Mapping):
        return all(_empty(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return all(_empty(v) for v in value)
    return False


HASHED_MARK = "%"
"""The first character of a hashed key part (``%sha256:<hex>``). :func:`_escape` writes a ``%``
only as ``%25`` or ``%23``, so an escaped literal key never starts with ``%`` and a letter: a
literal ``"sha256:<hex>"`` and the long key hashed to that digest are two records."""


def _escape(part: str) -> str:
    return part.replace("%", "%25").replace("#", "%23") if ("%" in part or "#" in part) else part


def _unescape(part: str) -> str:
    return part.replace("%23", "#").replace("%25", "%") if "%" in part else part


def caller_key(partition: str, sort: str | None = None) -> str:
    """The caller's key a record's key values were built from (for logs of records read from a
    stream): the last part of the partition key, or the sort key. A key longer than
    ``max_key_length`` comes back as the hash that replaced it."""
    return _unescape(sort if sort is not None else partition.rpartition("#")[2])


class KeyBuilder:
    """Builds the DynamoDB key of a record from a scope and a caller's key.

    ``partition_key`` only: ``pk = <prefix>#<scope>#<key>`` (``<prefix>#<key>`` without a
    scope). With a ``sort_key``:
    ``pk = <prefix>#<scope>``, ``sk = <key>`` (one partition per scope, e.g. per tenant, so a
    tenant's records can be queried together; mind the per-partition throughput).
    """

    __slots__ = ("_hash", "_max", "_pk", "_prefix", "_scope", "_scope_part", "_sk")

    def __init__(
        self,
        *,
        prefix: str,
        scope: str,
        partition_key: str,
        sort_key: str | None,
        max_key_length: int,
        hash_function: str,
    ) -> None:
        self._prefix = prefix
        self._scope = scope
        self._scope_part = _escape(scope) if scope else ""  # escaped once, used every call
        self._pk = partition_key
        self._sk = sort_key
        self._max = max_key_length
        self._hash = hash_function

    def record_id(self, key: str, scope: str | None = None) -> tuple[str, str | None]:
        """``(partition value, sort value or None)`` for ``key`` in ``scope``."""
        if not isinstance(key, str) or not key:
            raise MissingKeyError("the idempotency key must be a non-empty string")
        full_scope = self._scope_part
        if scope:
            full_scope = f"{full_scope}#{_escape(scope)}" if full_scope else _escape(scope)
        part = _escape(key)
        if (len(part) if part.isascii() else len(part.encode("utf-8"))) > self._max:
            digest = hashlib.new(self._hash, key.encode("utf-8")).hexdigest()
            part = f"{HASHED_MARK}{self._hash}:{digest}"
        if self._sk is None:
            if not full_scope:  # seed 001's key: no empty scope part
                return f"{self._prefix}#{part}", None
            return f"{self._prefix}#{full_scope}#{part}", None
        return f"{self._prefix}#{full_scope}", part

    def key(self, key: str, scope: str | None = None) -> tuple[dict[str, dict[str, str]], str]:
        """The DynamoDB ``Key`` dict and a printable record id (for errors, logs, metrics)."""
        pk, sk = self.record_id(key, scope)
        if sk is None or self._sk is None:
            return {self._pk: {"S": pk}}, pk
        return {self._pk: {"S": pk}, self._sk: {"S": sk}}, f"{pk}|{sk}"
