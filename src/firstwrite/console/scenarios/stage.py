"""The stage a scenario runs on: a scratch engine, recorded clients, steps, checks, a verdict.

Every scenario gets an engine of its own (in memory, closed afterwards). Moving its clock a day
ahead or throttling every write can then never touch your tables or another client of the
served engine. The stage is set with that engine's own APIs, the ones the admin API under
``/_firstwrite/`` drives (``engine.clock``, ``engine.faults``, ``engine.ttl``,
``engine.replication``), and the requests are real: boto3 clients bound in process
(:func:`firstwrite.engine.local_client`) driven by the idempotency layer's public API.

Every DynamoDB call those clients make is recorded from botocore's own ``before-call`` and
``after-call`` events: the JSON body sent and the status and body answered, exactly as on the
wire. botocore's retries are off (one attempt per call), so each retry the layer makes is a
call of its own on the page.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

from botocore.config import Config

from firstwrite.engine import Engine, local_client
from firstwrite.engine.features.ttl import TTLConfig
from firstwrite.idempotency import (
    Idempotency,
    IdempotencyConfig,
    MemoryMetrics,
    Metrics,
    MultiMetrics,
    Record,
    record_view,
    sdk_settings,
)

from ..records import key_text, pretty, relative, wire_json

# One attempt a call, and timeouts within the guards' budget, as the layer builds its own
# clients (idempotency/clients.py): no call needs the budget's pool of abandonable attempts.
ONE_ATTEMPT = Config(**sdk_settings(IdempotencyConfig().budget))
_CONTEXT_KEY = "firstwrite.console.call"
# The layer's loggers. What they log while a scenario runs belongs on its page, not in the
# server's log: a throttling scenario alone logs a hundred warnings on purpose.
LAYER_LOGGERS = (
    "firstwrite.idempotency",
    "firstwrite.idempotency.audit",
    "firstwrite.events",
    "firstwrite.events.global_tables",
)
_running = threading.local()  # .stage: the stage this thread is working for


class _ToTheStage(logging.Filter):
    """Sends a record logged by a thread working for a stage to that stage instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        stage: Stage | None = getattr(_running, "stage", None)
        if stage is None:
            return True
        stage.logged(record)
        return False


_FILTER = _ToTheStage()
for _name in LAYER_LOGGERS:
    if _FILTER not in logging.getLogger(_name).filters:
        logging.getLogger(_name).addFilter(_FILTER)


@dataclass(slots=True)
class Exchange:
    """One DynamoDB call: the request as sent and the answer as received."""

    actor: str
    operation: str
    at: float
    request: Any
    status: int
    response: Any
    region: str = ""  # the region of the client that made it
    kind: Literal["exchange"] = "exchange"

    @property
    def code(self) -> str | None:
        """The error code (``__type`` after ``#``), or ``None`` for a success."""
        if self.status == 200 or not isinstance(self.response, Mapping):
            return None
        return str(self.response.get("__type", "")).rpartition("#")[2] or f"HTTP {self.status}"

    @property
    def summary(self) -> str:
        """The answer in a few words: status, error and what came back with it."""
        body = self.response if isinstance(self.response, Mapping) else {}
        if self.code is None:
            extra = ""
            if "Attributes" in body:
                extra = ": the previous item came back (ReturnValues=ALL_OLD)"
            elif "Item" in body:
                extra = ": item found"
            elif self.operation == "GetItem":
                extra = ": no item"
            return f"{self.status} OK{extra}"
        text = f"{self.status} {self.code}"
        if self.code == "ConditionalCheckFailedException" and "Item" in body:
            text += ": the stored item came back (ReturnValuesOnConditionCheckFailure=ALL_OLD)"
        elif self.code == "TransactionCanceledException":
            reasons = body.get("CancellationReasons") or []
            codes = ", ".join(str(r.get("Code")) for r in reasons if isinstance(r, Mapping))
            text += f": reasons [{codes}]"
        elif "throttlingReasons" in body or "ThrottlingReasons" in body:
            reasons = body.get("throttlingReasons") or body.get("ThrottlingReasons") or []
            named = ", ".join(str(r.get("reason")) for r in reasons if isinstance(r, Mapping))
            text += f": {named}"
        return text

    @property
    def request_json(self) -> str:
        return pretty(self.request)

    @property
    def response_json(self) -> str:
        return pretty(self.response)


