"""Sampling profiles of a running server with py-spy (installed into bench/results/tools)."""

from __future__ import annotations

import collections
import re
import subprocess
import sys
from pathlib import Path

from ._common import REPO, RESULTS, run_quiet

PY_SPY_VERSION = "0.4.3"
_FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*?)(?::\d+)?\)$")


def ensure_py_spy() -> tuple[Path | None, str]:
    """py-spy's binary (pip-installed into a git-ignored folder on first use), or (None, why)."""
    target = RESULTS / "tools"
    binary = target / "bin" / "py-spy"
    if binary.exists():
        return binary, ""
    code, out = run_quiet(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--target",
            str(target),
            f"py-spy=={PY_SPY_VERSION}",
        ],
        timeout=300,
    )
    if code != 0 or not binary.exists():
        return None, f"pip install py-spy failed: {out[-300:]}"
    return binary, ""


def _short(file: str) -> str:
    for prefix in (str(REPO / "src") + "/", "site-packages/", "lib/python3"):
        if prefix in file:
            return file.split(prefix, 1)[1]
    return file


def summarise(raw: str, top: int = 15) -> str:
    """Own-time and inclusive-time tables from py-spy's collapsed stacks."""
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        frames = []
        for frame in stack.split(";"):
            m = _FRAME.match(frame.strip())
            frames.append(f"{m['func']} ({_short(m['file'])})" if m else frame.strip())
        if frames:
            own[frames[-1]] += count
        for frame in set(frames):
            if "firstwrite/" in frame:
                inclusive[frame] += count
    if not total:
        return "no samples"
    lines = [f"{total} samples (py-spy --gil: the thread holding the GIL).", "", "own time:"]
    lines += [f"  {n / total:6.1%}  {f}" for f, n in own.most_common(top)]
    lines += ["", "inclusive time, firstwrite frames:"]
    lines += [f"  {n / total:6.1%}  {f}" for f, n in inclusive.most_common(top)]
    return "\n".join(lines)


def record(py_spy: Path, pid: int, seconds: int, out: Path) -> subprocess.Popen[bytes]:
    """Start recording ``pid`` for ``seconds``; wait on the returned process, then read ``out``."""
    return subprocess.Popen(
        [
            str(py_spy),
            "record",
            "--pid",
            str(pid),
            "--duration",
            str(seconds),
            "--format",
            "raw",
            "--rate",
            "200",
            "--gil",  # only the thread holding the GIL: CPU work, not threads waiting
            "--output",
            str(out),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
