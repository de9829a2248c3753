"""Instruction counts of chosen pieces of a Python program, by valgrind's callgrind.

On a shared, noisy machine a time ratio swings by several per cent from run to run; the number
of instructions a piece of code executes does not (it depends on the code and its data only).
The child program wraps each piece it wants counted in :func:`measured`, which runs it inside a
ctypes callback called from C; callgrind collects only inside that callback
(``--toggle-collect=closure_fcn``, ctypes' callback entry) and writes one dump at its end
(``--dump-after``). Nothing else in the program uses ctypes callbacks, so the dumps are exactly
the measured pieces, in order; start-up, imports and set-up are never counted.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path

_ENTRY = "closure_fcn"  # CPython's ctypes: every callback from C into Python enters here
_CMP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
_TOTALS = re.compile(rb"^totals:\s+(\d+)", re.MULTILINE)


def available() -> str | None:
    """Why instructions cannot be counted here, or None."""
    if shutil.which("valgrind") is None:
        return "valgrind is not installed"
    return None


def measured(piece: Callable[[], object]) -> None:
    """Run ``piece()`` where callgrind counts it: from a comparison callback of libc's
    ``qsort`` on two elements (called exactly once). Its exceptions propagate."""
    failure: list[BaseException] = []

    def compare(_a: int | None, _b: int | None) -> int:
        try:
            piece()
        except BaseException as exc:  # ctypes would print and swallow it
            failure.append(exc)
        return 0

    callback = _CMP(compare)
    pair = (ctypes.c_int * 2)(0, 1)
    ctypes.CDLL(None).qsort(pair, 2, ctypes.sizeof(ctypes.c_int), callback)
    if failure:
        raise failure[0]


def count(
    args: Sequence[str], *, timeout: float, env: dict[str, str] | None = None
) -> tuple[list[int], str]:
    """Run ``python args...`` under callgrind; the instructions of each :func:`measured` piece
    it ran, in order, and its standard output. Raises ``RuntimeError`` if it fails."""
    with tempfile.TemporaryDirectory(prefix="callgrind-") as scratch:
        out = Path(scratch) / "cg.out"
        command = [
            "valgrind",
            "--tool=callgrind",
            "--collect-atstart=no",
            f"--toggle-collect={_ENTRY}",
            f"--dump-after={_ENTRY}",
            f"--callgrind-out-file={out}",
            sys.executable,
            *args,
        ]
        child_env = {**os.environ, **(env or {}), "PYTHONHASHSEED": "0"}
        done = subprocess.run(
            command, capture_output=True, timeout=timeout, env=child_env, check=False
        )
        if done.returncode != 0:
            tail = done.stderr.decode(errors="replace")[-2000:]
            raise RuntimeError(f"callgrind run failed ({done.returncode}): {tail}")
        # cg.out.1, cg.out.2, ...: one dump per measured piece (cg.out: what was left at exit)
        dumps = sorted(Path(scratch).glob("cg.out.*"), key=lambda p: int(p.suffix[1:]))
        counts = []
        for dump in dumps:
            found = _TOTALS.search(dump.read_bytes())
            counts.append(int(found.group(1)) if found else 0)
        return counts, done.stdout.decode()


def count_pieces(op: Callable[[int], object], warmup: int, n: int, reps: int) -> None:
    """In a counted child program: ``op(i)`` ``warmup`` times uncounted, then ``reps`` counted
    pieces of ``n`` calls each (``i`` goes on counting, so each call can use a fresh key)."""
    for i in range(warmup):
        op(i)
    for rep in range(reps):
        first = warmup + rep * n

        def piece(first: int = first) -> None:
            for i in range(first, first + n):
                op(i)

        measured(piece)


def count_named(
    ops: Mapping[Hashable, Callable[[int], object]], n: int, reps: int, *, warmup: int = 10
) -> None:
    """In a counted child program: :func:`count_pieces` of each op in turn, then, as the last
    line, the JSON list naming each piece (a tuple name as a list), as
    :func:`least_per_piece` reads it."""
    pieces: list[object] = []
    for name, op in ops.items():
        count_pieces(op, warmup, n, reps)
        pieces += [list(name) if isinstance(name, tuple) else name] * reps
    print(json.dumps(pieces))


Counted = dict[str, dict[str, list[float]]]
"""Instructions per unit by scenario, then contender: one value per counted piece."""


def count_module(module: str, args: Sequence[str], *, per: int) -> tuple[Counted, str | None]:
    """Run ``python -m module args...`` (this checkout's ``bench`` and ``src`` first on the path)
    under callgrind. The program prints, as its last line, a JSON list of ``[scenario,
    contender]``, one per piece it counted, in order; each piece's count is divided by ``per``
    (the units it ran) and given in thousands. ``({}, why)`` when nothing could be counted."""
    why = available()
    if why is not None:
        return {}, why
    root = Path(__file__).resolve().parents[1]
    path = f"{root}{os.pathsep}{root / 'src'}"  # this checkout's firstwrite, not an install's
    try:
        counts, out = count(["-m", module, *args], timeout=1800, env={"PYTHONPATH": path})
    except (RuntimeError, OSError) as exc:
        return {}, str(exc)
    pieces = json.loads(out.strip().splitlines()[-1])
    if len(counts) < len(pieces):
        return {}, f"callgrind wrote {len(counts)} dumps for {len(pieces)} pieces"
    values: Counted = {}
    for (scenario, name), total in zip(pieces, counts, strict=False):
        values.setdefault(scenario, {}).setdefault(name, []).append(total / per / 1000)
    return values, None


def sources_at(revision: str, root: Path, directory: Path) -> Path:
    """``root``'s ``src`` folder as of git ``revision``, extracted into ``directory``: the code
    a change is counted against."""
    archive = subprocess.run(
        ["git", "-C", str(root), "archive", revision, "src"], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(directory)], input=archive, check=True)
    return directory / "src"


def least_per_piece(
    module: str, args: Sequence[str], *, per: int, src: Path | None = None
) -> dict[Hashable, float]:
    """Run ``python -m module args...`` under callgrind (``src``: the ``src`` folder whose
    firstwrite is counted, e.g. :func:`sources_at`'s; default this checkout's). The program
    prints, as its last line, a JSON list naming each piece it counted, in order (a string, or a
    list made a tuple); the answer is the least count of each name, divided by ``per`` (the
    units a piece ran), in thousands. Raises ``RuntimeError`` when callgrind fails."""
    root = Path(__file__).resolve().parents[1]
    path = f"{root}{os.pathsep}{src if src is not None else root / 'src'}"
    counts, out = count(["-m", module, *args], timeout=1800, env={"PYTHONPATH": path})
    pieces = json.loads(out.strip().splitlines()[-1])
    if len(counts) < len(pieces):
        raise RuntimeError(f"callgrind wrote {len(counts)} dumps for {len(pieces)} pieces")
    values: dict[Hashable, list[float]] = {}
    for piece, total in zip(pieces, counts, strict=False):
        name = tuple(piece) if isinstance(piece, list) else piece
        values.setdefault(name, []).append(total / per / 1000)
    return {name: min(v) for name, v in values.items()}
