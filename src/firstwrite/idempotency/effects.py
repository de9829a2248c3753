"""The state machine's effects as plain values, and the one loop that performs them.

A transition of the state machine (``_machine/machine.py``) is a generator: it yields a
:class:`Call` (one DynamoDB request, built by :mod:`.requests`), a :class:`Sleep` or a
:class:`PlaceResult` (result store and cipher only) or a :class:`Reconcile` (recovery
points only), is sent the
answer (the response dict, or ``None`` after a sleep), and receives the client's exceptions
through ``throw()`` (h11's "events as data"). The guards (:mod:`.guard`, :mod:`.aio`) perform
these effects and nothing else, with :func:`perform` or :func:`aperform`.

The same loop runs the level above: code built on a guard yields guard calls
(:mod:`.steps`: claim, complete, fail...), and each of those runs one transition whose
DynamoDB calls are the effects here. :func:`perform` and :func:`aperform` are deliberate twins,
the only difference between them an ``await``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

if TYPE_CHECKING:
    from .result_placement import Placement

T = TypeVar("T")
E = TypeVar("E")


class Call(NamedTuple):
    """One DynamoDB request: ``client.<operation in snake case>(**params)``. Answer: the
    response dict."""

    operation: str
    params: dict[str, Any]


class Sleep(NamedTuple):
    """A pause (backoff, in-progress polling). Answer: ``None``."""

    seconds: float


class PlaceResult(NamedTuple):
    """Seal a completed result and/or write it to the result store
    (:meth:`.result_placement.Placement.place`, the cipher's and the store's I/O), only when
    one is configured. Answer: the AttributeValue to record."""

    placement: Placement
    value: dict[str, Any]
    record_id: str
    owner: str
    room: int  # bytes the record has for the result (at least)

    def run(self) -> dict[str, Any]:
        return self.placement.place(self.value, self.record_id, self.owner, self.room)


class Reconcile(NamedTuple):
    """Ask the caller's ``reconcile`` hook about interrupted work (:mod:`.recovery`): a
    blocking driver calls ``run()``, an asyncio driver awaits ``arun()``. Answer: the hook's
    answer, checked by the transition."""

    run: Callable[[], object]
    arun: Callable[[], Awaitable[object]]


Effect = Call | Sleep | PlaceResult | Reconcile
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


def perform(steps: Generator[E, Any, T], answer: Callable[[E], object]) -> T:
    """Run ``steps`` to its end and return its value: each effect it yields is answered with
    ``answer(effect)``, sent back in; an exception ``answer`` raises is thrown in instead
    (the generator decides: it turns answers into data and re-raises the rest).

    The exception is thrown in after its ``except`` block, not from inside it: an error the
    generator raises after reading an answer (``InProgressError`` after a failed condition)
    must not chain to that answer, keeping botocore's frames alive and printing "During
    handling of ConditionalCheckFailedException" above the caller's traceback."""
    try:
        effect = next(steps)
        while True:
            failed: BaseException | None = None
            try:
                result = answer(effect)
            except BaseException as exc:
                failed = exc
            if failed is None:
                effect = steps.send(result)
                continue
            try:
                effect = steps.throw(failed)
            finally:
                failed = None  # no frame -> exception -> traceback -> frame cycle
    except StopIteration as stop:
        outcome: T = stop.value
        return outcome


async def aperform(steps: Generator[E, Any, T], answer: Callable[[E], Awaitable[object]]) -> T:
    """:func:`perform` with each answer awaited."""
    try:
        effect = next(steps)
        while True:
            failed: BaseException | None = None
            try:
                result = await answer(effect)
            except BaseException as exc:
                failed = exc
            if failed is None:
                effect = steps.send(result)
                continue
            try:
                effect = steps.throw(failed)
            finally:
                failed = None  # no frame -> exception -> traceback -> frame cycle
    except StopIteration as stop:
        outcome: T = stop.value
        return outcome
