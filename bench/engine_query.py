"""Issue 13: Query and Scan on a table and on a GSI, 1e4 and 1e5 items: firstwrite's server vs
moto_server vs dynalite over HTTP, and Query on an index against Query on its table (the
index must cost at most 1.2x the table: its entries are stored like the items)."""

from __future__ import annotations

import functools
import http.client
import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from ._common import (
    Contender,
    Section,
    Series,
    Settings,
    Table,
    Target,
    package_version,
    run_interleaved,
    scratch_dir,
)
from .engine_http import (
    HEADERS,
    Server,
    ensure_dynalite,
    firstwrite_server,
    peer_servers,
    started,
)

SIZES = (10_000, 100_000)
PER_PARTITION = 100  # items per table partition and per index partition
PAGE = 100  # Limit of every Query and Scan: one full partition per Query
# Query on an index may take at most 1.2x the time of Query on its table: a throughput ratio
# index/table of at least 1/1.2.
INDEX_SHARE = 1 / 1.2
TABLE = "bench-query"
WORKLOADS = ("Query table", "Query index", "Scan table", "Scan index")

CREATE = {
    "TableName": TABLE,
    "AttributeDefinitions": [
        {"AttributeName": "pk", "AttributeType": "S"},
        {"AttributeName": "sk", "AttributeType": "N"},
        {"AttributeName": "g", "AttributeType": "S"},
        {"AttributeName": "gs", "AttributeType": "N"},
    ],
    "KeySchema": [
        {"AttributeName": "pk", "KeyType": "HASH"},
        {"AttributeName": "sk", "KeyType": "RANGE"},
    ],
    "GlobalSecondaryIndexes": [
        {
            "IndexName": "by-g",
            "KeySchema": [
                {"AttributeName": "g", "KeyType": "HASH"},
                {"AttributeName": "gs", "KeyType": "RANGE"},
            ],
            # ALL: an index Query returns the same items as a table Query, byte for byte.
            "Projection": {"ProjectionType": "ALL"},
        }
    ],
    "BillingMode": "PAY_PER_REQUEST",
}


