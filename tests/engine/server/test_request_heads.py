"""What one connection may cost the server: its request head, its chunks, what it leaves behind.

Issue 27, findings 2 and 6, against real servers on loopback: headers of any size were accepted
(and kept, with the closed connection, until a full garbage collection: 6 requests of 32 MiB
headers took a server from 55 to 310 MiB, still there seconds later), and a body of 1-byte
chunks cost the event loop a Python call per byte (another client's p99 went from 8 to 229 ms).
"""

from __future__ import annotations

import gc
import re
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from firstwrite.engine.api import Engine
from firstwrite.engine.server.app import ServerThread
from firstwrite.engine.server.connection import Limits

HEAD_LIMIT = 64 * 1024  # Limits().max_header_bytes, the default
FIELD_LIMIT = 100  # Limits().max_headers
DYNAMODB_LIMIT = 16 * 1024  # the engine's line and header fields (DynamoDB's): 400 past it
GENERIC = Limits()  # without DynamoDB's limits (as the demo's server runs)
FREE_CHUNKS = Limits().free_chunks


def _address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def _rss_mib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    line = next(line for line in status.splitlines() if line.startswith("VmRSS"))
    return int(line.split()[1]) // 1024


def _answer(sock: socket.socket) -> bytes:
    """One response (head and Content-Length body), or what came before the server closed."""
    data = b""
    try:
        while True:
            head, found, body = data.partition(b"\r\n\r\n")
            if found:
                length = next(
                    (
                        int(line.split(b":", 1)[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ),
                    0,
                )
                if len(body) >= length:
                    return data
            piece = sock.recv(65536)
            if not piece:
                return data
            data += piece
    except OSError:
        return data


def _flood(url: str, size: int) -> bytes:
    """A GET with one header of ``size`` bytes, sent until the server stops reading."""
    with socket.create_connection(_address(url), timeout=30) as sock:
        try:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\nX-Flood: ")
            block = b"a" * (1024 * 1024)
            for _ in range(size // len(block)):
                sock.sendall(block)
            sock.sendall(b"\r\n\r\n")
        except OSError:  # the server answered 431 and closed: the rest is refused
            pass
        return _answer(sock)


def test_a_header_flood_is_431_and_leaves_no_memory_behind(
    cli_server: Callable[..., Any],
) -> None:
    server = cli_server()
    time.sleep(0.5)
    baseline = _rss_mib(server.process.pid)
    answers = [_flood(server.url, 32 * 1024 * 1024) for _ in range(6)]
    time.sleep(1.0)
    after = _rss_mib(server.process.pid)
    for answer in answers:  # (a client still sending may see its connection reset instead)
        assert answer == b"" or answer.startswith(b"HTTP/1.1 431 "), answer[:200]
    assert any(answers), "no 431 answer was read at all"
    assert after <= baseline * 1.1 + 2, f"RSS {baseline} MiB before 6 floods, {after} MiB after"


@pytest.mark.parametrize("size", [HEAD_LIMIT - 200, HEAD_LIMIT + 1])
def test_the_head_limit_counts_the_line_and_every_header(engine: Engine, size: int) -> None:
    with (
        ServerThread(engine, limits=GENERIC) as url,
        socket.create_connection(_address(url), timeout=10) as sock,
    ):
        head = b"GET / HTTP/1.1\r\nHost: localhost\r\n"
        filler = size - len(head) - len(b"X-A: \r\n\r\n")
        sock.sendall(head + b"X-A: " + b"a" * filler + b"\r\n\r\n")
        answer = _answer(sock)
    status = b"200" if size <= HEAD_LIMIT else b"431"
    assert answer.startswith(b"HTTP/1.1 " + status), answer[:200]
    if status == b"431":
        assert b"application/problem+json" in answer and b"connection: close" in answer


@pytest.mark.parametrize("fields", [FIELD_LIMIT, FIELD_LIMIT + 1])
def test_the_header_fields_of_a_request_are_limited_too(engine: Engine, fields: int) -> None:
    # 3,000 small headers (30 KB, under the byte limit) were each a call into Python, then a
    # scope every middleware scanned: milliseconds of the event loop per request.
    head = b"GET / HTTP/1.1\r\nHost: localhost\r\n"
    head += b"".join(b"X-%d: v\r\n" % i for i in range(fields - 1)) + b"\r\n"
    with ServerThread(engine) as url, socket.create_connection(_address(url), timeout=10) as sock:
        sock.sendall(head)
        answer = _answer(sock)
    status = b"200" if fields <= FIELD_LIMIT else b"431"
    assert answer.startswith(b"HTTP/1.1 " + status), answer[:200]
    if status == b"431":
        assert b"application/problem+json" in answer and b"connection: close" in answer
        assert b"at most %d header fields" % FIELD_LIMIT in answer


def _request(url: str, request: bytes) -> bytes:
    with socket.create_connection(_address(url), timeout=10) as sock:
        sock.sendall(request)
        return _answer(sock)


@pytest.mark.parametrize("over", [False, True])
def test_the_engine_limits_the_request_line_to_16_kb_as_dynamodb(
    engine: Engine, over: bool
) -> None:
    """DynamoDB refuses a request line over 16 KB with a 400 (ScyllaDB's test_manual_requests.py,
    test_too_large_request_line, run against DynamoDB), not with the signature error or 404 a
    shorter unknown path gets."""
    line = b"GET /%s HTTP/1.1\r\n"
    path = b"x" * (DYNAMODB_LIMIT - len(line % b"") + (1 if over else 0))
    assert len(line % path) == DYNAMODB_LIMIT + (1 if over else 0)
    with ServerThread(engine) as url:
        answer = _request(url, line % path + b"Host: localhost\r\n\r\n")
    if over:
        assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]
        assert b"application/problem+json" in answer and b"connection: close" in answer
        assert b"a request's line is limited to 16384 bytes" in answer
    else:
        assert answer.startswith(b"HTTP/1.1 404 "), answer[:200]  # no such path


@pytest.mark.parametrize("over", [False, True])
def test_the_engine_limits_the_header_fields_to_16_kb_as_dynamodb(
    engine: Engine, over: bool
) -> None:
    """DynamoDB refuses header fields over 16 KB together with a 400 (ScyllaDB's
    test_manual_requests.py, test_too_large_request_headers): each field counts its name, value,
    ``: `` and CRLF."""
    fields = [b"Host: localhost", b"X-A: " + b"a" * 8000]
    used = sum(len(field) + 2 for field in fields)
    fields.append(b"X-B: " + b"b" * (DYNAMODB_LIMIT - used - len(b"X-B: \r\n") + over))
    assert sum(len(field) + 2 for field in fields) == DYNAMODB_LIMIT + over
    with ServerThread(engine) as url:
        answer = _request(url, b"GET / HTTP/1.1\r\n" + b"\r\n".join(fields) + b"\r\n\r\n")
    if over:
        assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]
        assert b"connection: close" in answer
        assert b"a request's header fields are limited to 16384 bytes together" in answer
    else:
        assert answer.startswith(b"HTTP/1.1 200 ") and b"healthy: " in answer, answer[:200]


def test_a_request_refused_in_the_read_that_ends_its_head_never_reaches_the_app(
    engine: Engine,
) -> None:
    """Its app's task is cancelled before it starts: a page rendered for a refused request
    cost the event loop more than the refusal (the demo's console, under 1-byte chunks)."""
    calls: list[str] = []

    async def probe(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            calls.append(scope["method"])
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"probed"})

    tiny = b"1\r\na\r\n" * (FREE_CHUNKS + 200) + b"0\r\n\r\n"
    with ServerThread(engine, mounts={"/probe": probe}) as url:
        with socket.create_connection(_address(url), timeout=10) as sock:
            sock.sendall(
                b"PUT /probe/x HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n" + tiny
            )
            refused = _answer(sock)
        time.sleep(0.2)
        with socket.create_connection(_address(url), timeout=10) as sock:
            sock.sendall(b"GET /probe/x HTTP/1.1\r\nHost: localhost\r\n\r\n")
            served = _answer(sock)
    assert refused.startswith(b"HTTP/1.1 400 "), refused[:200]
    assert served.startswith(b"HTTP/1.1 200 ") and b"probed" in served, served[:300]
    assert calls == ["GET"]


