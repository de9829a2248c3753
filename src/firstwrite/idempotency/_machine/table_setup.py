"""``ensure_table`` as a transition.

Create the table (on-demand, TTL on ``expires_at``) unless
it exists, wait for it, enable TTL. Set-up calls are made once each, with the expected errors
(the table exists, TTL is already on, an emulator without TTL) taken as answers."""

from __future__ import annotations

from typing import Any

from ..client_errors import client_error_code
from ..effects import Call, Sleep, Steps
from .machine import StateMachine


def ensure_table(m: StateMachine, wait: float = 60.0) -> Steps[bool]:
    """``True`` when this call created the table. Safe to run from many processes at once."""
    table = m.config.table_name
    created = yield from _tolerant(m.requests.create_table(), "ResourceInUseException")
    deadline = m.monotonic() + wait
    while True:
        desc = yield from m.call(m.requests.describe_table(), table, table)
        if desc["Table"].get("TableStatus", "ACTIVE") == "ACTIVE":
            break
        if m.monotonic() > deadline:
            break
        yield Sleep(0.5)
    ttl = yield from _tolerant(m.requests.describe_ttl(), "UnknownOperationException")
    if ttl is None:
        # An emulator without TTL: expiry is still enforced in code, only deletion is lost.
        m.report.no_ttl()
        return created is not None
    status = ttl.get("TimeToLiveDescription", {}).get("TimeToLiveStatus")
    if status not in ("ENABLED", "ENABLING"):
        # ValidationException: a concurrent ensure_table enabled it first.
        # UnknownOperationException: an emulator that describes TTL but cannot enable it.
        try:
            yield m.requests.enable_ttl()
        except Exception as exc:
            code = client_error_code(exc)
            if code == "UnknownOperationException":
                m.report.no_ttl()
            elif code != "ValidationException":
                raise
    return created is not None


def _tolerant(call: Call, expected: str) -> Steps[dict[str, Any] | None]:
    """``call`` once, with ``expected`` (an error code) answered as ``None``."""
    try:
        response: dict[str, Any] = yield call
    except Exception as exc:
        if client_error_code(exc) != expected:
            raise
        return None
    return response
