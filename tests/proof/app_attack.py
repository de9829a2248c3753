"""The two sides of the hostile proof against the demo and the console in a user's app, each
run in a spawned process of its own (as :mod:`attack` does for the engine).

:func:`victims` is an ordinary client of the app and of a peer server nobody attacks, called in
turn: GETs of one route over one keep-alive connection each, paced, each call's latency
recorded. :func:`attacker` runs inside the attack windows only, on *every* route it is given,
over raw sockets: header floods (one 100 KiB header, or 3,000 small ones), bodies of 1-byte
chunks, 16 MiB bodies (declared or chunked), slow-loris and idle connections
(:class:`attack._Attack`'s). Any 5xx is wrong; a refused request may be answered and closed, or
just closed.
"""

from __future__ import annotations

import http.client
import os
import select
import socket
import threading
import time
from collections.abc import Iterable, Iterator

from attack import _Attack

VICTIM_PACE_S = 0.002
BIG = 16 * 1024 * 1024


class _Client:
    """An ordinary client of one route: GETs over one keep-alive connection."""

    def __init__(self, url: str, path: str) -> None:
        host, port = url.removeprefix("http://").rsplit(":", 1)
        self.address, self.path, self.host = (host, int(port)), path, f"localhost:{port}"
        self.conn = http.client.HTTPConnection(*self.address, timeout=30)

    def call(self) -> tuple[int, float, int]:
        now = time.monotonic_ns()
        try:
            self.conn.request("GET", self.path, headers={"Host": self.host})
            response = self.conn.getresponse()
            response.read()
            status = response.status
        except (OSError, http.client.HTTPException):
            status = 0
            self.conn.close()
            self.conn = http.client.HTTPConnection(*self.address, timeout=30)
        return now, (time.monotonic_ns() - now) / 1e9, status


def victims(
    targets: list[tuple[str, str]], start_ns: int, end_ns: int
) -> list[list[tuple[int, float, int]]]:
    """One ordinary client of several servers (``(url, path)`` each), calling them in turn,
    paced, through the span: for each, ``(sent at, latency in s, status)`` of every call.
    Called in turn, the servers' figures share every moment of the machine's load."""
    clients = [_Client(url, path) for url, path in targets]
    samples: list[list[tuple[int, float, int]]] = [[] for _ in clients]
    while time.monotonic_ns() < start_ns:
        time.sleep(0.001)
    while time.monotonic_ns() < end_ns:
        for client, found in zip(clients, samples, strict=True):
            found.append(client.call())
        time.sleep(VICTIM_PACE_S)
    return samples


def _head(method: str, path: str, port: int, extra: Iterable[str] = ()) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"Host: localhost:{port}", *extra]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _one_byte_chunks(body: bytes) -> list[bytes]:
    """``body`` framed as 1-byte chunks, 2,048 to a send (built once: the attacker's CPU is
    the victim's too, on a small machine)."""
    pieces = []
    for i in range(0, len(body), 2048):
        pieces.append(
            b"".join(b"1\r\n%s\r\n" % body[j : j + 1] for j in range(i, min(i + 2048, len(body))))
        )
    return [*pieces, b"0\r\n\r\n"]


