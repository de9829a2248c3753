"""The two sides of the hostile-input latency proof, each a spawned process of its own (so that
neither one's CPU or GIL is the other's latency).

:func:`victims` is an ordinary client of one or more servers: PutItem and GetItem on its own
table over one keep-alive connection to each, paced, recording each call's latency. :func:`attacker` runs only inside the attack
windows it is given: a corpus of hostile requests on a few connections, 16 MiB bodies of tiny
values (issue 15, hole 3), bodies past the limit and ``text/plain`` ones, slow-loris connections sending a header
byte at a time, and idle connections. Both return what they saw; every answer the attacker got
is judged by :func:`hostile.verdict` in the test.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import threading
import time
from collections import Counter
from typing import Any

from hostile import HEADERS, TARGET, verdict

VICTIM_TABLE = "victim"
VICTIM_PACE_S = 0.002


def _connection(url: str, timeout: float = 30.0) -> http.client.HTTPConnection:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return http.client.HTTPConnection(host, int(port), timeout=timeout)


def _call(
    conn: http.client.HTTPConnection, operation: str, body: bytes, **headers: str
) -> tuple[int, bytes]:
    conn.request("POST", "/", body, {**HEADERS, "X-Amz-Target": TARGET + operation, **headers})
    response = conn.getresponse()
    return response.status, response.read()


class _Victim:
    """One keep-alive connection to a server's endpoint: PutItem and GetItem in turn."""

    def __init__(self, url: str) -> None:
        self.url, self.conn, self.n = url, _connection(url), 0

    def call(self) -> tuple[int, float, int]:
        self.n += 1
        n = self.n
        if n % 2:
            item = {"pk": {"S": f"v{n % 50}"}, "n": {"N": str(n)}}
            operation, body = "PutItem", {"TableName": VICTIM_TABLE, "Item": item}
        else:
            key = {"pk": {"S": f"v{n % 50}"}}
            operation, body = "GetItem", {"TableName": VICTIM_TABLE, "Key": key}
        now = time.monotonic_ns()
        try:
            status, _ = _call(self.conn, operation, json.dumps(body).encode())
        except (OSError, http.client.HTTPException):
            status = 0
            self.conn.close()
            self.conn = _connection(self.url)
        return (now, (time.monotonic_ns() - now) / 1e9, status)


def victims(urls: list[str], start_ns: int, end_ns: int) -> list[list[tuple[int, float, int]]]:
    """An ordinary client of each server in ``urls``, calling them in turn, paced: for each,
    ``(sent at, latency in s, status)`` of every call between ``start_ns`` and ``end_ns``.
    Called in turn, the servers' figures share every moment of the machine's load (the
    second one, a peer nobody attacks, measures what an attack costs the machine)."""
    clients = [_Victim(url) for url in urls]
    samples: list[list[tuple[int, float, int]]] = [[] for _ in clients]
    while time.monotonic_ns() < start_ns:
        time.sleep(0.001)
    while time.monotonic_ns() < end_ns:
        for client, found in zip(clients, samples, strict=True):
            found.append(client.call())
        time.sleep(VICTIM_PACE_S)
    return samples


def warm_up() -> int:
    """Run in each pool process before the windows are set: its imports are done (and takes
    long enough that two calls land on two processes). Returns the process id."""
    time.sleep(0.5)
    return os.getpid()


def tiny_values_body(size: int) -> bytes:
    """A PutItem of ``size`` bytes made of one list of tiny numbers (issue 15, hole 3)."""
    head = b'{"TableName":"hostile","Item":{"pk":{"S":"big"},"l":{"L":['
    tail = b"]}}}"
    value = b'{"N":"1"},'
    count = (size - len(head) - len(tail)) // len(value)
    return head + value * count + b'{"N":"1"}' + tail


