"""The Idempotency-Key header value: RFC 8941 sf-string per the IETF draft, bare keys leniently."""

from __future__ import annotations

import re

import pytest

from firstwrite.http import InvalidKey, parse_key


@pytest.mark.parametrize(
    ("value", "key"),
    [
        ('"8e03978e-40d5-43e8-bc93-6894a57f9324"', "8e03978e-40d5-43e8-bc93-6894a57f9324"),
        ("8e03978e-40d5-43e8-bc93-6894a57f9324", "8e03978e-40d5-43e8-bc93-6894a57f9324"),
        ('"with spaces inside"', "with spaces inside"),
        (r'"a \"quoted\" word"', 'a "quoted" word'),
        (r'"back\\slash"', "back\\slash"),
        ('"key";v=1', "key"),
        ('"key"; a=?1; b="x"; c=tok; d=-2.5; e=:AQID:', "key"),
        ("  padded  ", "padded"),
        ('\t"tabbed"\t', "tabbed"),
        ("order_42:retry/1", "order_42:retry/1"),
        ("*+=;!#$%&'()[]^`{|}~", "*+=;!#$%&'()[]^`{|}~"),
    ],
)
def test_valid_keys(value: str, key: str) -> None:
    assert parse_key(value, max_length=255) == key


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("", "empty"),
        ('""', "empty"),
        ("two words", "quoted string"),
        ('"unterminated', "Structured Field"),
        ('"bad \\x escape"', "Structured Field"),
        ('"tab\tinside"', "Structured Field"),
        ('"caf\u00e9"', "Structured Field"),
        ("caf\u00e9", "quoted string"),
        ("k1, k2", "more than one"),
        ('"k1", "k2"', "Structured Field"),
        ('"key";Bad=1', "Structured Field"),
        ('"key" trailing', "Structured Field"),
        ('half"quoted', "quoted string"),
        ("back\\slash", "quoted string"),
    ],
)
def test_invalid_keys(value: str, reason: str) -> None:
    with pytest.raises(InvalidKey, match=reason):
        parse_key(value, max_length=255)


def test_the_length_limit_counts_the_unquoted_key() -> None:
    assert parse_key('"' + "x" * 10 + '"', max_length=10) == "x" * 10
    with pytest.raises(InvalidKey, match="11 characters; the limit is 10"):
        parse_key("x" * 11, max_length=10)


def test_a_charset_pattern_applies_to_the_unquoted_key() -> None:
    uuid_only = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
    key = "8e03978e-40d5-43e8-bc93-6894a57f9324"
    assert parse_key(f'"{key}"', max_length=255, pattern=uuid_only) == key
    with pytest.raises(InvalidKey, match="characters this service does not accept"):
        parse_key("order-42", max_length=255, pattern=uuid_only)