@dataclass(slots=True)
class Note:
    """Something that is not a DynamoDB call: setting the stage, an outcome, a backoff sleep,
    a line the layer logged."""

    kind: Literal["stage", "outcome", "sleep", "log"]
    text: str
    actor: str = ""
    code: str = ""  # the engine API call (and its admin API twin) that set the stage
    at: float = 0.0
    seconds: float = 0.0  # a sleep's length


Event = Exchange | Note


@dataclass(slots=True)
class Snapshot:
    """A watched item after a step: decoded when it is a record, else shown as it is."""

    label: str
    key: str
    region: str
    record: record_view.RecordView | None
    item: Mapping[str, Any] | None
    table: str = ""

    @property
    def item_json(self) -> str:
        return "" if self.item is None else wire_json(self.item)


@dataclass(slots=True)
class Step:
    title: str
    narrative: str
    events: list[Event] = field(default_factory=list)
    snapshots: list[Snapshot] = field(default_factory=list)
    at: float = 0.0


@dataclass(frozen=True, slots=True)
class Check:
    text: str
    passed: bool
    step: int | None = None  # the index of the step whose events prove it, when one does


@dataclass(frozen=True, slots=True)
class MetricLine:
    name: str
    labels: str
    value: float


@dataclass(slots=True)
class Outcome:
    """What a scenario run produced: the steps, the checks, the verdict, the metrics."""

    slug: str
    title: str
    t0: float
    steps: list[Step]
    checks: list[Check]
    verdict: str
    metrics: list[MetricLine]
    seconds: float
    error: str | None = None

    @property
    def held(self) -> bool:
        return self.error is None and bool(self.checks) and all(c.passed for c in self.checks)

    def when(self, at: float) -> str:
        return relative(at, self.t0)

    def summary(self) -> dict[str, Any]:
        """The machine-readable part (the page shows the rest)."""
        return {
            "scenario": self.slug,
            "held": self.held,
            "verdict": self.verdict,
            "error": self.error,
            "checks": [{"text": c.text, "passed": c.passed} for c in self.checks],
            "steps": len(self.steps),
            "calls": sum(isinstance(e, Exchange) for s in self.steps for e in s.events),
            "metrics": [
                {"name": m.name, "labels": m.labels, "value": m.value} for m in self.metrics
            ],
            "seconds": round(self.seconds, 3),
        }


