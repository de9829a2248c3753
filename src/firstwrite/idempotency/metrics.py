"""Metrics, hooks and call counting. Prometheus and OpenTelemetry are optional extras.

Every signal goes through one :class:`Metrics` sink: :class:`NullMetrics` (the default, free),
:class:`PrometheusMetrics`, :class:`OpenTelemetryMetrics`, :class:`HookMetrics` (your callables),
or several at once with :class:`MultiMetrics`. The guard checks ``metrics.enabled`` before doing
any work for a signal, so the default hot path pays nothing.

Every counter's name ends in ``_total``, so a name is the same under every sink: Prometheus
(which would otherwise append ``_total`` to a counter's name), OpenTelemetry, hooks and
:class:`MemoryMetrics`. The histogram is exported by Prometheus as ``<name>_bucket``,
``<name>_sum`` and ``<name>_count``. A gauge (:data:`GAUGES`, set with :meth:`Metrics.gauge`)
holds the last value set; a sink that predates gauges ignores them.

The names, kinds and labels of every signal: docs/operating-on-aws.md, "Metrics".
"""

from __future__ import annotations

import threading
import weakref
from collections import Counter as _Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

COUNTERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "firstwrite_claims_total": ("Claim attempts by outcome", ("outcome",)),
    "firstwrite_lost_claims_total": ("Completions refused by fencing", ("operation",)),
    "firstwrite_dynamodb_retries_total": (
        "DynamoDB calls retried",
        ("operation", "kind", "dynamo_error_code"),
    ),
    "firstwrite_dynamodb_throttles_total": (
        "DynamoDB throttling errors",
        ("operation", "dynamo_error_code"),
    ),
    "firstwrite_consumed_capacity_total": (
        "Capacity units consumed: reported by DynamoDB, or estimated for failed conditional writes",
        ("operation", "source"),
    ),
    "firstwrite_in_progress_polls_total": ("Reads while waiting on an in-progress key", ()),
    "firstwrite_cache_hits_total": ("Duplicates answered from the local cache", ()),
    "firstwrite_late_retries_total": (
        "Requests whose finished record was past retention (expired) or removed by TTL",
        ("record",),
    ),
    "firstwrite_completions_not_recorded_total": (
        "Side effects that ran but whose result could not be recorded",
        (),
    ),
    "firstwrite_unguarded_runs_total": (
        "Calls run without the layer: no idempotency key, with on_missing_key='run-unguarded'",
        ("reason",),
    ),
    "firstwrite_deadline_exceeded_total": (
        "Calls stopped at their time budget while DynamoDB kept failing",
        ("operation", "dynamo_error_code"),
    ),
    "firstwrite_recovery_takeovers_total": (
        "Claims of records carrying recovery points: reconciled, not_done, failed_finally, "
        "refused (no reconcile hook), hook_error",
        ("outcome",),
    ),
    "transact_write_cancellations_total": (
        "Transaction cancellation reasons, one per failing item",
        ("transact_write_cancellation_reason",),
    ),
    "dynamo_ttl_delete_before_retry_total": (
        "Requests for a key after TTL removed its finished record",
        (),
    ),
    "firstwrite_legacy_key_hits_total": (
        "Claims answered by a record under a previous key scheme (a key migration's window)",
        ("scheme",),
    ),
    "dynamo_cross_region_duplicate_detected_total": (
        "Records claimed in another region than the one serving the request",
        ("region",),
    ),
    # firstwrite.events: one per record a consumer handled, by what became of it.
    "firstwrite_event_records_total": (
        "Event records handled by a consumer, by source and outcome",
        ("source", "outcome"),
    ),
}
HISTOGRAMS: dict[str, tuple[str, tuple[str, ...]]] = {
    "firstwrite_operation_seconds": ("Idempotency operation latency", ("operation",)),
    # The TTL audit: how long after the last request for a key (its record's claim) the TTL
    # service's Streams REMOVE came. Near the retention is normal; far past it is TTL lag.
    "dynamo_ttl_remove_age_seconds": (
        "Age of a TTL REMOVE stream event against the last request for its key",
        ("record",),
    ),
}
GAUGES: dict[str, tuple[str, tuple[str, ...]]] = {
    # firstwrite.idempotency.clock_skew: set when a guard's estimate moves.
    "firstwrite_clock_offset_seconds": (
        "Estimated offset of DynamoDB's clock from this guard's (DynamoDB minus local)",
        (),
    ),
    "firstwrite_clock_offset_uncertainty_seconds": (
        "Uncertainty of the clock offset estimate (half its interval, plus the tolerance)",
        (),
    ),
}
BUCKETS: dict[str, tuple[float, ...]] = {
    # seconds: 1 min .. 7 days (TTL removes up to about 48 hours late)
    "dynamo_ttl_remove_age_seconds": (
        60.0,
        300.0,
        900.0,
        3600.0,
        6 * 3600.0,
        12 * 3600.0,
        24 * 3600.0,
        36 * 3600.0,
        48 * 3600.0,
        72 * 3600.0,
        7 * 24 * 3600.0,
        float("inf"),
    ),
}
"""Histogram buckets where Prometheus' default (5 ms .. 10 s) does not fit."""


