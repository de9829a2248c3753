"""Issue 2.3: ``firstwrite engine serve`` vs moto's server vs dynalite, 16 connections (wrk)."""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import _workload as w
from ._common import (
    BENCH_DIR,
    RESULTS,
    Section,
    Series,
    Settings,
    Table,
    Target,
    free_port,
    package_version,
    run_quiet,
    scratch_dir,
    try_import,
)
from ._spy import ensure_py_spy, record, summarise

CONNECTIONS = 16
WRK_THREADS = 1  # one wrk thread drives 16 connections easily and leaves a core to the server
TARGET_MOTO = 10.0
TARGET_DYNALITE = 1.5
# The targets are read against durability=normal: the mode `make run` uses and the one
# comparable to moto and dynalite, which keep everything in memory and never fsync.
OURS_TARGETED = "firstwrite (normal)"
HEADERS = {
    "Content-Type": "application/x-amz-json-1.0",
    "X-Amz-Target": "DynamoDB_20120810.PutItem",
    "X-Amz-Date": "20240101T000000Z",
    "Authorization": "AWS4-HMAC-SHA256 Credential=AKIDBENCH/20240101/us-east-1/dynamodb/"
    "aws4_request, SignedHeaders=content-type;host;x-amz-date;x-amz-target, Signature=" + "0" * 64,
}


# -- tools ----------------------------------------------------------------------------------------


def ensure_wrk(log: Callable[[str], None]) -> tuple[str | None, str]:
    """wrk's path (installing it with apt-get when missing and possible), or (None, why)."""
    found = shutil.which("wrk")
    if found:
        return found, ""
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        return None, "wrk is not installed and apt-get is unavailable (install wrk)"
    log("    installing wrk with apt-get")
    env_cmd = ["env", "DEBIAN_FRONTEND=noninteractive"]
    code, out = run_quiet([*env_cmd, "apt-get", "install", "-y", "-qq", "wrk"], timeout=300)
    if code != 0:
        run_quiet([*env_cmd, "apt-get", "update", "-qq"], timeout=300)
        code, out = run_quiet([*env_cmd, "apt-get", "install", "-y", "-qq", "wrk"], timeout=300)
    found = shutil.which("wrk")
    return (found, "") if found else (None, f"apt-get install wrk failed: {out[-300:]}")


def ensure_dynalite(
    log: Callable[[str], None], wanted: Collection[str] | None = None
) -> tuple[Path | None, str]:
    """dynalite's cli.js, installed by ``npm ci`` from bench/package-lock.json, or (None, why);
    not installed when ``wanted`` (server names, ``None``: all) leaves it out."""
    if wanted is not None and "dynalite" not in wanted:
        return None, "not selected"
    if shutil.which("node") is None or shutil.which("npm") is None:
        return None, "node/npm not installed"
    target = RESULTS / "node"
    target.mkdir(parents=True, exist_ok=True)
    lock = (BENCH_DIR / "package-lock.json").read_bytes()
    stamp = target / ".lock-sha256"
    digest = hashlib.sha256(lock + (BENCH_DIR / "package.json").read_bytes()).hexdigest()
    cli = target / "node_modules" / "dynalite" / "cli.js"
    if not cli.exists() or not stamp.exists() or stamp.read_text() != digest:
        log("    npm ci (dynalite)")
        shutil.copy(BENCH_DIR / "package.json", target / "package.json")
        shutil.copy(BENCH_DIR / "package-lock.json", target / "package-lock.json")
        # No install scripts: dynalite's in-memory store needs no native build.
        code, out = run_quiet(
            ["npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts"], timeout=300, cwd=target
        )
        if code != 0 or not cli.exists():
            return None, f"npm ci failed: {out[-300:]}"
        stamp.write_text(digest)
    return cli, ""


# -- servers --------------------------------------------------------------------------------------


