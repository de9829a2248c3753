"""What the state machine asks a driver to do, as plain values (h11's "events as data").

A transition of :class:`.machine.StateMachine` is a generator: it yields a :class:`Call` (one
DynamoDB request, built by :mod:`..requests`) or a :class:`Sleep`, is sent the answer (the
response dict, or ``None`` after a sleep), and receives the client's exceptions through
``throw()``. The drivers (:mod:`..guard`, :mod:`..aio`) perform effects and nothing else.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, NamedTuple, TypeVar

T = TypeVar("T")


class Call(NamedTuple):
    """One DynamoDB request: ``client.<operation in snake case>(**params)``. Answer: the
    response dict."""

    operation: str
    params: dict[str, Any]


class Sleep(NamedTuple):
    """A pause (backoff, in-progress polling). Answer: ``None``."""

    seconds: float


Effect = Call | Sleep
Steps = Generator[Effect, Any, T]
"""A transition: yields effects, is sent their answers, returns its outcome."""

# boto3 method names of the operations the layer calls.
METHODS = {
    "PutItem": "put_item",
    "UpdateItem": "update_item",
    "GetItem": "get_item",
    "BatchGetItem": "batch_get_item",
    "DeleteItem": "delete_item",
    "TransactWriteItems": "transact_write_items",
    "CreateTable": "create_table",
    "DescribeTable": "describe_table",
    "DescribeTimeToLive": "describe_time_to_live",
    "UpdateTimeToLive": "update_time_to_live",
}


# operations a client may lack: the transitions that use them fail, and their callers fall back
OPTIONAL = frozenset({"BatchGetItem"})


def bind(client: Any) -> dict[str, Any]:
    """``operation -> client method`` for every operation in :data:`METHODS` (those of
    :data:`OPTIONAL` only where the client has them)."""
    return {
        operation: getattr(client, method)
        for operation, method in METHODS.items()
        if operation not in OPTIONAL or hasattr(client, method)
    }
