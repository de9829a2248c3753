"""The proof suites' short and long forms are what docs/reliability.md says they are.

The sizes are read from the suites' own source (``NAME = scale(short, long)``, or the
``FIRSTWRITE_PROOF`` test of tests/engine/test_race.py), so both forms are checked in either
run, and compared with the table at the top of docs/reliability.md: a suite shortened (or the
page edited) without the other fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
PAGE = ROOT / "docs" / "reliability.md"


def forms(path: Path) -> dict[str, tuple[object, object]]:
    """``{NAME: (short, long)}`` for each module-level constant sized by form in ``path``."""
    found: dict[str, tuple[object, object]] = {}
    for node in ast.parse(path.read_text()).body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target, value = node.targets[0], node.value
        if not isinstance(target, ast.Name):
            continue
        if (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id == "scale"
        ):
            short, long = (ast.literal_eval(a) for a in value.args)
            found[target.id] = (short, long)
        elif isinstance(value, ast.IfExp) and "FIRSTWRITE_PROOF" in ast.unparse(value.test):
            found[target.id] = (ast.literal_eval(value.orelse), ast.literal_eval(value.body))
        elif isinstance(value, ast.Constant) and isinstance(value.value, int):
            found[target.id] = (value.value, value.value)
    return found


def row(suite: str) -> tuple[str, str]:
    """(short form, long form) cells of ``suite``'s row in the page's table."""
    for line in PAGE.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == suite and len(cells) == 4:
            return cells[2], cells[3]
    raise AssertionError(f"no row {suite!r} in {PAGE}")


def test_crash() -> None:
    cycles = forms(ROOT / "tests/proof/test_crash_cycles.py")["CYCLES"]
    assert row("crash") == tuple(f"{n} kill cycles per durability mode" for n in cycles)


def test_linearizability() -> None:
    sizes = forms(ROOT / "tests/proof/test_linearizability.py")
    clients = sizes["THREADS"][0] + sizes["PROCESSES"][0] * sizes["THREADS_PER_PROCESS"][0]
    calls = sizes["OPS_PER_CLIENT"]
    assert row("linearizability") == (
        f"{clients} clients x {calls[0]:,} calls per target",
        f"{clients} clients x {calls[1]:,} calls per target",
    )


def test_hostile() -> None:
    sizes = forms(ROOT / "tests/proof/test_hostile.py")
    (es, el), (ps, pl), (ws, wl) = sizes["EXAMPLES"], sizes["WINDOW_PAIRS"], sizes["WINDOW_S"]
    assert row("hostile input") == (
        f"{es:,} examples per strategy, {ps} x {ws:g} s attack windows",
        f"{el:,} examples, {pl} x {wl:g} s attack windows",
    )


def test_race() -> None:
    keys = forms(ROOT / "tests/engine/test_race.py")["KEYS"]
    assert row("first-writer race (`tests/engine/test_race.py`)") == tuple(
        f"{n} keys per race" for n in keys
    )


def test_consumer_chaos() -> None:
    sizes = forms(ROOT / "tests/proof/test_consumer_chaos.py")
    (ks, kl), (cs, cl) = sizes["KILLS"], sizes["CHAOS_S"]
    assert row("consumer chaos") == (
        f"{ks} SIGKILLs in {cs:g} s, 1 RabbitMQ restart",
        f"{kl} SIGKILLs in {cl:g} s, 1 RabbitMQ restart",
    )


@pytest.mark.parametrize(
    ("source", "expected"),
    [("X = scale(2, 20)", (2, 20)), ("X = 500 if FIRSTWRITE_PROOF else 100", (100, 500))],
)
def test_forms_reads_both_ways_of_sizing(
    tmp_path: Path, source: str, expected: tuple[int, int]
) -> None:
    module = tmp_path / "suite.py"
    module.write_text(source + "\n")
    assert forms(module)["X"] == expected
