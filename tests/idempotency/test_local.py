"""No configuration at all: a local engine database file, so a first call needs no AWS."""

from __future__ import annotations

from pathlib import Path

import pytest

from firstwrite import AsyncIdempotency, Idempotency, idempotent
from firstwrite.idempotency import local


@pytest.fixture
def local_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "nested" / "local.db"
    monkeypatch.setenv(local.ENV_VAR, str(path))
    return path


def test_first_call_needs_nothing(local_db: Path) -> None:
    runs: list[int] = []
    guard = Idempotency()
    assert guard.run("hello", lambda: runs.append(1) or "world") == "world"
    assert Idempotency().run("hello", lambda: "again") == "world"  # same file, same answer
    assert runs == [1] and local_db.exists()


def test_decorator_without_a_guard(local_db: Path) -> None:
    @idempotent(key_arg="k")
    def f(k: str) -> str:
        return k.upper()

    assert f("a") == "A" and f("a") == "A"


@pytest.mark.asyncio
async def test_async_without_a_client(local_db: Path) -> None:
    guard = AsyncIdempotency()

    async def work() -> int:
        return 7

    assert await guard.run("async-hello", work) == 7
    assert await guard.run("async-hello", work) == 7


def test_a_guard_on_the_default_client_reads_leases_on_the_local_engines_clock(
    local_db: Path,
) -> None:
    # The local engine's clock is DynamoDB's (its answers are dated from it): a guard without
    # a client of its own is on it, so a moved engine clock is no skew, and a lease is over
    # when it is over on that clock.
    from firstwrite.idempotency import Claim, IdempotencyConfig, InProgressError

    config = IdempotencyConfig(lease=30)
    owner = Idempotency(config)
    engine = local._engines[str(local_db)]
    engine.clock.freeze(engine.clock.now() + 86_400)  # a day ahead of the wall clock
    assert isinstance(owner.claim("local-lease", payload=1), Claim)
    estimate = owner.clock_estimate()
    assert estimate is not None and abs(estimate.offset) + estimate.uncertainty <= 1.0
    contender = Idempotency(config)
    with pytest.raises(InProgressError):
        contender.claim("local-lease", payload=1, wait=0)
    engine.clock.advance(32)
    taken = contender.claim("local-lease", payload=1, wait=0)
    assert isinstance(taken, Claim) and taken.taken_over
    engine.clock.reset()