@dataclass
class Server:
    name: str
    command: list[str]
    log_path: Path
    port: int
    note: str = ""
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> None:
        log_file = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            self.command,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: stopped as one, by id
        )
        log_file.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"exited with {self.proc.returncode}: {self.log_tail()}")
            with contextlib.suppress(OSError, http.client.HTTPException):
                status, _ = self.call("ListTables", {})
                if status == 200:
                    return
            time.sleep(0.1)
        raise RuntimeError(f"not ready after {timeout:g} s: {self.log_tail()}")

    def log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")[-500:].strip()
        return ""

    def cpu_seconds(self) -> float | None:
        """The server process's CPU time so far (user + system, all its threads), from /proc."""
        if self.proc is None:
            return None
        try:
            stat = Path(f"/proc/{self.proc.pid}/stat").read_text()
        except OSError:  # no /proc (not Linux), or the process is gone
            return None
        fields = stat.rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)

    def call(self, operation: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """One request with the same headers as the wrk scripts."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            headers = {**HEADERS, "X-Amz-Target": f"DynamoDB_20120810.{operation}"}
            conn.request("POST", "/", json.dumps(body).encode(), headers)
            response = conn.getresponse()
            data = response.read()
            return response.status, json.loads(data) if data else {}
        finally:
            conn.close()

    def prepare(self) -> None:
        """Create the table, wait until ACTIVE, insert the existing key, check the semantics."""
        status, body = self.call("CreateTable", w.CREATE_TABLE)
        if status != 200:
            raise RuntimeError(f"CreateTable answered {status} {body}")
        for _ in range(100):
            _status, desc = self.call("DescribeTable", {"TableName": w.TABLE})
            if desc.get("Table", {}).get("TableStatus") == "ACTIVE":
                break
            time.sleep(0.1)
        status, body = self.call("PutItem", {"TableName": w.TABLE, "Item": w.item(w.EXISTING_KEY)})
        if status != 200:
            raise RuntimeError(f"PutItem answered {status} {body}")
        # The exact requests of the wrk scripts must mean what we measure.
        status, body = self.call("PutItem", w.put_kwargs("semantic-check-fresh"))
        if status != 200:
            raise RuntimeError(f"a fresh conditional put answered {status} {body}")
        status, body = self.call("PutItem", w.put_kwargs(w.EXISTING_KEY))
        if status != 400 or "ConditionalCheckFailed" not in str(body.get("__type")):
            raise RuntimeError(f"a put on an existing key answered {status} {body}")


def firstwrite_server(name: str, directory: Path, stem: str, *options: str) -> Server:
    """``firstwrite engine serve`` on a free port, its database ``<stem>.db`` in ``directory``."""
    port = free_port()
    db = str(directory / f"{stem}.db")
    command = [sys.executable, "-m", "firstwrite.cli", "engine", "serve"]
    command += ["--port", str(port), "--db", db, *options]
    return Server(name, command, directory / f"{stem}.log", port)


def peer_servers(directory: Path, suffix: str, dynalite: Path | None) -> list[Server]:
    """moto_server and dynalite (when installed), on free ports, logging into ``directory``
    (``<name><suffix>.log``); moto's absence is left to the caller to report."""
    servers = []
    moto_server = Path(sys.executable).with_name("moto_server")
    if moto_server.exists():
        port = free_port()
        command = [str(moto_server), "-H", "127.0.0.1", "-p", str(port)]
        servers.append(Server("moto_server", command, directory / f"moto{suffix}.log", port))
    if dynalite is not None:
        port = free_port()
        command = ["node", str(dynalite), "--host", "127.0.0.1", "--port", str(port)]
        command += ["--createTableMs", "0", "--deleteTableMs", "0", "--updateTableMs", "0"]
        servers.append(Server("dynalite", command, directory / f"dynalite{suffix}.log", port))
    return servers


def _servers(directory: Path, dynalite: Path | None) -> tuple[list[Server], dict[str, str]]:
    servers: list[Server] = []
    skipped: dict[str, str] = {}
    _mod, why = try_import("firstwrite.engine.server.app", "serve")
    if why is None:
        _mod, why = try_import("firstwrite.cli", "main")
    for durability in ("normal", "full"):
        name = f"firstwrite ({durability})"
        if why is not None:
            skipped[name] = why
            continue
        stem = f"server-{durability}"
        servers.append(firstwrite_server(name, directory, stem, "--durability", durability))
    servers += peer_servers(directory, "", dynalite)
    moto_server = Path(sys.executable).with_name("moto_server")
    if not moto_server.exists():
        skipped["moto_server"] = f"{moto_server} not found"
    return servers, skipped


# -- wrk --------------------------------------------------------------------------------------------


@dataclass
class WrkResult:
    rate: float
    requests: int
    non_2xx: int
    socket_errors: int
    p50_ms: float
    p99_ms: float


def run_wrk(wrk: str, server: Server, workload: str, seconds: int, run_id: str) -> WrkResult:
    script = BENCH_DIR / "wrk" / ("put_fresh.lua" if workload == "success" else "put_existing.lua")
    cmd = [
        wrk,
        f"-t{WRK_THREADS}",
        f"-c{CONNECTIONS}",
        f"-d{max(1, int(seconds))}s",
        "--timeout",
        "10s",
        "-s",
        str(script),
        f"http://{server.host}/",
        "--",
        run_id,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60, check=False)
    line = next(
        (ln for ln in proc.stdout.splitlines() if ln.startswith("BENCHJSON ")),
        None,
    )
    if proc.returncode != 0 or line is None:
        raise RuntimeError(f"wrk failed ({proc.returncode}): {proc.stdout[-300:]} {proc.stderr}")
    data = json.loads(line.split(" ", 1)[1])
    requests = int(data["requests"])
    non_2xx = int(data["status"])
    socket_errors = sum(int(data[k]) for k in ("connect", "read", "write", "timeout"))
    expected_failures = requests if workload == "failing" else 0
    if non_2xx != expected_failures or socket_errors:
        raise RuntimeError(
            f"{server.name}: {requests} requests, {non_2xx} non-2xx (expected "
            f"{expected_failures}), {socket_errors} socket errors"
        )
    return WrkResult(
        rate=requests / (int(data["duration_us"]) / 1e6),
        requests=requests,
        non_2xx=non_2xx,
        socket_errors=socket_errors,
        p50_ms=int(data["p50_us"]) / 1000,
        p99_ms=int(data["p99_us"]) / 1000,
    )


@contextlib.contextmanager
def started(
    servers: list[Server],
    prepare: Callable[[Server], None],
    skipped: dict[str, str],
    log: Callable[[str], None],
) -> Iterator[list[Server]]:
    """The servers that started and that ``prepare`` made ready; one that fails is skipped
    (the reason in ``skipped``) and the others go on. Every server is stopped on exit."""
    live: list[Server] = []
    try:
        for server in servers:
            try:
                server.start()
                prepare(server)
            except Exception as exc:
                skipped[server.name] = f"could not start/prepare: {exc}"
                log(f"    skip {server.name}: {skipped[server.name]}")
                server.stop()
                continue
            live.append(server)
        yield live
    finally:
        for server in servers:
            server.stop()


def run(settings: Settings, log: Callable[[str], None]) -> Section:
    section = Section(
        key="http",
        title="HTTP server vs moto_server vs dynalite, 16 connections (issue 2.3)",
        method=[
            f"`wrk -t{WRK_THREADS} -c{CONNECTIONS} -d{int(settings.http_duration)}s` with "
            "`bench/wrk/put_fresh.lua` (*success*: a unique key per request) or "
            "`bench/wrk/put_existing.lua` (*failing*: one existing key, every answer is a 400 "
            "`ConditionalCheckFailedException`): DynamoDB JSON 1.0 `PutItem` with "
            "`X-Amz-Target` and a dummy SigV4 `Authorization` header, same body as in-process.",
            "Before measuring, each server gets the table and the existing key, and the exact "
            "wrk requests are checked to succeed (fresh key) and fail the condition (existing "
            "key). Every wrk run is checked: no socket errors, and 0 (*success*) or all "
            "(*failing*) non-2xx answers; otherwise the run fails.",
            "**firstwrite (normal|full)**: `python -m firstwrite.cli engine serve --db <file> "
            "--durability normal|full` (defaults otherwise). "
            f"**The targets are read against `{OURS_TARGETED}`**: moto and dynalite keep "
            "everything in memory and never fsync, `normal` is WAL without fsync per commit "
            "(survives a process crash); `full` (fsync per commit, group-committed) is shown "
            "with its own ratios, and is not expected to meet them on this disk.",
            f"**moto_server** (moto {package_version('moto')}, its default werkzeug server); "
            "**dynalite** 4.0.0 from `bench/package-lock.json` (`npm ci`), in memory (its "
            "default), table state delays set to 0.",
            f"All servers run at once on 127.0.0.1 (idle while not measured); {settings.http_reps} "
            "repetitions, each one wrk run per server in rotating order after a 1 s warm-up; "
            "the ratio is the median of per-repetition ratios. wrk shares the 2 cores with "
            "the server under test.",
            "*Server CPU µs per request*: the server process's user + system CPU time "
            "(`/proc/<pid>/stat`, all its threads) over each wrk run, divided by the requests "
            "answered; less sensitive to other load than the rates.",
            "Caveat: when other work oversubscribes the machine (see the load averages), the "
            "ratio against single-threaded dynalite moves in our favour, because our server "
            "has more runnable threads and so gets a larger CPU share; trust a run at low "
            "load.",
        ],
    )
    wrk, why_wrk = ensure_wrk(log)
    if wrk is None:
        section.error = why_wrk
        return section
    wanted = settings.http_servers
    dynalite, why_dynalite = ensure_dynalite(log, wanted)
    with scratch_dir("http-") as directory:
        servers, skipped = _servers(directory, dynalite)
        if settings.http_servers is not None:
            servers = [s for s in servers if s.name in settings.http_servers]
            skipped = {k: v for k, v in skipped.items() if k in settings.http_servers}
        if dynalite is None and (wanted is None or "dynalite" in wanted):
            skipped["dynalite"] = why_dynalite
        with started(servers, Server.prepare, skipped, log) as live:
            tables: dict[str, Table] = {}
            latency: dict[str, dict[str, list[float]]] = {}
            cpu: dict[str, dict[str, list[float]]] = {}  # server CPU µs per request
            for workload in w.WORKLOADS:
                tables[workload] = Table(
                    title=f"{workload} workload",
                    series=[Series(s.name) for s in live],
                    ours=["firstwrite (normal)", "firstwrite (full)"],
                    targets=[
                        Target(OURS_TARGETED, "moto_server", minimum=TARGET_MOTO),
                        Target(OURS_TARGETED, "dynalite", minimum=TARGET_DYNALITE),
                    ],
                    skipped=dict(skipped),
                )
                latency[workload] = {s.name: [] for s in live}
                cpu[workload] = {s.name: [] for s in live}
            failed: set[str] = set()
            run_no = 0
            for workload in w.WORKLOADS if not settings.quick else ():
                for server in live:
                    run_no += 1
                    try:
                        run_wrk(wrk, server, workload, 1, f"warm{run_no}-{time.time_ns()}")
                    except Exception as exc:
                        failed.add(server.name)
                        tables[workload].skipped[server.name] = f"warm-up failed: {exc}"
            for rep in range(settings.http_reps):
                k = rep % max(1, len(live))
                for workload in w.WORKLOADS:
                    table = tables[workload]
                    for server in live[k:] + live[:k]:
                        if server.name in failed:
                            continue
                        run_no += 1
                        cpu_before = server.cpu_seconds()
                        try:
                            result = run_wrk(
                                wrk,
                                server,
                                workload,
                                int(settings.http_duration),
                                f"r{run_no}-{time.time_ns()}",
                            )
                        except Exception as exc:
                            failed.add(server.name)
                            table.skipped[server.name] = f"failed: {exc}"
                            log(f"    {server.name} failed: {exc}")
                            continue
                        series = table.get(server.name)
                        assert series is not None
                        series.values.append(result.rate)
                        latency[workload][server.name].append(result.p99_ms)
                        cpu_after = server.cpu_seconds()
                        if cpu_before is not None and cpu_after is not None and result.requests:
                            per_request = (cpu_after - cpu_before) / result.requests * 1e6
                            cpu[workload][server.name].append(per_request)
                    log(
                        f"    rep {rep + 1} {workload}: "
                        + ", ".join(
                            f"{s.name}={s.values[-1]:,.0f}" for s in table.series if s.values
                        )
                    )
            for workload, table in tables.items():
                # A server that failed part-way is reported as failed, not half-measured.
                table.series = [s for s in table.series if s.values and s.name not in failed]
                table.extra["p99 latency (ms, median)"] = {
                    name: f"{sorted(v)[len(v) // 2]:.1f}"
                    for name, v in latency[workload].items()
                    if v
                }
                table.extra["server CPU µs per request (median)"] = {
                    name: f"{sorted(v)[len(v) // 2]:.0f}" for name, v in cpu[workload].items() if v
                }
                section.tables.append(table)
            _profile_misses(wrk, live, section, settings, directory, log)
    return section


def _profile_misses(
    wrk: str,
    live: list[Server],
    section: Section,
    settings: Settings,
    directory: Path,
    log: Callable[[str], None],
) -> None:
    """py-spy the targeted server under the same wrk load for each workload missing a target."""
    server = next((s for s in live if s.name == OURS_TARGETED), None)
    if server is None or server.proc is None:
        return
    for table in section.tables:
        missed = [
            t
            for t in table.targets
            if table.get(t.peer) is not None and not t.passed(table.ratio(t.ours, t.peer))
        ]
        if not missed or table.get(OURS_TARGETED) is None:
            continue
        py_spy, why = ensure_py_spy()
        label = f"{OURS_TARGETED} server, {table.title}"
        if py_spy is None:
            section.profiles[label] = f"not profiled: {why}"
            return
        seconds = max(2, int(settings.http_duration))
        out = directory / f"spy-{table.title.split()[0]}.txt"
        log(f"  profiling {label} (target missed)")
        recorder = record(py_spy, server.proc.pid, seconds, out)
        workload = "success" if table.title.startswith("success") else "failing"
        try:
            run_wrk(wrk, server, workload, seconds + 1, f"spy-{time.time_ns()}")
        finally:
            _out, err = recorder.communicate(timeout=seconds + 60)
        if out.exists():
            section.profiles[label] = summarise(out.read_text())
        else:
            section.profiles[label] = f"py-spy failed: {err.decode(errors='replace')[-300:]}"
