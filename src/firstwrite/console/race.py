"""Race N claims: N threads fire the same conditional PutItem for one key at once.

Each thread's item names its writer. Exactly one put may succeed; every other one must get
``ConditionalCheckFailedException`` carrying the winner's item
(``ReturnValuesOnConditionCheckFailure=ALL_OLD``): judged by
:func:`firstwrite.shared.first_writer_wins.judge`, as ``firstwrite race`` judges its keys, and
shown as a checklist. The threads are released together by a barrier and share one boto3
client bound in process (boto3 clients are thread-safe); the engine's storage decides the order,
under SQLite's write lock, as it would for any client. The items go to one dedicated table,
:data:`RACE_TABLE`.

Given the engine's hooks (``race(..., hooks=engine.hooks)``), the race also records the moment
the winning item was written: a change hook on :data:`RACE_TABLE` alone, called by the engine
inside the write's own transaction, so while the engine holds its write lock. It is installed
for the race only; meanwhile the race table's writes take the engine's regular write path
(no single-statement fast path), the other tables' writes are untouched.
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from botocore.exceptions import ClientError

from firstwrite.shared.first_writer_wins import (
    MAX_CONTENDERS,
    MIN_CONTENDERS,
    Answers,
    KeyVerdict,
    judge,
)

RACE_TABLE = "firstwrite-console-race"
MIN_N = MIN_CONTENDERS
MAX_N = MAX_CONTENDERS
MAX_KEY_CHARS = 1024
CONDITION = "attribute_not_exists(pk)"


class ChangeHooks(Protocol):
    """What the race uses of the engine's hooks (``Engine.hooks``) to see the winning write."""

    def add_change_hook(
        self, hook: Callable[..., None], watches: Callable[..., bool] | None = None
    ) -> None: ...

    def remove_change_hook(self, hook: Callable[..., None]) -> None: ...


class _Table(Protocol):
    name: str


@dataclass(frozen=True, slots=True)
class Write:
    """The winning item's write, seen inside the engine's write transaction."""

    writer: str  # the writer named in the item written
    at_us: float  # microseconds after the barrier released the threads


class RaceInputError(ValueError):
    """The race was asked for something it will not do (N out of range, a bad key)."""


@dataclass(slots=True)
class Attempt:
    thread: int
    writer: str
    sent: int = 0  # the order the threads sent their requests (1 = first)
    answered: int = 0  # the order the answers came back
    sent_us: float = 0.0  # microseconds after the barrier released the threads
    answered_us: float = 0.0
    code: str | None = None  # None: the put succeeded
    message: str = ""
    item: dict[str, Any] | None = None  # the item that came back with a failed condition

    @property
    def won(self) -> bool:
        return self.code is None

    @property
    def writer_returned(self) -> str | None:
        if self.item is None:
            return None
        value = self.item.get("writer", {}).get("S")
        return None if value is None else str(value)


@dataclass(slots=True)
class RaceResult:
    key: str
    n: int
    existed: dict[str, Any] | None  # the item that was already there before the race
    attempts: list[Attempt]
    stored: dict[str, Any] | None
    seconds: float
    # The key's writes under the engine's write lock (when watched): one, the winner's.
    writes: tuple[Write, ...] = ()

    @property
    def verdict(self) -> KeyVerdict[dict[str, Any]]:
        """First-writer-wins judged on the answers (items compared whole)."""
        return judge(_answers(self), self.n)

    @property
    def checks(self) -> list[tuple[str, bool]]:
        """The verdict as a checklist: each line passes or fails, as the page shows it."""
        return _checklist(self, self.verdict)

    @property
    def winner(self) -> Attempt | None:
        winners = [a for a in self.attempts if a.won]
        return winners[0] if len(winners) == 1 else None

    @property
    def held(self) -> bool:
        return self.verdict.held

    def request(self) -> dict[str, Any]:
        """The request every thread sent (its own writer name in ``Item``)."""
        return {
            "TableName": RACE_TABLE,
            "Item": {"pk": {"S": self.key}, "writer": {"S": "thread-NN"}},
            "ConditionExpression": CONDITION,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }

    def summary(self) -> dict[str, Any]:
        verdict = self.verdict
        return {
            "key": self.key,
            "n": self.n,
            "held": verdict.held,
            "winner": None if self.winner is None else self.winner.writer,
            "won": sum(a.won for a in self.attempts),
            "lost": verdict.losers,
            "errors": len(verdict.errors),
            # handed the first writer's item: the winner's, or the one stored before the race
            "losers_with_winners_item": verdict.losers_with_first,
            "checks": [{"text": t, "passed": ok} for t, ok in _checklist(self, verdict)],
            "seconds": round(self.seconds, 4),
        }