def item(n: int, size: int) -> dict[str, Any]:
    """Item ``n`` of ``size``: partition ``n // 100`` of the table, and a different grouping
    (``n % groups``) in the index, so the index is not the table in disguise."""
    groups = size // PER_PARTITION
    return {
        "pk": {"S": f"p{n // PER_PARTITION:05d}"},
        "sk": {"N": str(n % PER_PARTITION)},
        "g": {"S": f"g{n % groups:05d}"},
        "gs": {"N": str(n // groups)},
        "status": {"S": "PAID" if n % 3 else "OPEN"},
        "payload": {"S": "x" * 100},
    }


def request(workload: str, size: int, rng: random.Random) -> tuple[str, dict[str, Any]]:
    """One request of ``workload``: a Query of a random partition, or a Scan page."""
    partitions = size // PER_PARTITION
    if workload == "Query table":
        key = f"p{rng.randrange(partitions):05d}"
        return "Query", {
            "TableName": TABLE,
            "KeyConditionExpression": "pk = :p",
            "ExpressionAttributeValues": {":p": {"S": key}},
            "Limit": PAGE,
        }
    if workload == "Query index":
        key = f"g{rng.randrange(partitions):05d}"
        return "Query", {
            "TableName": TABLE,
            "IndexName": "by-g",
            "KeyConditionExpression": "g = :g",
            "ExpressionAttributeValues": {":g": {"S": key}},
            "Limit": PAGE,
        }
    params: dict[str, Any] = {"TableName": TABLE, "Limit": PAGE}
    if workload == "Scan index":
        params["IndexName"] = "by-g"
    return "Scan", params


class Http:
    """One persistent connection to a server, speaking DynamoDB JSON 1.0 (reopened when the
    server closed it while idle: Node closes keep-alive connections after 5 s)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)

    def call(self, operation: str, body: dict[str, Any]) -> dict[str, Any]:
        headers = {**HEADERS, "X-Amz-Target": f"DynamoDB_20120810.{operation}"}
        payload = json.dumps(body).encode()
        try:
            self.conn.request("POST", "/", payload, headers)
            response = self.conn.getresponse()
        except (ConnectionError, http.client.RemoteDisconnected, http.client.CannotSendRequest):
            self.conn.close()
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
            self.conn.request("POST", "/", payload, headers)
            response = self.conn.getresponse()
        data = json.loads(response.read() or b"{}")
        if response.status != 200:
            raise RuntimeError(f"{operation} answered {response.status}: {str(data)[:300]}")
        return data  # type: ignore[no-any-return]

    def close(self) -> None:
        self.conn.close()


def load(server: Server, size: int, log: Callable[[str], None]) -> None:
    """Create the table and its index, and write ``size`` items with 4 threads of
    BatchWriteItem; then check one Query of each kind answers a full page."""
    client = Http(server.port)
    try:
        client.call("CreateTable", CREATE)
        for _ in range(600):
            table = client.call("DescribeTable", {"TableName": TABLE})["Table"]
            statuses = [table["TableStatus"]] + [
                i["IndexStatus"] for i in table.get("GlobalSecondaryIndexes", [])
            ]
            if all(s == "ACTIVE" for s in statuses):
                break
            time.sleep(0.1)
    finally:
        client.close()
    started = time.monotonic()
    errors: list[str] = []

    def writer(start: int) -> None:
        conn = Http(server.port)
        try:
            for first in range(start * 25, size, 4 * 25):
                batch = [{"PutRequest": {"Item": item(n, size)}} for n in range(first, first + 25)]
                pending: dict[str, Any] = {TABLE: batch}
                while pending:
                    pending = conn.call("BatchWriteItem", {"RequestItems": pending})[
                        "UnprocessedItems"
                    ]
        except Exception as exc:
            errors.append(repr(exc))
        finally:
            conn.close()

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise RuntimeError(errors[0])
    check = Http(server.port)
    try:
        for workload in WORKLOADS:
            operation, body = request(workload, size, random.Random(1))
            answer = check.call(operation, body)
            if answer["Count"] != PAGE:
                raise RuntimeError(f"{workload} answered {answer['Count']} items, not {PAGE}")
    finally:
        check.close()
    log(f"    {server.name}: {size:,} items loaded in {time.monotonic() - started:.1f} s")


class HttpQueries(Contender):
    """One server answering one workload, one request at a time on one connection."""

    def __init__(self, server: Server, workload: str, size: int) -> None:
        self.name = server.name
        self.server = server
        self.workload = workload
        self.size = size
        self.rng = random.Random(7)
        self.http: Http | None = None

    def setup(self) -> None:
        self.http = Http(self.server.port)

    def op(self, i: int) -> None:
        assert self.http is not None
        operation, body = request(self.workload, self.size, self.rng)
        self.http.call(operation, body)

    def teardown(self) -> None:
        if self.http is not None:
            self.http.close()


class DirectQueries(Contender):
    """firstwrite in process (DirectClient on the loaded file): the engine's own cost of a
    workload, without HTTP in the way."""

    def __init__(self, path: Path, workload: str, size: int) -> None:
        self.name = f"in process: {workload}"
        self.path = path
        self.workload = workload
        self.size = size
        self.rng = random.Random(7)
        self.engine: Any = None
        self.client: Any = None

    def setup(self) -> None:
        from firstwrite.engine.api import Engine
        from firstwrite.engine.direct.client import DirectClient

        self.engine = Engine(self.path)
        self.client = DirectClient(self.engine)

    def op(self, i: int) -> None:
        operation, body = request(self.workload, self.size, self.rng)
        method = {"Query": self.client.query, "Scan": self.client.scan}[operation]
        method(**body)

    def teardown(self) -> None:
        if self.engine is not None:
            self.engine.close()


def measure(
    contenders: list[HttpQueries], settings: Settings, log: Callable[[str], None]
) -> list[Series]:
    """Requests per second of each contender, ``settings.reps`` slices of
    ``settings.duration`` seconds each, in rotating order, after one warm-up request.

    The clock is read after every request (not every 16 as for in-process contenders): a
    request to moto on 1e5 items takes about a second, and a slice must not take sixteen.
    """
    series = {c.name: Series(c.name, unit="requests/s") for c in contenders}
    for contender in contenders:
        contender.setup()
    try:
        for contender in contenders:
            contender.op(0)
        for rep in range(settings.reps):
            k = rep % len(contenders) if contenders else 0
            for contender in contenders[k:] + contenders[:k]:
                start = time.perf_counter()
                n = 0
                while True:
                    contender.op(n)
                    n += 1
                    elapsed = time.perf_counter() - start
                    if elapsed >= settings.duration:
                        break
                series[contender.name].values.append(n / elapsed)
            log(
                f"    rep {rep + 1}/{settings.reps}: "
                + ", ".join(f"{name}={s.values[-1]:,.1f}" for name, s in series.items())
            )
    finally:
        for contender in contenders:
            contender.teardown()
    return list(series.values())


def run(
    settings: Settings, log: Callable[[str], None], *, sizes: tuple[int, ...] = SIZES
) -> Section:
    """The benchmark; ``sizes`` (multiples of 100) and ``settings.http_servers`` (server names
    to keep) make it small for smoke tests."""
    http_settings = Settings(
        reps=settings.http_reps,
        duration=settings.http_duration,
        http_duration=settings.http_duration,
        http_reps=settings.http_reps,
        warmup=min(1.0, settings.http_duration / 2),
        quick=settings.quick,
    )
    section = Section(
        key="query",
        title="Query and Scan, table and index, 1e4 and 1e5 items (issue 13)",
        method=[
            f"One table of N items (N = {', '.join(f'{s:,}' for s in sizes)}), {PER_PARTITION} "
            f"items per partition, with a GSI grouping the same items differently "
            f"({PER_PARTITION} per index partition, projection ALL, so both return the same "
            "~200-byte items). Loaded over HTTP with BatchWriteItem (4 threads) into each "
            "server; each workload is checked to return a full page before it is measured.",
            f"Workloads, every request with `Limit={PAGE}`: *Query table* (one random "
            "partition), *Query index* (one random index partition), *Scan table* and *Scan "
            "index* (the first page).",
            "**Over HTTP**: one client, one persistent connection, one request at a time, "
            "against `firstwrite engine serve` (durability normal), moto_server "
            f"(moto {package_version('moto')}) and dynalite 4.0.0 (in memory), each loaded "
            f"with the same items; {http_settings.reps} repetitions of "
            f"{http_settings.duration:g} s per server in rotating order.",
            "**In process**: firstwrite's DirectClient on the loaded database file: the "
            "engine's own cost per request, with no HTTP in the way. The target is read here: "
            f"Query on the index at most 1.2x the time of Query on the table (a throughput "
            f"ratio of at least {INDEX_SHARE:.2f}). {max(settings.reps, 3)} repetitions of "
            f"{max(settings.duration, 0.5):g} s, interleaved, after 0.5 s of warm-up each.",
        ],
    )
    wanted = settings.http_servers
    dynalite, why_dynalite = ensure_dynalite(log, wanted)
    with scratch_dir("query-") as directory:
        for size in sizes:
            skipped: dict[str, str] = {}
            if dynalite is None:
                skipped["dynalite"] = why_dynalite
            ours = firstwrite_server("firstwrite", directory, f"firstwrite-{size}")
            servers = [ours, *peer_servers(directory, f"-{size}", dynalite)]
            if wanted is not None:
                servers = [s for s in servers if s.name in wanted]
            prepare = functools.partial(load, size=size, log=log)
            with started(servers, prepare, skipped, log) as live:
                for workload in WORKLOADS:
                    log(f"  {size:,} items, {workload} over HTTP")
                    contenders = [HttpQueries(s, workload, size) for s in live]
                    series = measure(contenders, http_settings, log)
                    section.tables.append(
                        Table(
                            title=f"{workload}, {size:,} items, over HTTP",
                            series=series,
                            ours=["firstwrite"],
                            skipped=dict(skipped),
                        )
                    )
                ours.stop()  # the in-process engine opens the file alone
                log(f"  {size:,} items, in process")
                path = directory / f"firstwrite-{size}.db"
                direct = [DirectQueries(path, workload, size) for workload in WORKLOADS]
                # A longer warm-up (the file was just opened, its pages are not cached yet),
                # and slices long enough to read a ratio on a busy machine even in quick mode.
                warm = replace(
                    settings,
                    warmup=max(settings.warmup, 0.5),
                    duration=max(settings.duration, 0.5),
                    reps=max(settings.reps, 3),
                )
                series, more = run_interleaved(direct, warm, log=log)
                for s in series:
                    s.unit = "requests/s"
                names = {w: f"in process: {w}" for w in WORKLOADS}
                section.tables.append(
                    Table(
                        title=f"firstwrite in process, {size:,} items: index vs table",
                        series=series,
                        ours=list(names.values()),
                        targets=[
                            Target(names["Query index"], names["Query table"], minimum=INDEX_SHARE),
                        ],
                        skipped=more,
                        notes=[
                            "Scan index vs Scan table, for the record: "
                            f"{_ratio(series, names['Scan index'], names['Scan table'])}."
                        ],
                    )
                )
    return section


def _ratio(series: list[Series], ours: str, peer: str) -> str:
    table = Table(title="", series=series)
    ratio = table.ratio(ours, peer)
    return "not measured" if ratio != ratio else f"{ratio:.2f}x the table's throughput"
