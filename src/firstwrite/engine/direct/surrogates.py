"""Text that no Unicode encoding carries, as the in-process clients may be handed it.

Such text holds a surrogate code point (U+D800 to U+DFFF, half of a UTF-16 pair). Over HTTP it
cannot arrive: a body is UTF-8 (or UTF-16/32), and a ``\\uD800`` escape left unpaired is refused
with the body (:func:`.wire.loads`: a bare SerializationException, DynamoDB's answer). A bound
boto3 client serialises its request to such a body first. The
:class:`~.client.DirectClient` hands Python values to the engine, so it asks
:func:`holds_surrogate` and answers :data:`UNREADABLE` as the server would (issue 15, hole 5).
"""

from __future__ import annotations

import marshal
import re
import threading
from collections.abc import Mapping
from typing import Any

import msgpack

from ..errors import DynamoDBError

__all__ = ["UNREADABLE", "holds_surrogate"]


# What DynamoDB answers a body it cannot read as Unicode text: a bare SerializationException.
UNREADABLE = DynamoDBError("SerializationException")

# U+D800..U+DFFF encoded as UTF-8 with surrogatepass: 0xED, then 0xA0..0xBF, then one more byte.
_SURROGATE_UTF8 = re.compile(b"\xed[\xa0-\xbf]")

_packers = threading.local()  # a Packer is not thread-safe; reusing one skips its setup
# A packer that wrote a request this large is dropped, not kept: it holds on to its buffer.
_KEPT_BUFFER_BYTES = 1 << 20


def holds_surrogate(request: Mapping[str, Any]) -> bool:
    """Whether a string anywhere in ``request`` (keys included) holds a surrogate code point.

    The check runs on every in-process call, so its common case is one pass in C: msgpack
    encodes every string of a request as strict UTF-8, which no string holding a surrogate
    passes, so a request it writes holds none. Anything else (an error, perhaps a surrogate, or
    a value msgpack does not write) is looked at exactly: ``marshal`` writes a string as UTF-8
    with surrogates let through (``\\xed\\xa0-\\xbf...``, a sequence valid UTF-8 never
    holds), and a byte search finds the rare request that may hold one. Only then (bytes values
    may hold that sequence too), or for values ``marshal`` does not know, are the strings looked
    at one by one.
    """
    packer: msgpack.Packer | None = getattr(_packers, "packer", None)
    if packer is None:
        packer = _packers.packer = msgpack.Packer()
    try:
        written = packer.pack(request)
    except Exception:  # a surrogate, or a value msgpack does not write
        pass
    else:
        if len(written) > _KEPT_BUFFER_BYTES:
            _packers.packer = None
        return False
    whole: Any = request  # any Mapping: marshal refuses what it cannot write (ValueError)
    try:
        data = marshal.dumps(whole)
    except ValueError:  # a type marshal does not write, or nested beyond its depth limit
        pass
    else:
        if _SURROGATE_UTF8.search(data) is None:
            return False
    try:
        return _surrogate_in(request)
    except RecursionError:  # nested beyond reason: the engine's own depth check refuses it
        return False


def _surrogate_in(value: Any) -> bool:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, Mapping):
        return any(_surrogate_in(k) or _surrogate_in(v) for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(_surrogate_in(v) for v in value)
    return False