def validate(n: Any, key: Any) -> tuple[int, str]:
    """``(n, key)`` checked, with a fresh key when none is given; RaceInputError otherwise."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise RaceInputError(f"n must be a whole number between {MIN_N} and {MAX_N}, not {n!r}")
    if not MIN_N <= n <= MAX_N:
        raise RaceInputError(
            f"n must be between {MIN_N} and {MAX_N} concurrent claims, not {n}: each claim is a "
            "thread of the console's process"
        )
    if key is None or key == "":
        key = f"race-{uuid.uuid4().hex[:12]}"
    if not isinstance(key, str) or len(key) > MAX_KEY_CHARS:
        raise RaceInputError(f"key must be a string of at most {MAX_KEY_CHARS} characters")
    return n, key


def ensure_table(client: Any) -> None:
    try:
        client.create_table(
            TableName=RACE_TABLE,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "ResourceInUseException":
            raise


def race(client: Any, n: int, key: str, *, hooks: ChangeHooks | None = None) -> RaceResult:
    """Fire ``n`` concurrent conditional puts of ``key``; ``client`` is a boto3 client bound
    to the engine whose ``hooks`` (when given) show the winning write."""
    ensure_table(client)
    existed = _read(client, key)
    attempts = [Attempt(i + 1, f"thread-{i + 1:02d}") for i in range(n)]
    gate = threading.Barrier(n + 1)
    lock = threading.Lock()
    sent_order = itertools.count(1)
    answer_order = itertools.count(1)
    released = [0]
    writes: list[Write] = []

    def wrote(
        _ctx: object,
        _writer: object,
        table: _Table,
        _old: Mapping[str, Any] | None,
        new: Mapping[str, Any] | None,
    ) -> None:
        # Inside the engine's write transaction: only note the time and the writer.
        at_us = (time.perf_counter_ns() - released[0]) / 1000
        if table.name == RACE_TABLE and new is not None and new.get("pk") == {"S": key}:
            writer = new.get("writer")
            name = writer.get("S") if isinstance(writer, Mapping) else None
            writes.append(Write(str(name), at_us))

    def fire(attempt: Attempt) -> None:
        item = _item(key, attempt.writer)
        gate.wait()
        with lock:
            attempt.sent = next(sent_order)
            attempt.sent_us = (time.perf_counter_ns() - released[0]) / 1000
        try:
            client.put_item(
                TableName=RACE_TABLE,
                Item=item,
                ConditionExpression=CONDITION,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            error = exc.response.get("Error", {})
            attempt.code = str(error.get("Code") or "ClientError")
            attempt.message = str(error.get("Message") or "")
            attempt.item = exc.response.get("Item")
        except Exception as exc:  # shown as that attempt's answer; the race goes on
            attempt.code, attempt.message = type(exc).__name__, str(exc)
        with lock:
            attempt.answered = next(answer_order)
            attempt.answered_us = (time.perf_counter_ns() - released[0]) / 1000

    threads = [
        threading.Thread(target=fire, args=(a,), name=f"race-{a.thread}", daemon=True)
        for a in attempts
    ]
    for thread in threads:
        thread.start()
    if hooks is not None:
        hooks.add_change_hook(wrote, watches=_watches_race_table)
    try:
        started = time.perf_counter()
        released[0] = time.perf_counter_ns()
        gate.wait()
        for thread in threads:
            thread.join()
        seconds = time.perf_counter() - started
    finally:
        if hooks is not None:
            hooks.remove_change_hook(wrote)
    attempts.sort(key=lambda a: a.answered)
    stored = _read(client, key)
    return RaceResult(key, n, existed, attempts, stored, seconds, tuple(writes))


def _watches_race_table(table: _Table) -> bool:
    return table.name == RACE_TABLE


def _read(client: Any, key: str) -> dict[str, Any] | None:
    response = client.get_item(TableName=RACE_TABLE, Key={"pk": {"S": key}}, ConsistentRead=True)
    item: dict[str, Any] | None = response.get("Item")
    return item


def _item(key: str, writer: str) -> dict[str, Any]:
    """The item the thread named ``writer`` puts."""
    return {"pk": {"S": key}, "writer": {"S": writer}}


def _answers(result: RaceResult) -> Answers[dict[str, Any]]:
    """The race's answers for the shared judgment; items are compared whole."""
    answers = Answers[dict[str, Any]](stored=result.stored, before=result.existed)
    for attempt in result.attempts:
        if attempt.won:
            answers.winners.append((_item(result.key, attempt.writer), None))  # no ALL_OLD asked
        elif attempt.code == "ConditionalCheckFailedException":
            answers.losers.append(attempt.item)
        else:
            answers.errors.append(attempt.code or "error")
    return answers


def _checklist(result: RaceResult, verdict: KeyVerdict[dict[str, Any]]) -> list[tuple[str, bool]]:
    """Four lines that all pass exactly when ``verdict.held``."""
    lost = sum(not a.won for a in result.attempts)
    if result.existed is not None:
        return [
            ("the key was already taken, so no attempt won", verdict.first is not None),
            (f"all {lost} attempts got ConditionalCheckFailedException", not verdict.errors),
            ("every attempt got the stored item back", verdict.losers_saw_first),
            ("the stored item is unchanged", verdict.stored_is_first),
        ]
    won = sum(a.won for a in result.attempts)
    return [
        (f"exactly one winner ({won})", verdict.first is not None),
        (f"the other {lost} got ConditionalCheckFailedException", not verdict.errors),
        ("every loser got the winner's item (ALL_OLD)", verdict.losers_saw_first),
        ("the stored item is the winner's", verdict.stored_is_first),
    ]
