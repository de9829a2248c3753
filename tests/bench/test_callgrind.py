"""The instruction counter used by the idempotency benchmark: it counts what runs inside each
measured piece, in order, and nothing of the program around them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `bench` is a top-level package beside `src/`, not installed
    sys.path.insert(0, str(ROOT))

from bench import _callgrind  # noqa: E402
from tools import need_tool  # noqa: E402

pytestmark = pytest.mark.xdist_group("bench")

CHILD = """
import sys
sys.path.insert(0, {root!r})
from bench._callgrind import measured

def spin(n):
    total = 0
    for i in range(n):
        total += i * i
    return total

spin(200_000)  # not measured: costs far more than the pieces below
for n in (1_000, 10_000, 10_000):
    measured(lambda n=n: spin(n))
print("done")
"""


def test_counts_each_measured_piece_in_order(tmp_path: Path) -> None:
    need_tool("valgrind")
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(root=str(ROOT)))
    counts, out = _callgrind.count([str(script)], timeout=300)
    assert out.strip() == "done"
    small, big, again = counts[:3]
    assert all(c == 0 for c in counts[3:])  # what was left at exit: nothing counted
    # ten times the loop, about ten times the instructions (bigger ints cost a little more)
    assert 8 < big / small < 13, counts
    # the same piece twice: the same count, give or take allocator and cache state
    assert abs(big - again) / big < 0.01, counts
    # the unmeasured 200,000-iteration loop (and start-up) is not in any count
    assert sum(counts) < 2 * big + small + big / 2, counts


def test_a_failing_piece_raises_in_the_program() -> None:
    def boom() -> None:
        raise ValueError("inside the piece")

    with pytest.raises(ValueError, match="inside the piece"):
        _callgrind.measured(boom)
