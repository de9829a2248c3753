"""Choosing a record's idempotency key: the source's own id, or a selector into its body.

A key is given to a source as ``None`` (the source's id: SQS ``messageId``, a Kinesis sequence
number...), a string (a JMESPath expression over the record's decoded body: JSON, base64 JSON
for Kinesis), or a callable over the whole record. Expressions are the idempotency layer's
selectors (:func:`firstwrite.idempotency.keys.select`), Powertools' decoding functions
included (``powertools_json(inner).id`` for a JSON string inside the body). A selected value
that is not a string is replaced by its fingerprint; an empty selection is
:class:`~firstwrite.MissingKeyError`, and the record is reported, never run unguarded.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import TypeVar

from firstwrite.idempotency.bodies import json_value
from firstwrite.idempotency.keys import key_from

__all__ = ["KeySelector", "base64_json", "json_body", "key_function", "payload_function"]

R = TypeVar("R")

KeySelector = str | Callable[[R], str] | None
"""``None`` (the source's id), a JMESPath expression over the body, or a function of the record."""


def json_body(text: str | bytes) -> object:
    """A JSON body, decoded."""
    decoded: object = json_value(text)
    return decoded


def base64_json(data: str) -> object:
    """A base64 body (Kinesis ``data``) holding JSON, decoded."""
    return json_body(base64.b64decode(data))


def key_function(
    selector: str | Callable[[R], str] | None,
    own_id: Callable[[R], str],
    body: Callable[[R], object],
) -> Callable[[R], str]:
    """The record-to-key function ``selector`` stands for."""
    if selector is None:
        return own_id
    if callable(selector):
        return selector
    expression = selector

    def select(record: R) -> str:
        return key_from(body(record), expression)

    return select


def payload_function(
    payload: Callable[[R], object] | bool, content: Callable[[R], object]
) -> Callable[[R], object] | None:
    """What ``payload=`` stands for: ``True`` the record's ``content``, ``False`` no check
    (``None``), or a function of the record."""
    if payload is True:
        return content
    if payload is False:
        return None
    return payload