def _closed(sock: socket.socket, within: float = 5.0) -> bool:
    """Whether the server has closed ``sock`` (waiting up to ``within`` seconds for it to)."""
    sock.settimeout(within)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_a_request_answered_before_its_body_arrived_closes_its_connection(
    engine: Engine,
) -> None:
    """The rest of the body is not read (16 MiB bodies sent to pages that ignore them cost the
    demo's event loop every byte): the connection closes once the answer is written."""
    # (The health check answers without reading a body.)
    head = b"GET / HTTP/1.1\r\nHost: localhost\r\nContent-Length: %d\r\n\r\n" % (16 << 20)
    with ServerThread(engine) as url, socket.create_connection(_address(url), timeout=10) as sock:
        sock.sendall(head + b"x" * 65536)
        answer = _answer(sock)
        assert answer.startswith(b"HTTP/1.1 200 ") and b"healthy: " in answer, answer[:300]
        assert _closed(sock), "the connection stayed open, reading the rest of the body"


def test_a_request_whose_body_arrived_keeps_its_connection(engine: Engine) -> None:
    """A body that arrived whole before the answer, read or not, leaves the connection open."""
    request = b"GET / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n\r\n{}"
    with ServerThread(engine) as url, socket.create_connection(_address(url), timeout=10) as sock:
        for _ in range(3):
            sock.sendall(request)
            answer = _answer(sock)
            assert answer.startswith(b"HTTP/1.1 200 ") and b"healthy: " in answer, answer[:300]


