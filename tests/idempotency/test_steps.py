"""The guard steps and their drivers (``firstwrite.idempotency.steps``): one decision, written
as a generator, run on a synchronous guard, on an asyncio one, and on a synchronous one from
asyncio (its calls in a worker thread, never on the event loop's thread)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from firstwrite.idempotency import (
    AsyncIdempotency,
    Claim,
    Idempotency,
    IdempotencyConfig,
    InProgressError,
    Replay,
)
from firstwrite.idempotency.aio import ThreadedClient
from firstwrite.idempotency.steps import (
    ClaimKey,
    CompleteClaim,
    ReadRecord,
    ReadReplays,
    ReleaseClaim,
    RenewClaim,
    Steps,
    adrive,
    drive,
)


class Recording:
    """A boto3 client that notes the thread of each call."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.meta = client.meta
        self.exceptions = client.exceptions
        self.threads: set[int] = set()

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self._client, name)

        def call(**kwargs: Any) -> Any:
            self.threads.add(threading.get_ident())
            return method(**kwargs)

        return call


@pytest.fixture
def client(tmp_path: Path) -> Iterator[Recording]:
    from firstwrite.engine import Engine, local_client

    engine = Engine(str(tmp_path / "steps.db"))
    yield Recording(local_client(engine))
    engine.close()


CONFIG = IdempotencyConfig(table_name="steps", in_progress_wait=0)


def charge(key: str, amount: int) -> Steps[tuple[str, object]]:
    """Claim, then store, release or answer the duplicate: every step's answer is used."""
    try:
        outcome = yield ClaimKey(key, {"amount": amount}, wait=0)
    except InProgressError:
        return "busy", None
    if isinstance(outcome, Replay):
        return "replayed", outcome.value()
    assert isinstance(outcome, Claim)
    claim = yield RenewClaim(outcome, 30)
    if amount <= 0:
        yield ReleaseClaim(claim, "nothing to charge")
        return "released", None
    replay = yield CompleteClaim(claim, {"charged": amount})
    record = yield ReadRecord(key)
    replays = yield ReadReplays(((key, {"amount": amount}),))
    assert record is not None and replays[0] is not None
    return "stored", replay.value()


def test_one_decision_on_a_synchronous_guard(client: Recording) -> None:
    guard = Idempotency(CONFIG, client=client)
    guard.ensure_table()
    assert drive(charge("a", 5), guard) == ("stored", {"charged": 5})
    assert drive(charge("a", 5), guard) == ("replayed", {"charged": 5})
    assert drive(charge("b", 0), guard) == ("released", None)
    assert isinstance(guard.claim("b", {"amount": 0}), Claim)  # released: free again
    # an error of a guard call is thrown into the decision, which answers it
    assert drive(charge("b", 0), guard) == ("busy", None)


def test_the_same_decision_awaited_and_from_a_thread(client: Recording) -> None:
    sync = Idempotency(CONFIG, client=client)
    sync.ensure_table()
    awaited = AsyncIdempotency(CONFIG, client=ThreadedClient(client))

    async def both() -> tuple[object, object, int]:
        first = await adrive(charge("c", 7), awaited)
        client.threads.clear()
        again = await adrive(charge("c", 7), sync)  # a synchronous guard from asyncio
        return first, again, threading.get_ident()

    first, again, loop_thread = asyncio.run(both())
    assert first == ("stored", {"charged": 7})
    assert again == ("replayed", {"charged": 7})
    assert client.threads and loop_thread not in client.threads  # never on the loop's thread


def test_other_effects_go_to_the_callers_function(client: Recording) -> None:
    guard = Idempotency(CONFIG, client=client)
    guard.ensure_table()

    def decision() -> Steps[object]:
        doubled = yield 21  # not a guard step: the caller's own effect
        try:
            yield "unknown"
        except TypeError as refused:
            return doubled, str(refused)
        return None

    def other(effect: Any) -> object:
        if effect == 21:
            return 42
        raise TypeError(f"no such effect: {effect!r}")

    assert drive(decision(), guard, other) == (42, "no such effect: 'unknown'")
    with pytest.raises(TypeError, match="not a guard step"):
        drive(decision(), guard)


def test_an_error_raised_after_a_thrown_one_does_not_chain_to_it(client: Recording) -> None:
    guard = Idempotency(CONFIG, client=client)
    guard.ensure_table()
    held = guard.claim("d", {"amount": 1})
    assert isinstance(held, Claim)

    def decision() -> Steps[None]:
        try:
            yield ClaimKey("d", {"amount": 1}, wait=0)
        except InProgressError:
            pass
        raise ValueError("decided after the busy claim")

    with pytest.raises(ValueError) as raised:
        drive(decision(), guard)
    assert raised.value.__context__ is None