class _Attack:
    def __init__(self, url: str, windows: list[tuple[int, int]], corpus: list[tuple[str, bytes]]):
        self.url = url
        self.windows = windows
        self.corpus = corpus
        self.lock = threading.Lock()
        self.answers: Counter[str] = Counter()
        self.wrong: list[str] = []
        self.busy: list[tuple[int, int]] = []  # (sent, answered) of each big request
        self.done = windows[-1][1]

    def window(self) -> tuple[int, int] | None:
        """The current attack window, waiting for the next one; None after the last."""
        while (now := time.monotonic_ns()) < self.done:
            for start, end in self.windows:
                if start <= now < end:
                    return start, end
            time.sleep(0.005)
        return None

    def judge(self, kind: str, status: int, body: bytes, sent: int) -> None:
        class _Response:  # the two things verdict() reads, without httpx in the loop
            status_code = status
            content = body
            text = body.decode("utf-8", "replace")

            def json(self) -> Any:
                return json.loads(body)

        problem = verdict(_Response(), sent)  # type: ignore[arg-type]
        with self.lock:
            self.answers[f"{kind}:{status}"] += 1
            if problem is not None:
                self.wrong.append(f"{kind}: {problem}")

    def junk(self, offset: int) -> None:
        conn = _connection(self.url)
        i = offset
        while self.window() is not None:
            operation, body = self.corpus[i % len(self.corpus)]
            i += 7
            try:
                status, answer = _call(conn, operation, body)
            except (OSError, http.client.HTTPException) as exc:
                with self.lock:
                    self.wrong.append(f"junk: {exc!r}")
                conn.close()
                conn = _connection(self.url)
                continue
            self.judge("junk", status, answer, len(body))

    def big(self, plain: bool = False) -> None:
        """16 MiB bodies of tiny values and bodies past 16 MiB, one after the other; ``plain``:
        16 MiB ``text/plain`` bodies instead (DynamoDB's 404, whatever they hold)."""
        bodies = [tiny_values_body(16 * 1024 * 1024 - 64), b"x" * (16 * 1024 * 1024 + 1)]
        kind, headers = "big", {}
        if plain:
            bodies, kind, headers = (
                [b"x" * (16 * 1024 * 1024)],
                "plain",
                {"Content-Type": "text/plain"},
            )
        i = 0
        while self.window() is not None:
            body = bodies[i % len(bodies)]
            i += 1
            conn = _connection(self.url, timeout=120)
            sent = time.monotonic_ns()
            try:
                status, answer = _call(conn, "PutItem", body, **headers)
            except (OSError, http.client.HTTPException) as exc:
                # A server may close on a refused oversize body before reading it all.
                status, answer = (-1, repr(exc).encode())
            finally:
                conn.close()
                # It may outlast its window: the quiet window after it is not quiet meanwhile.
                with self.lock:
                    self.busy.append((sent, time.monotonic_ns()))
            if status != -1 or len(body) <= 16 * 1024 * 1024:
                self.judge(kind, status, answer, len(body))

    def slow(self, count: int) -> None:
        """``count`` connections per window that send a request's head one byte at a time
        (reopened when the server cuts them, all closed when the window ends)."""
        head = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-amz-json-1.0\r\n"
        while (window := self.window()) is not None:
            sent = dict.fromkeys(self._open(count, []), 0)  # bytes of the head sent so far
            while time.monotonic_ns() < window[1]:
                for sock, n in list(sent.items()):
                    try:
                        sock.sendall(head[n % len(head) : n % len(head) + 1])
                        sent[sock] = n + 1
                    except OSError:
                        sock.close()
                        del sent[sock]
                        self._count("slow:cut")
                for sock in self._open(count - len(sent), []):
                    sent[sock] = 0
                time.sleep(min(0.5, max(0.0, (window[1] - time.monotonic_ns()) / 1e9)))
            for sock in sent:
                sock.close()

    def idle(self, count: int) -> None:
        """``count`` connections per window that send nothing."""
        while (window := self.window()) is not None:
            socks = self._open(count, [])
            time.sleep(max(0.0, (window[1] - time.monotonic_ns()) / 1e9))
            for sock in socks:
                sock.close()

    def _open(self, count: int, socks: list[socket.socket]) -> list[socket.socket]:
        while len(socks) < count:
            try:
                socks.append(socket.create_connection(_address(self.url), timeout=5))
            except OSError:
                self._count("connect:refused")
                break
            self._count("connections:opened")
        return socks

    def _count(self, name: str) -> None:
        with self.lock:
            self.answers[name] += 1


def _address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


KINDS = ("junk", "big", "slow", "idle")  # and "plain"


def attacker(
    url: str,
    windows: list[tuple[int, int]],
    corpus: list[tuple[str, bytes]],
    connections: int,
    kinds: tuple[str, ...] = KINDS,
) -> tuple[dict[str, int], list[str], list[tuple[int, int]]]:
    """Attack inside ``windows`` (monotonic ns) with the ``kinds`` of attack named; the answers
    by kind and status, what was wrong with any of them, and when each big request was sent
    and answered (one may run past its window)."""
    attack = _Attack(url, windows, corpus)
    threads = []
    if "junk" in kinds:
        threads += [threading.Thread(target=attack.junk, args=(i,)) for i in range(connections)]
    # (One thread per "big" or "plain" named: several stream their bodies at once.)
    threads += [threading.Thread(target=attack.big) for _ in range(kinds.count("big"))]
    threads += [
        threading.Thread(target=attack.big, args=(True,)) for _ in range(kinds.count("plain"))
    ]
    if "slow" in kinds:
        threads.append(threading.Thread(target=attack.slow, args=(40,)))
    if "idle" in kinds:
        threads.append(threading.Thread(target=attack.idle, args=(40,)))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return dict(attack.answers), attack.wrong, attack.busy