def test_a_pipelined_request_whose_body_is_arriving_keeps_its_connection(engine: Engine) -> None:
    """The answer to a whole request, sent while the next request's body is still arriving,
    leaves the connection open: that body is the next request's, not the answered one's."""
    first = b"GET / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n\r\n{}"
    second = (  # a request whose app reads its body
        b"POST / HTTP/1.1\r\nHost: localhost\r\nX-Amz-Target: DynamoDB_20120810.ListTables\r\n"
        b"Content-Type: application/x-amz-json-1.0\r\nContent-Length: 4\r\n\r\n"
    )
    with ServerThread(engine) as url, socket.create_connection(_address(url), timeout=10) as sock:
        sock.sendall(first + second + b"{ ")  # the second request's body half sent
        answer = _answer(sock)
        assert answer.startswith(b"HTTP/1.1 200 ") and b"healthy: " in answer, answer[:300]
        assert not _closed(sock, within=1.0), "the connection closed under the next request's body"
        sock.sendall(b" }")
        answer = _answer(sock)
        assert answer.startswith(b"HTTP/1.1 200 ") and b"TableNames" in answer, answer[:300]


def test_pipelined_requests_each_get_the_whole_limit(engine: Engine) -> None:
    """Two requests in one write, each head just under the limit: both answered."""
    head = b"GET / HTTP/1.1\r\nHost: localhost\r\nX-A: "
    one = head + b"a" * (HEAD_LIMIT - len(head) - 100) + b"\r\n\r\n"
    with (
        ServerThread(engine, limits=GENERIC) as url,
        socket.create_connection(_address(url), timeout=10) as sock,
    ):
        sock.sendall(one + one)
        data = b""
        deadline = time.monotonic() + 10
        while data.count(b"HTTP/1.1 200") < 2 and time.monotonic() < deadline:
            data += sock.recv(65536)
    assert data.count(b"HTTP/1.1 200") == 2, data[:300]


def _live(kind: str) -> int:
    return sum(1 for thing in gc.get_objects() if type(thing).__name__ == kind)


def test_a_closed_connection_is_freed_without_the_garbage_collector(engine: Engine) -> None:
    """No reference cycle among a connection's objects: with the collector off, closing
    connections of every kind (health check, data plane, admin API, unknown path, refused head)
    leaves none of their protocols or request cycles alive."""
    requests = [
        b"GET / HTTP/1.1\r\nHost: localhost\r\nX-Big: " + b"a" * 60000 + b"\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: localhost\r\nX-Amz-Target: DynamoDB_20120810.ListTables\r\n"
        b"Content-Type: application/x-amz-json-1.0\r\nContent-Length: 2\r\n\r\n{}",
        b"GET /_firstwrite/clock HTTP/1.1\r\nHost: localhost\r\n\r\n",
        b"GET /nowhere HTTP/1.1\r\nHost: localhost\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: localhost\r\nX-Big: " + b"a" * (HEAD_LIMIT + 10) + b"\r\n\r\n",
    ]
    with ServerThread(engine) as url:
        for request in requests[:2]:  # warm up: whatever is created once, lazily
            with socket.create_connection(_address(url), timeout=10) as sock:
                sock.sendall(request)
                _answer(sock)
        time.sleep(0.2)
        gc.collect()
        gc.disable()
        try:
            for request in requests * 2:
                with socket.create_connection(_address(url), timeout=10) as sock:
                    sock.sendall(request)
                    assert _answer(sock).startswith(b"HTTP/1.1 "), request[:60]
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and _live("BoundedHttpToolsProtocol"):
                time.sleep(0.05)
            left = _live("BoundedHttpToolsProtocol"), _live("RequestResponseCycle")
        finally:
            gc.enable()
    assert left == (0, 0), f"protocols and request cycles alive after close: {left}"


