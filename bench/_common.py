"""Shared machinery: contenders, interleaved repetitions, paired ratios, results.

Every benchmark compares contenders *in the same run*: each repetition runs every contender
once, back to back, in a rotating order, so that noise from the shared machine (other engineers'
tests, CPU frequency) hits all of them alike. Ratios are computed per repetition (ours / peer
measured seconds apart) and summarised by their median; throughputs by median and min-max.
"""

from __future__ import annotations

import contextlib
import cProfile
import importlib
import io
import os
import platform
import pstats
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
RESULTS = BENCH_DIR / "results"  # git-ignored scratch: node_modules, databases, raw output

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class Settings:
    """How long and how often to measure."""

    reps: int
    duration: float  # seconds per contender per repetition (in-process benchmarks)
    http_duration: float  # seconds per wrk run
    http_reps: int
    warmup: float
    quick: bool = False
    # Only these HTTP servers (by name); None: all. The smoke test runs one.
    http_servers: tuple[str, ...] | None = None

    @classmethod
    def full(cls) -> Settings:
        # Many short slices rather than a few long ones: on a shared machine the load changes
        # from second to second, and a ratio is only as good as the closeness of its pair.
        return cls(reps=11, duration=0.4, http_duration=4.0, http_reps=5, warmup=0.3)

    @classmethod
    def quick_mode(cls) -> Settings:
        return cls(reps=2, duration=0.05, http_duration=1.0, http_reps=2, warmup=0.02, quick=True)


# -- results ------------------------------------------------------------------------------------


@dataclass
class Series:
    """One contender's measurements: one value per repetition (ops/s unless ``unit`` says)."""

    name: str
    values: list[float] = field(default_factory=list)
    unit: str = "ops/s"
    note: str = ""

    @property
    def median(self) -> float:
        return statistics.median(self.values) if self.values else float("nan")

    @property
    def spread(self) -> tuple[float, float]:
        return (min(self.values), max(self.values)) if self.values else (float("nan"),) * 2


@dataclass
class Target:
    """``ours / peer >= minimum`` (throughput) or ``ours / peer <= maximum`` (time).

    ``bound`` names a contender that does only what *every* implementation must do (the same
    SQLite read, the same boto3 error, the same DynamoDB calls) and nothing else. It is measured
    in the same run; where it misses the target too, no implementation can meet it, and the
    report says so beside the miss. ``why``: what the run measured as the cause of a miss that
    the bound does not explain (set by the benchmark after measuring).
    """

    ours: str
    peer: str
    minimum: float | None = None
    maximum: float | None = None
    bound: str | None = None
    why: str | None = None

    def describe(self) -> str:
        if self.minimum is not None:
            return f">= {self.minimum:g}x"
        return f"<= {self.maximum:g}x"

    def passed(self, ratio: float) -> bool:
        if ratio != ratio:  # NaN: not measured
            return False
        if self.minimum is not None:
            return ratio >= self.minimum
        assert self.maximum is not None
        return ratio <= self.maximum


@dataclass(frozen=True)
class Check:
    """A pass/fail requirement that is not a throughput ratio (e.g. DynamoDB calls)."""

    name: str
    measured: str
    required: str
    passed: bool | None  # None: not measured


@dataclass
class Table:
    """One workload of one benchmark: contenders measured together, plus targets."""

    title: str
    series: list[Series]
    ours: list[str] = field(default_factory=list)  # our contenders; the rest are peers
    targets: list[Target] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # contender -> why
    notes: list[str] = field(default_factory=list)
    # Extra columns (name -> contender -> text), e.g. DynamoDB calls per request.
    extra: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def peers(self) -> list[str]:
        return [s.name for s in self.series if s.name not in self.ours]

    def budget_note(self, ours: str, floor: str, share: float) -> None:
        """State what the target means in time per call: the floor's, and ours allowed."""
        base, mine = self.get(floor), self.get(ours)
        if base is None or not base.values or base.median <= 0:
            return
        note = (
            f"Time per call: {floor} {1e6 / base.median:.1f} µs; the target allows {ours} "
            f"{1e6 / (base.median * share):.1f} µs"
        )
        if mine is not None and mine.values and mine.median > 0:
            note += f"; measured {1e6 / mine.median:.1f} µs"
        self.notes.append(note + " (from the medians).")

    def get(self, name: str) -> Series | None:
        return next((s for s in self.series if s.name == name), None)

    def ratio(self, ours: str, peer: str) -> float:
        """Median of per-repetition ratios ours/peer (paired: measured seconds apart)."""
        a, b = self.get(ours), self.get(peer)
        if a is None or b is None or not a.values or not b.values:
            return float("nan")
        pairs = [x / y for x, y in zip(a.values, b.values, strict=False) if y > 0]
        return statistics.median(pairs) if pairs else float("nan")


