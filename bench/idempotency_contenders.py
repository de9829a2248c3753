"""The idempotency benchmark's contenders: a library in one scenario, and what bounds it.

:class:`Scenario` times a library (:mod:`.idempotency_libraries`) in one scenario; the others
take it apart: its calls alone, its calls plus the least work any layer adds, firstwrite's own
work with every call answered at once, and firstwrite with a clock around each call.
"""

from __future__ import annotations

import hashlib
import json
import statistics
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from ._calls import Replayed, calls_alone, replay
from ._common import Contender, Series
from .idempotency_libraries import FirstwriteLib, Library, Shared, make_order


class Scenario(Contender):
    """One library, one scenario; counts calls and requests during timed slices only."""

    def __init__(self, shared: Shared, factory: Callable[[Shared], Library], scenario: str):
        self.shared = shared
        self.factory = factory
        self.scenario = scenario
        self.lib: Library | None = None
        self.name = getattr(factory, "name", "?")
        self.requests = 0
        self.calls = 0
        self._mark = 0
        self._thread: threading.Thread | None = None
        self._prefix = uuid.uuid4().hex[:8]
        self._expected: Any = None

    def setup(self) -> None:
        lib = self.lib = self.factory(self.shared)
        if self.scenario == "duplicate":
            self._expected = lib.call(make_order(f"{self._prefix}-dup"))
        elif self.scenario == "in progress":
            order = make_order(f"{self._prefix}-busy", block=True)
            self._thread = threading.Thread(target=lib.call, args=(order,), daemon=True)
            self._thread.start()
            if not lib.entered.wait(30):
                raise RuntimeError("the in-progress call never started its body")

    def resume(self) -> None:
        self._mark = self.shared.counter.on(self._tables())

    def pause(self) -> None:
        self.calls += self.shared.counter.on(self._tables()) - self._mark

    def _tables(self) -> tuple[str, ...]:
        return self.lib.tables if self.lib is not None else ()

    def op(self, i: int) -> None:
        lib = self.lib
        assert lib is not None
        self.requests += 1
        if self.scenario == "first call":
            order = make_order(f"{self._prefix}-{i}")
            result = lib.call(order)
            if result.get("order_id") != order["order_id"]:
                raise AssertionError(f"{self.name} returned {result!r}")
        elif self.scenario == "duplicate":
            result = lib.call(make_order(f"{self._prefix}-dup"))
            if result != self._expected:
                raise AssertionError(f"{self.name} replayed {result!r}, not {self._expected!r}")
        else:
            try:
                lib.call(make_order(f"{self._prefix}-busy", block=True))
            except lib.in_progress:
                return
            raise AssertionError(f"{self.name} ran a request whose twin is in progress")

    def teardown(self) -> None:
        if self.lib is not None:
            self.lib.release.set()
        if self._thread is not None:
            self._thread.join(30)

    @property
    def calls_per_request(self) -> float:
        return self.calls / self.requests if self.requests else float("nan")


class CallsAlone(Scenario):
    """A library's DynamoDB calls for one scenario, replayed on the same client with none of the
    library's own code around them: what a library making exactly those calls would cost if all
    its own work were free. The calls are recorded from one real request of the library; where
    the scenario needs a new key per request (*first call*), each replay gets a fresh key value.
    A replay must end as the recorded call did (written, or its condition failed)."""

    def __init__(self, shared: Shared, factory: Callable[[Shared], Library], scenario: str):
        super().__init__(shared, factory, scenario)
        self.name = calls_alone(self.name)
        self._calls: list[Replayed] = []
        self._ccf: type[BaseException] = Exception

    def setup(self) -> None:
        super().setup()
        client = self.shared.client
        self._ccf = client.exceptions.ConditionalCheckFailedException
        recorded = self.shared.record(lambda: Scenario.op(self, -1))
        self.requests = 0
        if not recorded:
            raise RuntimeError(f"{self.name}: the library made no DynamoDB call")
        self._calls = self.shared.replayable(recorded, fresh=self.scenario == "first call")

    def op(self, i: int) -> None:
        self.requests += 1
        replay(self._calls, i, self._ccf, self.name)


def least_work(name: str) -> str:
    return f"{name}'s calls + least work"


_canonical = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode


class LeastWork(CallsAlone):
    """A library's recorded calls (as :class:`CallsAlone`) plus the least Python any layer
    validating the payload must add to them, with nothing else: the payload's fingerprint
    (SHA-256 of its canonical JSON), the function called once (*first call*), its result
    encoded as JSON (*first call*) or the stored JSON decoded (*duplicate*), an "in progress"
    error raised and caught (*in progress*). No key building, owner token, record decoding,
    logging or retry policy. The bound of the time target: a layer making these calls cannot
    be faster than this, so where it misses 0.8x the target is out of reach on that client."""

    def __init__(self, shared: Shared, factory: Callable[[Shared], Library], scenario: str):
        super().__init__(shared, factory, scenario)
        self.name = least_work(getattr(factory, "name", "?"))
        self._stored = ""

    def setup(self) -> None:
        super().setup()
        self._stored = _canonical(self._expected)

    def op(self, i: int) -> None:
        lib = self.lib
        assert lib is not None
        self.requests += 1
        scenario = self.scenario
        if scenario == "first call":
            order = make_order(f"{self._prefix}-{i}")
        elif scenario == "duplicate":
            order = make_order(f"{self._prefix}-dup")
        else:
            order = make_order(f"{self._prefix}-busy", block=True)
        hashlib.sha256(_canonical({"order": order}).encode()).hexdigest()
        replay(self._calls, i, self._ccf, self.name)
        if scenario == "first call":
            _canonical(lib.body(order))
        elif scenario == "duplicate":
            json.loads(self._stored)
        else:
            try:
                raise _Busy(order["order_id"])
            except _Busy:
                pass