def _latencies(url: str, stop: threading.Event, out: list[float]) -> None:
    with socket.create_connection(_address(url), timeout=30) as sock:
        while not stop.is_set():
            started = time.perf_counter()
            sock.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
            data = b""
            while b"\r\n\r\n" not in data:
                data += _received(sock)
            head, _, body = data.partition(b"\r\n\r\n")
            found = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
            assert found is not None, head
            length = int(found[1])
            while len(body) < length:
                body += _received(sock)
            assert body.startswith(b"healthy: "), body
            out.append(time.perf_counter() - started)
            time.sleep(0.002)


def _received(sock: socket.socket) -> bytes:
    data = sock.recv(4096)
    if not data:
        raise ConnectionError("the server closed the measuring connection")
    return data


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q / 100))]


def test_a_body_of_tiny_chunks_is_refused_before_it_costs_other_clients(
    cli_server: Callable[..., Any],
) -> None:
    server = cli_server()
    quiet: list[float] = []
    stop = threading.Event()
    measuring = threading.Thread(target=_latencies, args=(server.url, stop, quiet))
    measuring.start()
    time.sleep(1.5)
    stop.set()
    measuring.join()
    loud: list[float] = []
    stop = threading.Event()
    measuring = threading.Thread(target=_latencies, args=(server.url, stop, loud))
    measuring.start()
    started = time.perf_counter()
    with socket.create_connection(_address(server.url), timeout=60) as sock:
        try:
            sock.sendall(
                b"POST / HTTP/1.1\r\nHost: localhost\r\n"
                b"X-Amz-Target: DynamoDB_20120810.PutItem\r\n"
                b"Content-Type: application/x-amz-json-1.0\r\nTransfer-Encoding: chunked\r\n\r\n"
            )
            block = b"1\r\na\r\n" * 65536  # 64 KiB of payload, 384 KiB on the wire
            for _ in range(128):  # 8 MiB of payload
                sock.sendall(block)
            sock.sendall(b"0\r\n\r\n")
        except OSError:  # refused and closed while we were still sending
            pass
        answer = _answer(sock)
    took = time.perf_counter() - started
    time.sleep(0.3)
    stop.set()
    measuring.join()
    assert answer == b"" or answer.startswith(b"HTTP/1.1 400 "), answer[:200]
    assert took < 5, f"the server read tiny chunks for {took:.1f} s"
    quiet_p99, loud_p99 = _percentile(quiet, 99), _percentile(loud, 99)
    # Within 2x of the quiet p99, or under 100 ms: before the fix the other client's p99 was
    # 229 ms (p50 95 ms); on a loaded 2-core machine a handful of samples reach 25 ms with no
    # attack at all, so a tighter floor here measured the machine. The 2x bound under attack is
    # the hostile proof's (tests/proof, `make proof-hostile`).
    assert loud_p99 <= max(2 * quiet_p99, 0.1), (quiet_p99, loud_p99)


def test_a_body_of_reasonable_chunks_is_read(engine: Engine) -> None:
    engine.execute(
        "CreateTable",
        {
            "TableName": "chunked",
            "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
            "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
            "BillingMode": "PAY_PER_REQUEST",
        },
    )
    body = b'{"TableName":"chunked","Item":{"pk":{"S":"k"},"v":{"S":"' + b"x" * 300_000 + b'"}}}'
    # The free chunks tiny, then 4 KiB ones: their average over 1 KiB soon enough.
    pieces = [body[i : i + 1] for i in range(FREE_CHUNKS)]
    rest = body[FREE_CHUNKS:]
    pieces += [rest[i : i + 4096] for i in range(0, len(rest), 4096)]
    wire = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"
    with ServerThread(engine) as url, socket.create_connection(_address(url), timeout=30) as sock:
        sock.sendall(
            b"POST / HTTP/1.1\r\nHost: localhost\r\nX-Amz-Target: DynamoDB_20120810.PutItem\r\n"
            b"Content-Type: application/x-amz-json-1.0\r\nTransfer-Encoding: chunked\r\n\r\n" + wire
        )
        answer = _answer(sock)
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:300]
    item = engine.execute("GetItem", {"TableName": "chunked", "Key": {"pk": {"S": "k"}}})
    assert len(item["Item"]["v"]["S"]) == 300_000
