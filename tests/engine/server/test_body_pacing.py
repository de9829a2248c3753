"""Big request bodies are read at a bounded pace (issue 15, hole 3's last residue): however many
clients stream big bodies at once, the server reads at most a few of them at a time and no more
bytes a second than its pace allows, so the event loop keeps time for everyone else; each of
those clients still gets its own answer. A real server on loopback, real sockets, clients in
threads. (Nothing here is timed: the pace's bound is checked against the server's own clock.)
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from firstwrite.engine.api import Engine
from firstwrite.engine.server.app import ServerThread
from firstwrite.engine.server.bodies import READERS, BodyReader, Pace

TARGET = "DynamoDB_20120810."
HEADERS = {"Content-Type": "application/x-amz-json-1.0"}
MIB = 1024 * 1024
RATE = 24 * MIB  # slow enough that the bodies below overlap, fast enough for a short test
BURST = 256 * 1024
# What a reader may have read past its pace when it spends: its last piece, which uvicorn hands
# over as at most ~64 KiB buffered plus one socket read.
PIECE = 512 * 1024


class LoggedPace(Pace):
    """The server's pace, recording (loop time, bytes read so far) at every piece."""

    def __init__(self) -> None:
        super().__init__(RATE, BURST)
        self.log: list[tuple[float, int]] = []

    async def spend(self, size: int) -> None:
        import asyncio

        self.log.append((asyncio.get_running_loop().time(), self.spent + size))
        await super().spend(size)


@pytest.fixture
def served(engine: Engine) -> Iterator[tuple[ServerThread, str, LoggedPace]]:
    engine.execute(
        "CreateTable",
        {
            "TableName": "paced",
            "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
            "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
            "BillingMode": "PAY_PER_REQUEST",
        },
    )
    server = ServerThread(engine)
    pace = LoggedPace()
    server.app.bodies = BodyReader(server.app.max_body_bytes, pace)
    with server as url:
        yield server, url, pace


def _tiny_values(size: int) -> bytes:
    """A PutItem of ``size`` bytes: an item far over 400 KB, of tiny values."""
    head = b'{"TableName":"paced","Item":{"pk":{"S":"p"},"l":{"L":['
    value = b'{"N":"1"},'
    return head + value * ((size - len(head) - 13) // len(value)) + b'{"N":"1"}]}}}'


def _post(url: str, body: bytes, content_type: str = HEADERS["Content-Type"]) -> httpx.Response:
    headers = {"Content-Type": content_type, "X-Amz-Target": TARGET + "PutItem"}
    return httpx.post(url + "/", content=body, headers=headers, timeout=120)


def _batch_body(items: list[dict[str, Any]]) -> bytes:
    puts = [{"PutRequest": {"Item": i}} for i in items]
    return json.dumps({"RequestItems": {"paced": puts}}).encode()


def _batch(url: str, items: list[dict[str, Any]], timeout: float = 120) -> httpx.Response:
    headers = {**HEADERS, "X-Amz-Target": TARGET + "BatchWriteItem"}
    return httpx.post(url + "/", content=_batch_body(items), headers=headers, timeout=timeout)


def _race(calls: list[Any]) -> list[Any]:
    """Run each call on its own thread, all released at once; their results in order."""
    results: list[Any] = [None] * len(calls)
    barrier = threading.Barrier(len(calls))

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = calls[i]()
        except BaseException as exc:  # reported by the assertions below
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    return results


def test_big_bodies_are_read_a_few_at_a_time_at_the_pace(
    served: tuple[ServerThread, str, LoggedPace],
) -> None:
    server, url, pace = served
    big = _tiny_values(3 * MIB)
    valid = [{"pk": {"S": f"v{i}"}, "s": {"S": "v" * 400_000}} for i in range(5)]
    calls = [
        lambda: _post(url, big),  # screened: refused for its item size
        lambda: _post(url, big),
        lambda: _post(url, b"x" * (3 * MIB), "text/plain"),  # not JSON-typed: drained, 404
        lambda: _post(url, b"x" * (3 * MIB), "text/plain"),
        lambda: _batch(url, valid),  # a valid request: written
    ]
    answers = _race(calls)
    for answer in answers[:2]:
        assert isinstance(answer, httpx.Response), answer
        assert answer.status_code == 400, answer.text[:300]
        assert answer.json() == {
            "__type": "com.amazon.coral.validate#ValidationException",
            "message": "Item size has exceeded the maximum allowed size",
        }
    for answer in answers[2:4]:
        assert isinstance(answer, httpx.Response), answer
        assert answer.status_code == 404, answer.text[:300]
        assert b"UnknownOperationException" in answer.content
    assert isinstance(answers[4], httpx.Response), answers[4]
    assert answers[4].status_code == 200, answers[4].text[:300]
    assert answers[4].json() == {"UnprocessedItems": {}}
    for item in valid:
        assert server.app.engine.execute(
            "GetItem", {"TableName": "paced", "Key": {"pk": item["pk"]}}
        ) == {"Item": item}
    # Five bodies at once, never more than READERS read at a time...
    assert server.app.bodies.most_reading == READERS < len(calls)
    # ...and never faster than the pace: by each piece, what was read is within the rate since
    # the first, plus the burst and a piece in hand per reader.
    start = pace.log[0][0]
    total = 2 * len(big) + 2 * 3 * MIB + len(_batch_body(valid))
    assert pace.spent == total
    for at, read in pace.log:
        allowed = BURST + RATE * (at - start) + READERS * PIECE
        assert read <= allowed, f"{read} bytes read {at - start:.3f} s in: over {allowed:.0f}"
    # (An unpaced server reads these ~15 MiB of loopback in a few hundredths of a second.)
    assert pace.log[-1][0] - start >= (total - BURST - READERS * PIECE) / RATE


def test_a_body_refused_whatever_it_holds_is_read_and_dropped_then_answered(
    served: tuple[ServerThread, str, LoggedPace],
) -> None:
    server, url, pace = served
    budget = server.app._budget.available
    with httpx.Client(base_url=url, timeout=120) as http:
        # Past the 16 MiB limit: its whole body is read (paced, kept nowhere), then the 413,
        # which the client reads on the same connection, still usable afterwards.
        over = http.post("/", content=b"x" * (16 * MIB + 1), headers=HEADERS)
        assert over.status_code == 413
        assert over.headers["content-type"] == "application/problem+json"
        assert pace.spent >= 16 * MIB + 1
        again = http.post(
            "/",
            content=json.dumps({"TableName": "paced", "Key": {"pk": {"S": "none"}}}).encode(),
            headers={**HEADERS, "X-Amz-Target": TARGET + "GetItem"},
        )
        assert again.status_code == 200 and again.json() == {}
    assert server.app._budget.available == budget  # nothing held for it


def test_a_client_hanging_up_mid_body_frees_its_reader(
    served: tuple[ServerThread, str, LoggedPace],
) -> None:
    """A client announcing 64 MiB that sends one and hangs up: the server stops reading it
    then, and big bodies after it are read as before (its reader is not held forever)."""
    server, url, _ = served
    host, port = url.removeprefix("http://").rsplit(":", 1)
    for _ in range(READERS + 1):  # more than the readers there are
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            sock.sendall(
                b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-amz-json-1.0\r\n"
                b"Content-Length: %d\r\n\r\n" % (64 * MIB) + b"x" * MIB
            )
    # (Within the body read timeout, 60 s, which would free them too.)
    answer = _batch(url, [{"pk": {"S": "after"}, "s": {"S": "a" * 400_000}}], timeout=30)
    assert answer.status_code == 200, answer.text[:300]
    assert server.app.bodies.reading == 0