class _Busy(Exception):
    """The least "in progress" answer: an exception raised and caught."""


def own_work_alone(name: str) -> str:
    return f"{name}'s own work alone"


class OwnWorkAlone(Scenario):
    """firstwrite with every DynamoDB call answered at once: each operation gets the answer
    (response or error) it got in one real request of the scenario, with no client, engine or
    botocore behind it. What firstwrite's own Python costs per request by itself; beside its
    calls alone it shows how much of the time is the layer's work, and how much that work
    slows down when it runs between botocore's calls (caches)."""

    def __init__(self, shared: Shared, factory: Callable[[Shared], Library], scenario: str):
        super().__init__(shared, factory, scenario)
        self.name = own_work_alone(self.name)

    def setup(self) -> None:
        super().setup()
        lib = self.lib
        assert isinstance(lib, FirstwriteLib)
        guard = lib.guard
        # the guard's operation -> client method (kept for teardown: the in-progress
        # scenario's blocked request completes through the real client)
        self._real = real = dict(guard._methods)
        answers: dict[str, Any] = {}

        def recording(operation: str, method: Any) -> Callable[..., Any]:
            def call(**params: Any) -> Any:
                try:
                    answers[operation] = response = method(**params)
                except Exception as exc:
                    answers[operation] = exc
                    raise
                return response

            return call

        guard._methods = {op: recording(op, m) for op, m in real.items()}
        try:
            Scenario.op(self, -1)
        finally:
            guard._methods = real
        self.requests = 0
        if not answers:
            raise RuntimeError(f"{self.name}: the library made no DynamoDB call")
        guard._methods = {op: _answering(answers[op]) for op in answers}

    def teardown(self) -> None:
        if isinstance(self.lib, FirstwriteLib) and hasattr(self, "_real"):
            self.lib.guard._methods = self._real
        super().teardown()


def _answering(answer: Any) -> Callable[..., Any]:
    """A client method that answers ``answer`` at once (raises it if it is an error)."""
    if isinstance(answer, BaseException):

        def fail(**_params: Any) -> Any:
            raise answer.with_traceback(None)  # no traceback piling up across requests

        return fail
    return lambda **_params: answer


def calls_timed(name: str) -> str:
    return f"{name}, its calls timed"


class CallsTimed(Scenario):
    """firstwrite on the real client with a clock around each of its DynamoDB calls: splits
    its own time beside the calls into the time its code runs between them and what its calls
    cost inside it, each against the same thing measured alone (own work alone, calls alone).
    Both run slower side by side than alone: the client's calls (botocore, the engine, SQLite)
    evict the layer's code and data from the CPU caches, and the layer evicts theirs. The two
    clock reads per call (~0.1 µs) count as the layer's time."""

    def __init__(self, shared: Shared, factory: Callable[[Shared], Library], scenario: str):
        super().__init__(shared, factory, scenario)
        self.name = calls_timed(self.name)
        self.inside_ns = 0
        self._slice = (0, 0)
        # (requests, ns inside the client's calls) per timed slice
        self.slices: list[tuple[int, int]] = []

    def setup(self) -> None:
        super().setup()
        lib = self.lib
        assert isinstance(lib, FirstwriteLib)
        guard = lib.guard
        self._real = real = dict(guard._methods)
        clock = time.perf_counter_ns

        def timed(method: Callable[..., Any]) -> Callable[..., Any]:
            def call(**params: Any) -> Any:
                start = clock()
                try:
                    return method(**params)
                finally:
                    self.inside_ns += clock() - start

            return call

        guard._methods = {op: timed(m) for op, m in real.items()}

    def resume(self) -> None:
        super().resume()
        self._slice = (self.requests, self.inside_ns)

    def pause(self) -> None:
        super().pause()
        requests, inside = self._slice
        self.slices.append((self.requests - requests, self.inside_ns - inside))

    def teardown(self) -> None:
        if isinstance(self.lib, FirstwriteLib) and hasattr(self, "_real"):
            self.lib.guard._methods = self._real
        super().teardown()

    def split(self, series: Series) -> tuple[float, float] | None:
        """(median µs per request of its code between its calls, of its calls), over the timed
        slices (the warm-up's excluded), from ``series`` (this contender's, in µs/request)."""
        slices = self.slices[-len(series.values) :] if series.values else []
        if not slices or any(n == 0 for n, _ in slices):
            return None
        inside = [ns / n / 1000 for n, ns in slices]
        outside = [wall - calls for wall, calls in zip(series.values, inside, strict=True)]
        return statistics.median(outside), statistics.median(inside)