def _big_chunks(size: int) -> Iterator[bytes]:
    piece = b"x" * 65536
    for _ in range(size // len(piece)):
        yield b"%x\r\n%s\r\n" % (len(piece), piece)
    yield b"0\r\n\r\n"


def _big_body(size: int) -> Iterator[bytes]:
    piece = b"x" * 65536
    for _ in range(size // len(piece)):
        yield piece


class _AppAttack(_Attack):
    def __init__(
        self, url: str, windows: list[tuple[int, int]], routes: list[tuple[str, str]]
    ) -> None:
        super().__init__(url, windows, [])
        self.routes = routes
        self.host, port = url.removeprefix("http://").rsplit(":", 1)
        self.port = int(port)
        self.per_route: dict[str, set[str]] = {}

    def _send(self, kind: str, route: tuple[str, str], head: bytes, body: Iterable[bytes]) -> None:
        """One request: its head, then its body until the server answers or cuts it."""
        sent = time.monotonic_ns()
        answer = b""
        try:
            with socket.create_connection((self.host, self.port), timeout=60) as sock:
                try:
                    sock.sendall(head)
                    for piece in body:
                        if select.select([sock], [], [], 0)[0]:
                            break  # answered (or closed) before the whole body was sent
                        sock.sendall(piece)
                except OSError:
                    pass
                try:
                    answer = sock.recv(64)
                except OSError:
                    answer = b""
        except OSError as exc:
            with self.lock:
                self.wrong.append(f"{kind} {route}: could not connect: {exc!r}")
            return
        finally:
            with self.lock:
                self.busy.append((sent, time.monotonic_ns()))
        status = answer[9:12].decode("latin-1") if answer.startswith(b"HTTP/1.") else "closed"
        with self.lock:
            self.answers[f"{kind}:{status}"] += 1
            self.per_route.setdefault(f"{route[0]} {route[1]}", set()).add(kind)
            if status.startswith("5"):
                self.wrong.append(f"{kind} {route}: {answer!r}")

    def heads(self, offset: int) -> None:
        """Header floods on every route in turn: one 100 KiB header, then 3,000 small ones."""
        floods = (
            [f"X-{n}: v" for n in range(3000)],
            [f"X-Flood: {'a' * 100 * 1024}"],
        )
        built: dict[tuple[int, int], bytes] = {}  # (heads built once: see _one_byte_chunks)
        i = offset
        while self.window() is not None:
            method, path = route = self.routes[i % len(self.routes)]
            flood = (i // len(self.routes)) % 2  # (each route gets both, in turn)
            body = b"{}" if method == "POST" else b""
            head = built.get((i % len(self.routes), flood))
            if head is None:
                length = [f"Content-Length: {len(body)}", "Content-Type: application/json"]
                head = _head(method, path, self.port, floods[flood] + length)
                built[(i % len(self.routes), flood)] = head
            self._send("heads", route, head, [body])
            i += 1

    def chunks(self, offset: int) -> None:
        """Bodies of 64 KiB sent in 1-byte chunks, on every route in turn."""
        i = offset
        wire = _one_byte_chunks(b'{"a":"' + b"x" * (64 * 1024) + b'"}')
        while self.window() is not None:
            method, path = route = self.routes[i % len(self.routes)]
            extra = ["Transfer-Encoding: chunked", "Content-Type: application/json"]
            self._send("chunks", route, _head(method, path, self.port, extra), wire)
            i += 1

    def bodies(self, offset: int) -> None:
        """16 MiB bodies, declared and chunked, on every route in turn."""
        i = offset
        while self.window() is not None:
            method, path = route = self.routes[i % len(self.routes)]
            if (i // len(self.routes)) % 2:
                extra = [f"Content-Length: {BIG}", "Content-Type: application/json"]
                pieces: Iterable[bytes] = _big_body(BIG)
            else:
                extra = ["Transfer-Encoding: chunked", "Content-Type: application/json"]
                pieces = _big_chunks(BIG)
            self._send("bodies", route, _head(method, path, self.port, extra), pieces)
            i += 1


KINDS = ("heads", "chunks", "bodies", "slow")


def attacker(
    url: str, windows: list[tuple[int, int]], routes: list[tuple[str, str]], kind: str
) -> tuple[dict[str, int], list[str], list[tuple[int, int]], dict[str, list[str]]]:
    """Attack ``routes`` inside ``windows`` with ``kind`` (one of :data:`KINDS`, two threads
    each; ``slow``: 40 slow-loris and 40 idle connections per window). The answers by kind and
    status, what was wrong, when each request was busy, and the kinds each route got.

    The attacker runs at the lowest CPU priority (nice 19): a real one's CPU is its own
    machine's, and here it still sends flat out with whatever CPU the servers and the client
    leave idle."""
    os.nice(19)
    attack = _AppAttack(url, windows, routes)
    if kind == "slow":
        threads = [
            threading.Thread(target=attack.slow, args=(40,)),
            threading.Thread(target=attack.idle, args=(40,)),
        ]
    else:
        threads = [threading.Thread(target=getattr(attack, kind), args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    per_route = {route: sorted(kinds) for route, kinds in attack.per_route.items()}
    return dict(attack.answers), attack.wrong, attack.busy, per_route
