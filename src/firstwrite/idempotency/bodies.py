"""Bodies inside events: their decoding, and the JMESPath functions selectors reach them with.

* :class:`BodyFunctions` adds Powertools' functions to every selector, with its semantics:
  ``powertools_json(s)`` is ``json.loads(s)``, ``powertools_base64(s)`` the UTF-8 text of
  base64 ``s``, ``powertools_base64_gzip(s)`` the UTF-8 text of gzipped base64 ``s``; a
  non-string argument is jmespath's ``ArgumentTypeError``. ``json``, ``base64`` and
  ``base64_gzip`` are the same functions under shorter names.
* :func:`http_event` recognises an HTTP event (API Gateway REST v1 and HTTP v2, ALB, Lambda
  Function URL): a dict whose ``body`` is a string, whose ``requestContext`` is a dict, and that
  has ``httpMethod`` (v1, ALB) or ``requestContext.http`` (v2, Function URL).
* :func:`decoded_body` is what such a body holds: base64-decoded when ``isBase64Encoded`` is
  true, then gunzipped when the bytes are gzip, then the JSON value when the text is JSON, else
  the text. A body that is not valid base64, gzip or UTF-8 raises ``ValueError`` (``OSError``
  or ``EOFError`` for a broken gzip stream): :data:`DECODING_ERRORS`.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from jmespath import functions

__all__ = [
    "DECODING_ERRORS",
    "FUNCTION_NAMES",
    "BodyFunctions",
    "base64_gzip_text",
    "base64_text",
    "decoded_body",
    "http_event",
    "json_value",
]

DECODING_ERRORS = (ValueError, binascii.Error, OSError, EOFError)
"""What decoding a malformed body raises (JSON, base64, UTF-8, gzip)."""

_GZIP_MAGIC = b"\x1f\x8b"


def json_value(text: str | bytes) -> Any:
    """``json.loads``: Powertools' ``powertools_json``."""
    return json.loads(text)


def base64_text(data: str) -> str:
    """The UTF-8 text of base64 ``data``: Powertools' ``powertools_base64``."""
    return base64.b64decode(data).decode()


def base64_gzip_text(data: str) -> str:
    """The UTF-8 text of gzipped base64 ``data``: Powertools' ``powertools_base64_gzip``."""
    return gzip.decompress(base64.b64decode(data)).decode()


_F = TypeVar("_F", bound=Callable[..., Any])


def _one_string(fn: _F) -> _F:
    """jmespath's ``@signature`` for one string argument (typed: jmespath has no hints)."""
    checked: _F = functions.signature({"types": ["string"]})(fn)
    return checked


class BodyFunctions(functions.Functions):  # type: ignore[misc]  # jmespath has no hints
    """jmespath's built-in functions, plus Powertools' decoding functions (and short names)."""

    @_one_string
    def _func_powertools_json(self, value: str) -> Any:
        return json_value(value)

    @_one_string
    def _func_powertools_base64(self, value: str) -> str:
        return base64_text(value)

    @_one_string
    def _func_powertools_base64_gzip(self, value: str) -> str:
        return base64_gzip_text(value)

    # The short names: the same functions (jmespath finds them by their ``_func_`` names).
    _func_json = _func_powertools_json
    _func_base64 = _func_powertools_base64
    _func_base64_gzip = _func_powertools_base64_gzip


FUNCTION_NAMES = frozenset(
    {"powertools_json", "powertools_base64", "powertools_base64_gzip"}
    | {"json", "base64", "base64_gzip"}
)
"""The decoding functions: an expression calling one decodes bodies itself (no automatic
decoding)."""


def http_event(event: object) -> bool:
    """Whether ``event`` is an HTTP event with a string body (see the module docstring)."""
    if type(event) is not dict or type(event.get("body")) is not str:
        return False
    context = event.get("requestContext")
    return isinstance(context, Mapping) and ("httpMethod" in event or "http" in context)


def decoded_body(event: Mapping[str, Any]) -> Any:
    """The value an HTTP event's ``body`` holds (see the module docstring)."""
    body: str = event["body"]
    if event.get("isBase64Encoded") is True:
        raw = base64.b64decode(body)
        if raw[:2] == _GZIP_MAGIC:
            raw = gzip.decompress(raw)
        body = raw.decode()
    try:
        return json.loads(body)
    except ValueError:
        return body