class Metrics:
    """The sink interface. ``enabled = False`` lets the caller skip building labels."""

    enabled: bool = True

    def count(self, name: str, value: float = 1.0, **labels: str) -> None:
        raise NotImplementedError

    def observe(self, name: str, value: float, **labels: str) -> None:
        raise NotImplementedError

    def gauge(self, name: str, value: float, **labels: str) -> None:
        """Set the gauge ``name`` (:data:`GAUGES`) to ``value``; ignored unless overridden."""
        return None


class NullMetrics(Metrics):
    enabled = False

    def count(self, name: str, value: float = 1.0, **labels: str) -> None:
        return None

    def observe(self, name: str, value: float, **labels: str) -> None:
        return None


NULL = NullMetrics()

Hook = Callable[[str, float, Mapping[str, str]], None]


class HookMetrics(Metrics):
    """Calls ``hook(name, value, labels)`` for every signal. Exceptions in hooks propagate:
    a hook is your code, and hiding its bugs would hide lost-claim alerts too."""

    def __init__(self, *hooks: Hook) -> None:
        self.hooks = hooks

    def count(self, name: str, value: float = 1.0, **labels: str) -> None:
        for hook in self.hooks:
            hook(name, value, labels)

    def observe(self, name: str, value: float, **labels: str) -> None:
        for hook in self.hooks:
            hook(name, value, labels)

    def gauge(self, name: str, value: float, **labels: str) -> None:
        for hook in self.hooks:
            hook(name, value, labels)