class Stage:
    """A scratch engine with recorded clients, and the log of one scenario run."""

    def __init__(
        self,
        slug: str,
        shared: Metrics | None = None,
        *,
        ttl: TTLConfig | None = None,
        frozen: bool = True,
    ) -> None:
        self.slug = slug
        self.engine = Engine(None, ttl_config=ttl or TTLConfig(sweep_interval=None))
        # Whole seconds, so that "t0 + 31 s" reads exactly (records keep epoch seconds).
        self.t0 = float(int(time.time()))
        if frozen:
            self.engine.clock.freeze(self.t0)
        else:
            self.engine.clock.set(self.t0)
        self.metrics = MemoryMetrics()  # this run's metrics (the page shows them)
        self.sink: Metrics = MultiMetrics([self.metrics, *([shared] if shared else [])])
        self.steps: list[Step] = []
        self.checks: list[Check] = []
        self.verdict = ""
        self._lock = threading.Lock()
        self._local = threading.local()
        self._watches: list[Callable[[], Snapshot]] = []
        self._observers: dict[tuple[str, IdempotencyConfig], Idempotency] = {}

    # -- clients and guards --------------------------------------------------------------------

    def client(self, region: str = "us-east-1", *, service: str = "dynamodb") -> Any:
        """A boto3 client bound to the scratch engine whose calls are recorded."""
        client = local_client(self.engine, region=region, service_name=service, config=ONE_ATTEMPT)
        events = client.meta.events
        events.register("before-call", partial(self._before_call, region=region))
        events.register("after-call", self._after_call)
        return client

    def guard(
        self,
        config: IdempotencyConfig,
        *,
        client: Any = None,
        region: str = "us-east-1",
        skew: float = 0.0,
        **kwargs: Any,
    ) -> Idempotency:
        """A guard on the scratch engine: its clock (``skew`` seconds ahead of it, behind when
        negative: a worker whose host clock is off DynamoDB's), a recorded client, the shared
        metrics; backoff sleeps are recorded (and really slept)."""
        kwargs.setdefault("sleep", self.sleep)
        clock = self.engine.clock.now
        if skew:
            clock = self.engine.clock.skewed(skew)
            self.note(
                f"{self._actor() or 'a worker'}: its clock runs {abs(skew):g} s "
                f"{'ahead of' if skew > 0 else 'behind'} DynamoDB's (the engine's)",
                kind="stage",
                code=f"clock=engine.clock.skewed({skew:g})",
            )
        return Idempotency(
            config,
            client=client if client is not None else self.client(region),
            clock=clock,
            metrics=self.sink,
            **kwargs,
        )

    def now(self) -> float:
        return self.engine.clock.now()

    # -- recording -----------------------------------------------------------------------------

    @contextmanager
    def step(self, title: str, narrative: str) -> Iterator[Step]:
        step = Step(title, narrative)
        with self._lock:
            self.steps.append(step)
        try:
            yield step
        finally:
            step.at = self.now()
            step.snapshots = self.snapshots()

    @contextmanager
    def actor(self, name: str) -> Iterator[None]:
        """Label the calls this thread makes inside the block (``worker A``, ``eu-west-1``);
        what the layer logs meanwhile goes to this stage."""
        previous = getattr(self._local, "actor", "")
        self._local.actor = name
        try:
            with self.working():
                yield
        finally:
            self._local.actor = previous

    @contextmanager
    def working(self) -> Iterator[None]:
        """This thread works for the stage: the layer's log records go to its page."""
        previous = getattr(_running, "stage", None)
        _running.stage = self
        try:
            yield
        finally:
            _running.stage = previous

    def logged(self, record: logging.LogRecord) -> None:
        text = f"the layer logged {record.levelname}: {record.getMessage()}"
        self._add(Note("log", text, self._actor(), record.name, self.now()))

    def _actor(self) -> str:
        return str(getattr(self._local, "actor", ""))

    def _add(self, event: Event) -> None:
        with self._lock:
            if not self.steps:
                self.steps.append(Step("Setting the stage", ""))
            self.steps[-1].events.append(event)

    def note(
        self, text: str, *, kind: Literal["stage", "outcome"] = "outcome", code: str = ""
    ) -> None:
        self._add(Note(kind, text, self._actor(), code, self.now()))

    def sleep(self, seconds: float) -> None:
        """The guards' sleep: recorded, then slept (wall clock; the backoff is real)."""
        self._add(
            Note(
                "sleep", f"backoff {seconds * 1000:.1f} ms", self._actor(), "", self.now(), seconds
            )
        )
        time.sleep(seconds)

    def advance(self, seconds: float, why: str) -> float:
        """Move the scratch engine's clock (and say how the admin API would do it)."""
        now = self.engine.clock.advance(seconds)
        self.note(
            f"{why}: the engine clock moves {seconds:+g} s, to {relative(now, self.t0)}",
            kind="stage",
            code=f'engine.clock.advance({seconds:g})  ·  POST /_firstwrite/clock {{"advance": {seconds:g}}}',
        )
        return now

    def _before_call(
        self,
        model: Any,
        params: Mapping[str, Any],
        context: dict[str, Any],
        region: str = "",
        **_: Any,
    ) -> None:
        body = params.get("body") or b"{}"
        context[_CONTEXT_KEY] = (self._actor(), model.name, _parse(body), self.now(), region)

    def _after_call(
        self, model: Any, http_response: Any, context: dict[str, Any], **_: Any
    ) -> None:
        started = context.pop(_CONTEXT_KEY, None)
        if started is None:
            return
        actor, operation, request, at, region = started
        status = int(getattr(http_response, "status_code", 0) or 0)
        content = getattr(http_response, "content", b"") or b"{}"
        self._add(Exchange(actor, operation, at, request, status, _parse(content), region))

    # -- the records a scenario watches ----------------------------------------------------------

    def watch(
        self, label: str, table: str, key: Mapping[str, Any], region: str = "us-east-1"
    ) -> None:
        """Show this item after every step (a consistent GetItem, not recorded as a call)."""
        names, key = list(key), dict(key)

        def shoot() -> Snapshot:
            item = self.read(table, key, region)
            record = None if item is None else record_view.decode(item)
            return Snapshot(label, key_text(key, names), region, record, item, table)

        self._watches.append(shoot)

    def watch_record(
        self, label: str, config: IdempotencyConfig, key: str, region: str = "us-east-1"
    ) -> None:
        """Show the record of idempotency key ``key`` after every step, read with the layer's
        own :meth:`Idempotency.get` on an unrecorded client."""

        def shoot() -> Snapshot:
            record = self.record(config, key, region)
            view = None if record is None else record_view.view(record)
            return Snapshot(label, key, region, view, None, config.table_name)

        self._watches.append(shoot)

    def record(
        self, config: IdempotencyConfig, key: str, region: str = "us-east-1"
    ) -> Record | None:
        """The stored record of ``key`` (:meth:`Idempotency.get`, an unrecorded client)."""
        return self._observer(config, region).get(key)

    def _observer(self, config: IdempotencyConfig, region: str) -> Idempotency:
        observer = self._observers.get((region, config))
        if observer is None:
            client = local_client(self.engine, region=region, config=ONE_ATTEMPT)
            observer = Idempotency(config, client=client, clock=self.engine.clock.now)
            self._observers[region, config] = observer
        return observer

    def read(
        self, table: str, key: Mapping[str, Any], region: str = "us-east-1"
    ) -> dict[str, Any] | None:
        """The item as stored now (consistent read on the scratch engine, unrecorded)."""
        response = self.engine.execute(
            "GetItem", {"TableName": table, "Key": dict(key), "ConsistentRead": True}, region=region
        )
        item: dict[str, Any] | None = response.get("Item")
        return item

    def snapshots(self) -> list[Snapshot]:
        shots = []
        for shoot in self._watches:
            try:
                shots.append(shoot())
            except Exception as exc:  # e.g. the table is not there yet
                shots.append(Snapshot(f"(cannot read: {type(exc).__name__})", "", "", None, None))
        return shots

    # -- the verdict -----------------------------------------------------------------------------

    def check(self, text: str, passed: bool, *, shown_by: Step | None = None) -> bool:
        """Add a line of the verdict; ``shown_by``: the step whose calls prove it (the
        diagram pins the line there)."""
        index = None
        if shown_by is not None:
            index = next((i for i, s in enumerate(self.steps) if s is shown_by), None)
        self.checks.append(Check(text, bool(passed), index))
        return bool(passed)

    def outcome(self, verdict: str, seconds: float, error: str | None = None) -> Outcome:
        lines = [
            MetricLine(name, ", ".join(f"{k}={v}" for k, v in labels), value)
            for (name, labels), value in sorted(self.metrics.counts.items())
        ]
        return Outcome(
            self.slug, "", self.t0, self.steps, self.checks, verdict, lines, seconds, error
        )

    def close(self) -> None:
        self.engine.close()


def _parse(body: bytes | str) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return body.decode("utf-8", "replace") if isinstance(body, bytes) else body


Runner = Callable[[Stage], str]
"""A scenario: sets the stage, runs the steps, adds checks; returns the verdict's headline."""
