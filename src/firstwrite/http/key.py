"""The ``Idempotency-Key`` header value, as the IETF draft defines it, read leniently.

The draft ("The Idempotency-Key HTTP Header Field", draft-ietf-httpapi-idempotency-key-header)
makes the field an RFC 8941 Structured Field Item whose value is a String: ``"8e03978e-..."``
(double quotes, ``\\"`` and ``\\\\`` the only escapes, printable ASCII inside). Parameters after
the item (``"abc";v=1``) are allowed by RFC 8941 and ignored here, as it asks for unknown ones.

Most clients send the key bare (``Idempotency-Key: 8e03978e-...``), and a UUID is not even an
RFC 8941 token (tokens start with a letter), so a bare value is accepted too: visible ASCII with
no ``"``, ``\\`` or ``,`` (a comma means two header lines were folded into a list). Either form
gives the same key: ``"abc"`` and ``abc`` are one key.
"""

from __future__ import annotations

import re

__all__ = ["InvalidKey", "parse_key"]

# A parameter: key [= bare item]. Bare items: token, sf-string, integer/decimal, boolean, bytes.
_PARAM = (
    r"\s*;\s*[a-z*][a-z0-9_.*-]*"
    r"(?:=(?:[A-Za-z*][!#$%&\'*+.^_`|~0-9A-Za-z:/-]*"
    r'|"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\["\\])*"'
    r"|-?\d{1,15}(?:\.\d{1,3})?"
    r"|\?[01]"
    r"|:[A-Za-z0-9+/=]*:))?"
)
_STRING = re.compile(
    r'"((?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\["\\])*)"((?:' + _PARAM + r")*)\s*", re.ASCII
)
_BARE = re.compile(r"[\x21\x23-\x2b\x2d-\x5b\x5d-\x7e]+", re.ASCII)
_UNESCAPE = re.compile(r"\\([\"\\])")


class InvalidKey(ValueError):
    """The header value is not a usable key; ``reason`` says why (for the 400's detail)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def parse_key(value: str, *, max_length: int, pattern: re.Pattern[str] | None = None) -> str:
    """The key in an ``Idempotency-Key`` header value (surrounding whitespace ignored).

    Raises :class:`InvalidKey` when the value is neither an sf-string nor a bare key, is empty,
    is longer than ``max_length`` characters, or (after unquoting) does not match ``pattern``.
    """
    text = value.strip(" \t")
    if text.startswith('"'):
        match = _STRING.fullmatch(text)
        if match is None:
            raise InvalidKey(
                "the Idempotency-Key is not a valid Structured Field string: expected "
                '"..." with printable ASCII inside and only \\" and \\\\ escaped'
            )
        key = match.group(1)
        if "\\" in key:
            key = _UNESCAPE.sub(r"\1", key)
    elif _BARE.fullmatch(text):
        key = text
    elif not text:
        raise InvalidKey("the Idempotency-Key header is empty")
    elif "," in text:
        raise InvalidKey("more than one Idempotency-Key was sent; send exactly one")
    else:
        raise InvalidKey(
            'the Idempotency-Key must be a quoted string ("...") or a bare key of visible '
            'ASCII characters without ", \\ or ,'
        )
    if not key:
        raise InvalidKey("the Idempotency-Key is empty")
    if len(key) > max_length:
        raise InvalidKey(f"the Idempotency-Key is {len(key)} characters; the limit is {max_length}")
    if pattern is not None and pattern.fullmatch(key) is None:
        raise InvalidKey(
            f"the Idempotency-Key contains characters this service does not accept "
            f"(allowed: {pattern.pattern})"
        )
    return key