class MemoryMetrics(Metrics):
    """Keeps counts in memory: ``metrics[name, (("label", "v"),)]``. Handy in tests and REPLs."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: _Counter[tuple[str, tuple[tuple[str, str], ...]]] = _Counter()
        self.observations: dict[str, list[float]] = {}
        self.gauges: dict[str, float] = {}

    def count(self, name: str, value: float = 1.0, **labels: str) -> None:
        with self._lock:
            self.counts[name, tuple(sorted(labels.items()))] += value  # type: ignore[assignment]

    def observe(self, name: str, value: float, **labels: str) -> None:
        with self._lock:
            self.observations.setdefault(name, []).append(value)

    def gauge(self, name: str, value: float, **labels: str) -> None:
        with self._lock:
            self.gauges[name] = value

    def total(self, name: str, **labels: str) -> float:
        """Sum over every label set that includes ``labels``."""
        want = set(labels.items())
        with self._lock:
            return float(
                sum(v for (n, ls), v in self.counts.items() if n == name and want <= set(ls))
            )


class MultiMetrics(Metrics):
    def __init__(self, sinks: Iterable[Metrics]) -> None:
        self.sinks = [s for s in sinks if s.enabled]
        self.enabled = bool(self.sinks)

    def count(self, name: str, value: float = 1.0, **labels: str) -> None:
        for sink in self.sinks:
            sink.count(name, value, **labels)

    def observe(self, name: str, value: float, **labels: str) -> None:
        for sink in self.sinks:
            sink.observe(name, value, **labels)

    def gauge(self, name: str, value: float, **labels: str) -> None:
        for sink in self.sinks:
            sink.gauge(name, value, **labels)


# One set of collectors per (registry, namespace): a second PrometheusMetrics() in a process
# reuses the first one's instead of failing with "Duplicated timeseries".
_Collectors = tuple[dict[str, Any], dict[str, Any], dict[str, Any]]
_PROMETHEUS: weakref.WeakKeyDictionary[Any, dict[str, _Collectors]] = weakref.WeakKeyDictionary()
_PROMETHEUS_LOCK = threading.Lock()


class PrometheusMetrics(Metrics):
    """Exports through ``prometheus_client`` (extra ``firstwrite[prometheus]``); a no-op when it
    is not installed. Any number of instances may share a registry (the default one included):
    they share its collectors."""

    def __init__(self, registry: Any = None, namespace: str = "") -> None:
        try:
            import prometheus_client as prom
        except ImportError:  # pragma: no cover - optional extra
            self.enabled = False
            return
        registry = prom.REGISTRY if registry is None else registry
        with _PROMETHEUS_LOCK:
            per_namespace = _PROMETHEUS.setdefault(registry, {})
            collectors = per_namespace.get(namespace)
            if collectors is None:
                kw: dict[str, Any] = {"namespace": namespace, "registry": registry}
                collectors = per_namespace[namespace] = (
                    {
                        n: prom.Counter(n, doc, labels, **kw)
                        for n, (doc, labels) in COUNTERS.items()
                    },
                    {
                        n: prom.Histogram(
                            n,
                            doc,
                            labels,
                            buckets=BUCKETS.get(n, prom.Histogram.DEFAULT_BUCKETS),
                            **kw,
                        )
                        for n, (doc, labels) in HISTOGRAMS.items()
                    },
                    {n: prom.Gauge(n, doc, labels, **kw) for n, (doc, labels) in GAUGES.items()},
                )
        self._counters, self._histograms, self._gauges = collectors

    def count(self, name: str, value: float = 1.0, **labels: str) -> None:
        metric = self._counters[name]
        (metric.labels(**labels) if labels else metric).inc(value)

    def observe(self, name: str, value: float, **labels: str) -> None:
        metric = self._histograms[name]
        (metric.labels(**labels) if labels else metric).observe(value)

    def gauge(self, name: str, value: float, **labels: str) -> None:
        metric = self._gauges[name]
        (metric.labels(**labels) if labels else metric).set(value)


class OpenTelemetryMetrics(Metrics):
    """Exports through ``opentelemetry-api`` (extra ``firstwrite[otel]``); a no-op when absent."""

    def __init__(self, meter: Any = None) -> None:
        try:
            from opentelemetry import metrics as otel
        except ImportError:  # pragma: no cover - optional extra
            self.enabled = False
            return
        meter = meter or otel.get_meter("firstwrite.idempotency")
        self._counters = {
            n: meter.create_counter(n, description=d) for n, (d, _) in COUNTERS.items()
        }
        self._histograms = {
            n: meter.create_histogram(n, unit="s", description=d)
            for n, (d, _) in HISTOGRAMS.items()
        }
        create_gauge = getattr(meter, "create_gauge", None)  # opentelemetry-api >= 1.23
        self._gauges = (
            {}
            if create_gauge is None
            else {n: create_gauge(n, unit="s", description=d) for n, (d, _) in GAUGES.items()}
        )

    def count(self, name: str, value: float = 1.0, **labels: str) -> None:
        self._counters[name].add(value, labels)

    def observe(self, name: str, value: float, **labels: str) -> None:
        self._histograms[name].record(value, labels)

    def gauge(self, name: str, value: float, **labels: str) -> None:
        gauge = self._gauges.get(name)
        if gauge is not None:
            gauge.set(value, labels)


class CallCounter:
    """Counts DynamoDB API calls made through ``client`` (boto3 or aiobotocore), one per
    logical call, from botocore's ``before-call`` event. botocore's internal retries of a call
    are not counted separately; our own retry policy's attempts are (each is a call).

    >>> with CallCounter(client) as calls:
    ...     guard.run("k", fn)
    >>> calls.total, dict(calls.by_operation)
    (2, {'PutItem': 1, 'UpdateItem': 1})
    """

    def __init__(self, client: Any) -> None:
        self._events = client.meta.events
        self._lock = threading.Lock()
        self.by_operation: _Counter[str] = _Counter()
        self._unique = f"firstwrite-call-counter-{id(self)}"

    def _on_call(self, model: Any = None, **_: Any) -> None:
        with self._lock:
            self.by_operation[getattr(model, "name", "?")] += 1

    @property
    def total(self) -> int:
        return sum(self.by_operation.values())

    def reset(self) -> None:
        with self._lock:
            self.by_operation.clear()

    def start(self) -> CallCounter:
        self._events.register("before-call.dynamodb", self._on_call, unique_id=self._unique)
        return self

    def stop(self) -> None:
        self._events.unregister("before-call.dynamodb", unique_id=self._unique)

    def __enter__(self) -> CallCounter:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
