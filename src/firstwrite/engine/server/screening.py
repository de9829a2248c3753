"""Screening big request bodies in a worker process, so that no one request holds the server.

The server (:mod:`.app`) hands every big body to :class:`Screener`, whose one worker process
(started on first use, niced, its address space capped with ``RLIMIT_AS``) decodes it and
returns a :class:`Verdict` the server acts on without decoding the body itself:

* ``invalid``: the body is not JSON DynamoDB can read (its SerializationException);
* ``answer``: the request is refused whatever the tables hold (checked by a scratch engine
  without tables in the worker, the engine's own code): this answer, after the server's own
  target and signature checks, in the order :func:`.wire.wire_call` makes them;
* ``request``: a write with an item over 400 KB, whose error depends on the tables: a small
  stand-in the engine answers the same way (:mod:`.reduction`), decoded in the worker;
* ``decode``: none of those (a valid big request, say): the server decodes the body as before,
  once; the byte budget admits one 16 MiB body at a time.

Why (issue 15's 16 MiB bodies of tiny values) and what it bounds: docs/engine.md, "What the
server is hardened for".
"""

from __future__ import annotations

import contextlib
import logging
import pickle
import signal
import struct
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, Literal, TypeVar

from ..api import operation_table
from ..errors import ITEM_TOO_LARGE, DynamoDBError
from ..wire import TARGETS, Answer, Decode, dumps, loads
from .reduction import Unreducible, reduce_request, weight

if TYPE_CHECKING:
    from ..api import Engine

__all__ = ["WORKER_ADDRESS_SPACE", "Screener", "Verdict", "key_names", "screen"]

log = logging.getLogger(__name__)

T = TypeVar("T")

# The worker's address space: room to decode a 16 MiB body of the worst shape (docs/engine.md,
# "What the server is hardened for"); past the cap the worker fails with MemoryError and the
# body is decoded by the server, as before.
WORKER_ADDRESS_SPACE = 2 * 1024 * 1024 * 1024
WORKER_NICE = 10  # the server's own threads come first on a busy machine
# A stand-in of more JSON values than this is not worth it: the body is decoded as it is.
MAX_STAND_IN_VALUES = 20_000
MAX_FAILURES = 5
_WRITES = frozenset({"PutItem", "BatchWriteItem", "TransactWriteItems"})


@dataclass(frozen=True)
class Verdict:
    """What the worker found (see the module docstring)."""

    kind: Literal["invalid", "answer", "request", "decode"]
    status: int = 0
    payload: bytes = b""
    request: Any = None

    def decode(self, body: bytes | bytearray | str) -> Any:
        """The body as :func:`.wire.wire_call` reads it: a ``decode`` that never decodes it."""
        if self.kind == "invalid":
            raise ValueError("a body DynamoDB cannot read")
        if self.kind == "answer":
            return Answer(self.status, self.payload)
        return self.request


DECODE = Verdict("decode")


def key_names(engine: Engine) -> frozenset[str]:
    """Every attribute name that is a key of some table or secondary index of ``engine``."""
    names: set[str] = set()
    for row in engine.storage.read(lambda reader: reader.tables()):
        names |= row.key_schema.names
        for index in row.indexes:
            names |= index.key.names
    return frozenset(names)


