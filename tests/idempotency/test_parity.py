"""The same scenarios through the synchronous and the asyncio guard: the same answers, and the
same records, metrics and log records, compared field by field.

Each scenario runs twice, on two fresh engines whose clocks are frozen at the same instant: once
through :class:`Idempotency` over a boto3 client bound to the engine, once through
:class:`AsyncIdempotency` over the same kind of client driven from worker threads. Owner tokens
are random, so they are renamed in order of appearance before the comparison.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from botocore.config import Config

from firstwrite.engine.api import Engine
from firstwrite.engine.binding.sync import local_client
from firstwrite.idempotency import (
    AsyncIdempotency,
    BusinessConditionFailedError,
    Claim,
    Idempotency,
    IdempotencyConfig,
    InProgressError,
    LostClaimError,
    MemoryMetrics,
    PayloadMismatchError,
    Replay,
    ReplayedFailureError,
    RetryPolicy,
)
from firstwrite.idempotency.aio import ThreadedClient

TABLE = "parity"
T0 = 1_800_000_000.0  # both engines' frozen clocks start here


class Declined(Exception):
    idempotency_retryable = False


class Harness:
    """One guard (sync or async) on its own engine, behind one awaitable interface."""

    def __init__(self, tmp: Path, kind: str) -> None:
        self.kind = kind
        self.engine = Engine(tmp / f"{kind}.db")
        self.engine.clock.freeze(T0)
        # One attempt per call in botocore: every retry is the layer's own, and deterministic.
        self.client = local_client(
            self.engine, region="us-east-1", config=Config(retries={"total_max_attempts": 1})
        )
        self.metrics = MemoryMetrics()
        config = IdempotencyConfig(
            table_name=TABLE,
            retry=RetryPolicy(max_attempts=4, base=0.02, cap=0.1),
            return_consumed_capacity=True,
            in_progress_wait=0,  # "in progress" at once: the polls' count would follow real time
        )
        kwargs: dict[str, Any] = {
            "clock": self.engine.clock.now,
            "metrics": self.metrics,
            "non_retryable": (Declined,),
            "rng": lambda: 0.5,
        }
        self.guard: Idempotency | AsyncIdempotency
        if kind == "sync":
            self.guard = Idempotency(config, client=self.client, sleep=lambda s: None, **kwargs)
        else:

            async def no_sleep(seconds: float) -> None:
                return None

            self.guard = AsyncIdempotency(
                config, client=ThreadedClient(self.client), sleep=no_sleep, **kwargs
            )
        self.effects: list[str] = []

    async def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        result = getattr(self.guard, name)(*args, **kwargs)
        return await result if self.kind == "async" else result

    async def ensure_table(self) -> bool:
        return bool(await self._call("ensure_table"))

    async def claim(self, *args: Any, **kwargs: Any) -> Any:
        return await self._call("claim", *args, **kwargs)

    async def complete(self, *args: Any, **kwargs: Any) -> Any:
        return await self._call("complete", *args, **kwargs)

    async def fail(self, *args: Any, **kwargs: Any) -> Any:
        return await self._call("fail", *args, **kwargs)

    async def renew(self, *args: Any, **kwargs: Any) -> Any:
        return await self._call("renew", *args, **kwargs)

    async def claim_with(self, *args: Any, **kwargs: Any) -> Any:
        return await self._call("claim_with", *args, **kwargs)

    async def complete_with(self, *args: Any, **kwargs: Any) -> Any:
        return await self._call("complete_with", *args, **kwargs)

    async def get(self, *args: Any, **kwargs: Any) -> Any:
        return await self._call("get", *args, **kwargs)

    async def run(self, key: str, work: Callable[[], Any], *args: Any, **kwargs: Any) -> Any:
        """``guard.run`` with ``work`` (a plain function) as the side effect, recorded."""

        def effect() -> Any:
            self.effects.append(key)
            return work()

        if self.kind == "sync":
            return self.guard.run(key, effect, *args, **kwargs)

        async def coroutine() -> Any:
            return effect()

        return await self.guard.run(key, coroutine, *args, **kwargs)  # type: ignore[arg-type]

    def close(self) -> None:
        self.engine.close()


def _raise(exc: BaseException) -> Callable[[], Any]:
    def work() -> Any:
        raise exc

    return work


def order(n: str) -> dict[str, Any]:
    return {
        "Put": {
            "TableName": TABLE,
            "Item": {"pk": {"S": f"ORDER#{n}"}, "state": {"S": "new"}},
            "ConditionExpression": "attribute_not_exists(pk)",
        }
    }


# -- the scenarios: each asserts its answers, identically for both guards ---------------------------


async def first_call(h: Harness) -> None:
    assert await h.run("first", lambda: {"charged": 10}, {"amount": 10}) == {"charged": 10}


async def duplicate(h: Harness) -> None:
    assert await h.run("dup", lambda: {"n": 1}, {"a": 1}) == {"n": 1}
    assert await h.run("dup", lambda: {"n": 2}, {"a": 1}) == {"n": 1}
    replay = await h.claim("dup", {"a": 1})
    assert isinstance(replay, Replay) and replay.value() == {"n": 1}
    assert h.effects == ["dup"]


async def in_progress(h: Harness) -> None:
    claim = await h.claim("busy", {"a": 1}, lease=30)
    assert isinstance(claim, Claim)
    with pytest.raises(InProgressError) as info:
        await h.claim("busy", {"a": 1})
    assert info.value.retry_after == 1.0  # the clock is frozen: the default policy's second
    # Written from the latest DynamoDB time the answers' Date (whole seconds) allows, T0 + 1,
    # and compared with the earliest, T0.
    assert info.value.lease_remaining == 31.0
    await h.complete(claim, "done")
    assert await h.run("busy", lambda: "again", {"a": 1}) == "done"


async def mismatch(h: Harness) -> None:
    await h.run("mm", lambda: 1, {"amount": 5})
    with pytest.raises(PayloadMismatchError):
        await h.run("mm", lambda: 2, {"amount": 6})
    live = await h.claim("mm-live", {"amount": 5})
    assert isinstance(live, Claim)
    with pytest.raises(PayloadMismatchError):
        await h.claim("mm-live", {"amount": 6})


async def fencing(h: Harness) -> None:
    stale = await h.claim("fence", {"n": 1}, lease=5)
    assert isinstance(stale, Claim)
    h.engine.clock.advance(7)  # the lease (5 s), from T0 + 1 (the Date's second), is over
    fresh = await h.claim("fence", {"n": 1})
    assert isinstance(fresh, Claim) and fresh.taken_over
    with pytest.raises(LostClaimError):
        await h.complete(stale, "stale")
    with pytest.raises(LostClaimError):
        await h.renew(stale)
    renewed = await h.renew(fresh)
    assert renewed.version == 2
    await h.complete(renewed, "fresh")
    assert await h.run("fence", lambda: "again", {"n": 1}) == "fresh"


async def failed_retryable(h: Harness) -> None:
    with pytest.raises(TimeoutError):
        await h.run("retry", _raise(TimeoutError("upstream")), {"a": 1})
    record = await h.get("retry")
    assert record is not None and record.retryable
    assert await h.run("retry", lambda: "ok", {"a": 1}) == "ok"
    assert h.effects == ["retry", "retry"]


async def failed_final(h: Harness) -> None:
    with pytest.raises(Declined):
        await h.run("final", _raise(Declined("card declined")), {"a": 1})
    with pytest.raises(ReplayedFailureError) as info:
        await h.run("final", lambda: "never", {"a": 1})
    assert (info.value.error_type, info.value.message) == ("Declined", "card declined")
    assert h.effects == ["final"]


async def transactional(h: Harness) -> None:
    claim = await h.claim_with("tx", [order("1")], {"order": 1})
    assert isinstance(claim, Claim)
    await h.complete(claim, {"order": 1})
    replay = await h.claim_with("tx", [order("1")], {"order": 1})
    assert isinstance(replay, Replay) and replay.value() == {"order": 1}
    with pytest.raises(BusinessConditionFailedError):
        await h.claim_with("tx-2", [order("1")])  # ORDER#1 exists: the business condition fails
    assert await h.get("tx-2") is None
    second = await h.claim("tx-3")
    assert isinstance(second, Claim)
    await h.complete_with(second, [order("3")], "three")


async def throttling(h: Harness) -> None:
    h.engine.faults.throttle(operation="PutItem", table=TABLE, count=2)
    h.engine.faults.error("InternalServerError", operation="UpdateItem", table=TABLE, count=1)
    assert await h.run("throttled", lambda: "ok") == "ok"
    h.engine.faults.throttle(operation="GetItem", table=TABLE, count=10)
    with pytest.raises(Exception, match="ProvisionedThroughputExceeded"):
        await h.get("throttled")
    # The work fails and recording its failure fails too: logged, and the work's error raised.
    h.engine.faults.throttle(operation="UpdateItem", table=TABLE, count=10)
    with pytest.raises(TimeoutError):
        await h.run("unrecorded", _raise(TimeoutError("upstream")))


async def completion_retried(h: Harness) -> None:
    """The completion outlasts the retry policy's four attempts: retried again, not lost."""
    h.engine.faults.error("InternalServerError", operation="UpdateItem", table=TABLE, count=6)
    assert await h.run("persisted", lambda: {"n": 1}) == {"n": 1}
    h.engine.clock.advance(61)
    assert await h.run("persisted", lambda: {"n": 2}) == {"n": 1}
    assert h.effects == ["persisted"]