@dataclass
class Section:
    """One benchmark's report: how it was run, its tables, hot spots of a missed target."""

    key: str
    title: str
    method: list[str]
    tables: list[Table] = field(default_factory=list)
    profiles: dict[str, str] = field(default_factory=dict)  # label -> text
    error: str | None = None


# -- running contenders -------------------------------------------------------------------------


class Contender:
    """Something measured: ``setup()`` once, ``op(i)`` many times, ``teardown()`` once.

    ``op`` gets a number unique within the contender across repetitions, for fresh keys.
    """

    name: str = "?"

    def setup(self) -> None:
        """Prepare (create tables, start mocks)."""

    def op(self, i: int) -> None:
        raise NotImplementedError

    def teardown(self) -> None:
        """Release everything ``setup`` made."""

    def pause(self) -> None:
        """Called after each timed slice (e.g. moto's mock is stopped between slices)."""

    def resume(self) -> None:
        """Called before each timed slice."""


class _Runner:
    def __init__(self, contender: Contender) -> None:
        self.contender = contender
        self.counter = 0

    def timed(self, duration: float) -> float:
        """Run ``op`` for about ``duration`` seconds; return ops/s."""
        op = self.contender.op
        self.contender.resume()
        try:
            i = self.counter
            start = time.perf_counter()
            deadline = start + duration
            n = 0
            # Check the clock every 16 ops: the check costs the same for every contender.
            while True:
                for _ in range(16):
                    op(i)
                    i += 1
                n += 16
                now = time.perf_counter()
                if now >= deadline:
                    break
            self.counter = i
            return n / (now - start)
        finally:
            self.contender.pause()


def run_interleaved(
    contenders: Sequence[Contender], settings: Settings, *, log: Callable[[str], None]
) -> tuple[list[Series], dict[str, str]]:
    """Measure every contender ``settings.reps`` times, interleaved, rotating the order."""
    runners: list[_Runner] = []
    skipped: dict[str, str] = {}
    for c in contenders:
        try:
            c.setup()
        except Exception as exc:  # a peer that cannot run is reported, not fatal
            skipped[c.name] = f"setup failed: {type(exc).__name__}: {exc}"
            log(f"    skip {c.name}: {skipped[c.name]}")
            continue
        runners.append(_Runner(c))
    series = {r.contender.name: Series(r.contender.name) for r in runners}
    try:
        for r in runners:
            r.timed(settings.warmup)
        for rep in range(settings.reps):
            k = rep % len(runners) if runners else 0
            for r in runners[k:] + runners[:k]:
                rate = r.timed(settings.duration)
                series[r.contender.name].values.append(rate)
            log(
                f"    rep {rep + 1}/{settings.reps}: "
                + ", ".join(f"{n}={s.values[-1]:,.0f}" for n, s in series.items())
            )
    finally:
        for r in runners:
            with contextlib.suppress(Exception):
                r.contender.teardown()
    return list(series.values()), skipped


def profile_contender(contender: Contender, ops: int, *, top: int = 14) -> str:
    """cProfile ``ops`` calls of a contender; the top functions by own time, paths shortened."""
    contender.setup()
    try:
        contender.resume()
        for i in range(min(200, ops)):  # warm caches outside the profile
            contender.op(10_000_000 + i)
        profiler = cProfile.Profile()
        profiler.enable()
        for i in range(ops):
            contender.op(20_000_000 + i)
        profiler.disable()
        contender.pause()
    finally:
        contender.teardown()
    own = io.StringIO()
    pstats.Stats(profiler, stream=own).sort_stats("tottime").print_stats(top)
    ours = io.StringIO()
    pstats.Stats(profiler, stream=ours).sort_stats("cumulative").print_stats("firstwrite/", top)
    return (
        f"{ops} calls profiled (cProfile), by own time:\n"
        + _stats_body(own.getvalue())
        + "\n\nfirstwrite functions by cumulative time:\n"
        + _stats_body(ours.getvalue())
    )


