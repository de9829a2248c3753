"""A library's DynamoDB calls: counted per table, recorded, and replayed with none of its code.

What the idempotency and events benchmarks share to say what a library's time is made of: its
calls alone (:func:`calls_alone`), replayed on the same client as the library made them, and the
:class:`Allowance` a time target leaves a library beside its calls.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from botocore import xform_name

from ._common import Table


class CallCounter:
    """Counts every DynamoDB API call a client makes (one per operation, retries excluded), in
    all and per table.

    A library's calls are those on its own table: a library may still be making a call after
    its request has returned (idemkit's event-loop thread finishes its in-progress request's
    UpdateItem after the caller got ``IdempotencyConflict``), and a total over the shared client
    would put that call in whichever contender's timed slice it lands in."""

    def __init__(self) -> None:
        self.total = 0
        self.by_table: dict[str, int] = {}

    def attach(self, client: Any) -> None:
        # before-parameter-build carries the caller's parameters (before-call has the
        # serialised body only) and, like before-call, fires once per operation
        client.meta.events.register("before-parameter-build.dynamodb", self._on_call)

    def _on_call(self, params: dict[str, Any], **_kwargs: Any) -> None:
        self.count(params)

    def count(self, params: dict[str, Any]) -> None:
        """One call with these parameters (its table: ``TableName``, or a transaction's
        first item's)."""
        self.total += 1
        table = params.get("TableName")
        if table is None:
            for action in params.get("TransactItems", ())[:1]:
                for body in action.values():
                    table = body.get("TableName")
        if isinstance(table, str):
            self.by_table[table] = self.by_table.get(table, 0) + 1

    def on(self, tables: tuple[str, ...]) -> int:
        """The calls made on ``tables`` so far."""
        return sum(self.by_table.get(t, 0) for t in tables)


# One recorded DynamoDB call: (client method name, its parameters, whether it failed its condition).
Recorded = tuple[str, dict[str, Any], bool]


class CountedClient:
    """A DirectClient (which has no botocore events) whose operation calls are counted, and
    recorded while ``recording`` is a list."""

    def __init__(self, client: Any, counter: CallCounter) -> None:
        self._client = client
        self._counter = counter
        self.recording: list[Recorded] | None = None

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if name in ("exceptions", "meta") or not callable(attr):
            return attr
        counter = self._counter
        ccf = self._client.exceptions.ConditionalCheckFailedException

        def counted(*args: Any, **kwargs: Any) -> Any:
            counter.count(kwargs)
            recording = self.recording
            if recording is None:
                return attr(*args, **kwargs)
            params = copy.deepcopy(kwargs)
            try:
                response = attr(*args, **kwargs)
            except ccf:
                recording.append((name, params, True))
                raise
            recording.append((name, params, False))
            return response

        setattr(self, name, counted)  # build the wrapper once per operation
        return counted


# A recorded call, ready to replay: (bound method, params, whether it failed its condition,
# the partition key attribute given a new value on each replay, or None).
Replayed = tuple[Callable[..., Any], dict[str, Any], bool, str | None]


def record_calls(client: Any, fn: Callable[[], Any]) -> list[Recorded]:
    """The DynamoDB calls ``fn()`` makes on a boto3 ``client``, in order, each with whether its
    condition failed."""
    calls: list[list[Any]] = []

    def on_params(params: dict[str, Any], model: Any, **_kwargs: Any) -> None:
        calls.append([xform_name(model.name), copy.deepcopy(params), False])

    def on_answer(parsed: dict[str, Any], **_kwargs: Any) -> None:
        code = parsed.get("Error", {}).get("Code")
        calls[-1][2] = code == "ConditionalCheckFailedException"

    events = client.meta.events
    hooks = (("provide-client-params.dynamodb", on_params), ("after-call.dynamodb", on_answer))
    for event, hook in hooks:  # unique ids are per emitter, not per event
        events.register(event, hook, unique_id=f"bench-record-{event}")
    try:
        fn()
    finally:
        for event, _hook in hooks:
            events.unregister(event, unique_id=f"bench-record-{event}")
    return [(name, params, failed) for name, params, failed in calls]


def replayable(client: Any, recorded: list[Recorded], *, fresh: bool) -> list[Replayed]:
    """``recorded`` calls bound to ``client``'s methods, for :func:`replay`; ``fresh``: each
    replay writes a new key value (the table's partition key)."""
    keys: dict[str, str] = {}
    calls: list[Replayed] = []
    for method, params, failed in recorded:
        table = params.get("TableName")
        if fresh and table is not None and table not in keys:
            schema = client.describe_table(TableName=table)["Table"]["KeySchema"]
            keys[table] = next(k["AttributeName"] for k in schema if k["KeyType"] == "HASH")
        calls.append((getattr(client, method), params, failed, keys.get(table or "")))
    return calls


def replay(calls: list[Replayed], i: int, ccf: type[BaseException], name: str) -> None:
    """Make ``calls`` again (replay number ``i``); each must end as the recorded one did:
    written, or its condition failed (``ccf``)."""
    for method, params, failed, fresh in calls:
        request = params
        if fresh is not None:  # a new key value, in the item or key the call names
            request = dict(params)
            part = "Item" if "Item" in request else "Key"
            attributes = request[part] = dict(request[part])
            attributes[fresh] = {"S": f"{attributes[fresh]['S']}#{i}"}
        try:
            method(**request)
        except ccf:
            if failed:
                continue
            raise
        if failed:
            raise AssertionError(f"{name}: a replayed call that had failed went through")


def calls_alone(name: str) -> str:
    """The name of the contender replaying library ``name``'s calls alone."""
    return f"{name}' calls alone" if name.endswith("s") else f"{name}'s calls alone"


@dataclass(frozen=True)
class Allowance:
    """What each library does beside its DynamoDB calls in one table (medians, in the table's
    unit), and what the target leaves firstwrite on its calls: a target ``ours <= t x theirs``
    needs ``own <= t x theirs - calls``."""

    calls: float  # firstwrite's calls alone
    theirs: float  # Powertools, whole
    own: float  # firstwrite beside its calls
    their_own: float  # Powertools beside its calls
    allowed: float  # what the target leaves firstwrite beside its calls (<= 0: nothing)


def allowance(table: Table, us: str, peer: str, target: float) -> Allowance | None:
    """The :class:`Allowance` of ``table`` (firstwrite's contender ``us`` against ``peer``, each
    with its calls alone, under ``us <= target x peer``), or None if one of the four was not
    measured."""
    ours, theirs = table.get(us), table.get(peer)
    calls, their_calls = table.get(calls_alone(us)), table.get(calls_alone(peer))
    if not all(s is not None and s.values for s in (ours, theirs, calls, their_calls)):
        return None
    assert ours and theirs and calls and their_calls
    return Allowance(
        calls=calls.median,
        theirs=theirs.median,
        own=ours.median - calls.median,
        their_own=theirs.median - their_calls.median,
        allowed=target * theirs.median - calls.median,
    )