class Screener:
    """The server's side: one worker process, started on first use, restarted if it dies.

    The worker is a plain ``python -c`` child talking over its stdin and stdout (not
    multiprocessing, whose ``spawn`` would run the embedding program's ``__main__`` again in
    the child); it ends when its stdin closes, with the server.
    """

    def __init__(self, address_space: int = WORKER_ADDRESS_SPACE) -> None:
        self._address_space = address_space
        self._process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()  # one body at a time: the worker has one thread
        self._closed = False
        self.counts: dict[str, int] = dict.fromkeys(("invalid", "answer", "request", "decode"), 0)
        self.failures = 0
        self._failing = 0  # in a row: past MAX_FAILURES, no worker is started again

    @property
    def pid(self) -> int | None:
        """The worker's process id while it runs."""
        process = self._process
        return None if process is None or process.poll() is not None else process.pid

    def answer(
        self,
        engine: Engine,
        body: bytes | bytearray,
        target: bytes | None,
        answer: Callable[[Decode | None], T],
    ) -> T:
        """``answer(decode)`` for a big body, where ``decode`` is the worker's verdict (``None``:
        the body must be decoded, as it is when ``engine`` has interceptors, i.e. faults on)."""
        if engine.hooks.interceptors:
            return answer(None)
        keys = key_names(engine)
        verdict = self.screen(body, None if target is None else target.decode("latin-1"), keys)
        if verdict.kind == "decode":
            return answer(None)
        result = answer(verdict.decode)
        if verdict.kind == "request" and not key_names(engine) <= keys:
            # A table with new key names came meanwhile: the stand-in may have lacked one. It
            # changed nothing (it is refused before any write); answer from the body itself.
            return answer(None)
        return result

    def screen(self, body: bytes | bytearray, target: str | None, keys: frozenset[str]) -> Verdict:
        """The worker's verdict on ``body`` (blocks the calling thread, not the GIL)."""
        with self._lock:
            verdict = DECODE
            # A worker that died since the last body (killed: its death may not show yet) fails
            # this exchange: one more, on a fresh worker, before the body is decoded here.
            tries = 2 if self._process is not None else 1
            while tries and not self._closed and sys.executable and self._failing < MAX_FAILURES:
                tries -= 1
                try:
                    verdict = self._exchange(body, target, keys)
                    self._failing = 0
                    break
                except (OSError, EOFError, ValueError, pickle.UnpicklingError):
                    self.failures += 1
                    self._failing += 1
                    self._stop()
                    if not tries:
                        log.warning("the screening worker failed; the server decodes the body")
            self.counts[verdict.kind] += 1
        return verdict

    def _exchange(
        self, body: bytes | bytearray, target: str | None, keys: frozenset[str]
    ) -> Verdict:
        process = self._process
        if process is None or process.poll() is not None:
            process = self._process = subprocess.Popen(
                [sys.executable, "-c", _WORKER_MAIN, str(self._address_space)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
        assert process.stdin is not None and process.stdout is not None
        meta = pickle.dumps((len(body), target, keys))
        process.stdin.write(_LENGTH.pack(len(meta)) + meta)
        process.stdin.write(body)
        process.stdin.flush()
        verdict = pickle.loads(_read(process.stdout, _LENGTH.unpack(_read(process.stdout, 8))[0]))
        if not isinstance(verdict, Verdict):
            raise ValueError(f"not a verdict: {verdict!r}")
        return verdict

    def _stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        with contextlib.suppress(OSError):
            assert process.stdin is not None
            process.stdin.close()  # the worker's cue to end
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        assert process.stdout is not None
        process.stdout.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._stop()


_LENGTH = struct.Struct("!Q")
# Niced before its imports, which take a CPU for a second on a machine that may have two.
_WORKER_MAIN = (
    f"import os; getattr(os, 'nice', int)({WORKER_NICE}); "
    "from firstwrite.engine.server.screening import main; main()"
)


def _read(stream: IO[bytes], size: int) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise EOFError("the other side closed")
    return data


# --- the worker ------------------------------------------------------------------------------

_scratch: Engine | None = None


def main() -> None:
    """The worker process: verdicts on the bodies read from stdin, until it closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server stops it, by closing its stdin
    with contextlib.suppress(ImportError, OSError, ValueError, IndexError):
        import resource  # (POSIX only)

        limit = int(sys.argv[1])
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    requests, answers = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing else may write into the answers
    while True:
        try:
            head = _read(requests, 8)
        except EOFError:
            return
        size, target, keys = pickle.loads(_read(requests, _LENGTH.unpack(head)[0]))
        try:
            body = _read(requests, size)
        except MemoryError:  # past the address space: skip it, the server decodes it
            while size > 0:
                size -= len(_read(requests, min(size, 1 << 16)))
            verdict = DECODE
        else:
            verdict = screen(body, target, keys)
            del body
        data = pickle.dumps(verdict, protocol=pickle.HIGHEST_PROTOCOL)
        answers.write(_LENGTH.pack(len(data)) + data)
        answers.flush()


def _scratch_engine() -> Engine:
    """An engine with no tables: what it refuses, any engine refuses."""
    global _scratch
    if _scratch is None:
        from ..api import Engine

        _scratch = Engine()
    return _scratch


def screen(body: bytes, target: str | None, keys: frozenset[str]) -> Verdict:
    """The worker's verdict on one body (run in the worker; callable anywhere, for tests)."""
    try:
        return _screen(body, target, keys)
    except MemoryError:
        return DECODE


def _screen(body: bytes, target: str | None, keys: frozenset[str]) -> Verdict:
    try:
        request = loads(body, yielding=False)  # this process has no one else to yield to
    except ValueError:
        return Verdict("invalid")
    prefix, _, operation = (target or "").partition(".")
    service = TARGETS.get(prefix)
    if service is None or not operation:
        return Verdict("request", request={})  # the target's own error, whatever the body
    known = operation_table(service)
    if operation not in known or type(request) is not dict:
        # Refused before anything is read (an unknown operation, a body that is not an object).
        return _refusal(operation, request, service) or DECODE
    if service != "dynamodb" or operation not in _WRITES:
        return DECODE
    try:
        reduced = reduce_request(operation, request, keys)
    except Unreducible:
        return DECODE
    del request  # the heavy items are referenced only from here: free them now
    if reduced is None:
        return DECODE
    refused = _refused(operation, reduced.scratch, service)
    if refused is None:
        return DECODE
    if not _table_dependent(refused):
        return Verdict("answer", refused.status, dumps(refused.wire_body()))
    if not reduced.over:
        return DECODE  # maybe valid once the tables are there: the server decodes it
    # Refused whatever the tables hold (no engine writes an item over 400 KB), with an answer
    # that depends on them. The smaller stand-in must get as far as the first, and be small.
    again = _refused(operation, reduced.server, service)
    if again is None or (again.code, again.message) != (refused.code, refused.message):
        return DECODE
    if weight(reduced.server, MAX_STAND_IN_VALUES + 1) > MAX_STAND_IN_VALUES:
        return DECODE
    return Verdict("request", request=reduced.server)


def _refused(operation: str, request: Any, service: Any) -> DynamoDBError | None:
    """The scratch engine's refusal of ``request`` (``None``: it accepted it)."""
    try:
        _scratch_engine().execute(operation, request, wire=True, service=service)
    except DynamoDBError as error:
        # Without its traceback: its frames reach back to the caller's, which hold the body
        # and would keep it (16 MiB, say) in a cycle until the garbage collector ran.
        return error.with_traceback(None)
    return None


def _table_dependent(error: DynamoDBError) -> bool:
    """Whether an engine with tables may answer otherwise than the scratch engine did: it has
    none, so ResourceNotFoundException means it looked for one, and so does an item over
    400 KB (PutItem reports it just before a missing table; an existing table's key checks
    come first)."""
    return error.code == "ResourceNotFoundException" or error.message == ITEM_TOO_LARGE


def _refusal(operation: str, request: Any, service: Any) -> Verdict | None:
    """The scratch engine's answer, when it refuses ``request`` whatever the tables hold."""
    error = _refused(operation, request, service)
    if error is None or _table_dependent(error):
        return None
    return Verdict("answer", error.status, dumps(error.wire_body()))