def _stats_body(text: str) -> str:
    version = f"python{sys.version_info.major}.{sys.version_info.minor}/"
    for prefix in (
        str(REPO / "src") + "/",
        f"{sys.prefix}/lib/{version}site-packages/",
        f"{sys.base_prefix}/lib/{version}",
    ):
        text = text.replace(prefix, "")
    lines = [ln.rstrip() for ln in text.splitlines()]
    start = next((i for i, ln in enumerate(lines) if "ncalls" in ln), 0)
    return "\n".join(ln for ln in lines[start:] if ln.strip())


# -- environment --------------------------------------------------------------------------------


def machine_info() -> dict[str, str]:
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    load = ""
    with contextlib.suppress(OSError):
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return {
        "CPU": cpu,
        "cores": str(os.cpu_count()),
        "OS": f"{platform.system()} {platform.release()}",
        "Python": platform.python_version(),
        "SQLite": sqlite3.sqlite_version,
        "load average at start": load,
    }


def package_version(name: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def try_import(module: str, *names: str) -> tuple[Any, str | None]:
    """Import ``module`` (and check ``names`` exist); (module, None) or (None, why not)."""
    try:
        mod = importlib.import_module(module)
    except Exception as exc:
        return None, f"{module} not importable yet ({type(exc).__name__}: {exc})"
    missing = [n for n in names if not hasattr(mod, n)]
    if missing:
        return None, f"{module} has no {', '.join(missing)} yet"
    return mod, None


@contextlib.contextmanager
def scratch_dir(prefix: str) -> Iterator[Path]:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=RESULTS))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def run_quiet(cmd: Sequence[str], *, timeout: float, cwd: Path | None = None) -> tuple[int, str]:
    """Run a setup command; (exit code, combined output tail)."""
    try:
        proc = subprocess.run(
            list(cmd),
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 1, f"{type(exc).__name__}: {exc}"
    return proc.returncode, proc.stdout[-2000:]


def guard_client_config() -> Any:
    """A botocore ``Config`` whose timeouts fit firstwrite's default budget, as docs/patterns.md
    (Time budget) asks of a guard's client: with botocore's 60 s ones the layer hands every call
    to a thread it can abandon, and callgrind, counting one thread, would miss the calls."""
    from botocore.config import Config

    from firstwrite.idempotency import IdempotencyConfig
    from firstwrite.idempotency.clients import sdk_settings  # also in key_migration's BASE

    timeouts = sdk_settings(IdempotencyConfig().budget)
    return Config(
        connect_timeout=timeouts["connect_timeout"], read_timeout=timeouts["read_timeout"]
    )


def dummy_aws_env() -> None:
    """Static fake credentials and region so that no SDK looks at the real environment."""
    os.environ["AWS_ACCESS_KEY_ID"] = "AKIDBENCH"
    os.environ["AWS_SECRET_ACCESS_KEY"] = "bench-secret"
    os.environ["AWS_DEFAULT_REGION"] = "us-east-1"
    os.environ.pop("AWS_SESSION_TOKEN", None)
    os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
    os.environ.pop("AWS_PROFILE", None)


def create_table(client: Any, name: str, key: str, *, ttl_attribute: str | None = None) -> None:
    """An on-demand table keyed by the string ``key``, with TTL on ``ttl_attribute`` if given
    (like for like: every library's docs have TTL on, and firstwrite's ensure_table turns it on)."""
    client.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    if ttl_attribute is not None:
        client.update_time_to_live(
            TableName=name,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl_attribute},
        )


def microseconds_per_call(
    ops: Mapping[K, Callable[[int], object]], calls: int, reps: int, *, warmup: int = 50
) -> dict[K, list[float]]:
    """Time ``ops`` (each ``op(i)`` one request; ``i`` never repeats, so keys can be fresh):
    ``warmup`` uncounted calls each, then ``reps`` rounds of ``calls`` calls, the ops
    interleaved round by round so machine load falls on all alike. Microseconds per call, one
    value per round."""
    for op in ops.values():
        for i in range(warmup):
            op(10**6 + i)
    found: dict[K, list[float]] = {name: [] for name in ops}
    for rep in range(reps):
        for name, op in ops.items():
            start = time.perf_counter()
            for i in range(calls):
                op(rep * calls + i)
            found[name].append((time.perf_counter() - start) / calls * 1e6)
    return found