SCENARIOS: dict[str, Callable[[Harness], Awaitable[None]]] = {
    f.__name__: f
    for f in (
        first_call,
        duplicate,
        in_progress,
        mismatch,
        fencing,
        failed_retryable,
        failed_final,
        transactional,
        throttling,
        completion_retried,
    )
}


# -- what is compared --------------------------------------------------------------------------


_TOKEN = re.compile(r"[0-9a-f]{32}")


class _Renamer:
    """Renames owner tokens T1, T2... in order of appearance."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def __call__(self, text: str) -> str:
        return _TOKEN.sub(
            lambda m: self.names.setdefault(m.group(0), f"T{len(self.names) + 1}"), text
        )


_EXTRAS = ("idempotency_key", "record_id", "operation", "dynamo_error_code", "retryable")


def observe(h: Harness, records: list[logging.LogRecord]) -> dict[str, Any]:
    rename = _Renamer()
    items = h.client.scan(TableName=TABLE, ConsistentRead=True)["Items"]
    stored = sorted(rename(repr(sorted(item.items()))) for item in items)
    logs = [
        (
            r.name,
            r.levelname,
            rename(r.getMessage()),
            {k: rename(str(getattr(r, k))) for k in _EXTRAS if hasattr(r, k)},
        )
        for r in records
        if r.name.startswith("firstwrite.idempotency")
    ]
    counts = {f"{name}{dict(labels)}": value for (name, labels), value in h.metrics.counts.items()}
    observed = {name: len(values) for name, values in h.metrics.observations.items()}
    return {
        "records": stored,
        "logs": logs,
        "counts": counts,
        "observed": observed,
        "effects": h.effects,
    }


@pytest.mark.asyncio
@pytest.mark.parametrize("scenario", list(SCENARIOS))
async def test_sync_and_async_guards_behave_identically(
    scenario: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    seen: dict[str, dict[str, Any]] = {}
    caplog.set_level(logging.DEBUG, logger="firstwrite")
    for kind in ("sync", "async"):
        h = Harness(tmp_path, kind)
        try:
            await h.ensure_table()
            caplog.clear()
            await SCENARIOS[scenario](h)
            seen[kind] = observe(h, list(caplog.records))
        finally:
            h.close()
    assert seen["sync"]["records"]  # the scenario stored something
    assert seen["sync"]["counts"]  # and was counted
    assert seen["async"] == seen["sync"]


@pytest.mark.asyncio
async def test_the_comparison_sees_a_difference(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Guard against a comparison that passes because it compares nothing: two runs that
    differ by one log record and one stored record are told apart."""
    caplog.set_level(logging.DEBUG, logger="firstwrite")
    h = Harness(tmp_path, "sync")
    try:
        await h.ensure_table()
        caplog.clear()
        await first_call(h)
        before = observe(h, list(caplog.records))
        logging.getLogger("firstwrite.idempotency").warning("something else")
        await h.run("another", lambda: 1)
        after = observe(h, list(caplog.records))
    finally:
        h.close()
    assert before["logs"] != after["logs"] and before["records"] != after["records"]
    assert before["counts"] != after["counts"]
