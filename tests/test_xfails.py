"""Every expected failure in the suite, listed with its reason; none of them unbounded.

An ``xfail`` that is not strict passes whatever happens (it fails, it passes, it fails in
another way), so it hides what it names: a known limit is an explicit, measured bound (with
its measurement in docs/reliability.md) or a strict ``xfail`` whose reason names its exact
symptom and whose ``raises`` names the one exception that symptom raises. The imperative
``pytest.xfail(...)`` is never strict (it ends the test as expected-to-fail from that line on),
so it is refused outright.

The listing comes from the test files' syntax trees (decorators, ``pytestmark``,
``pytest.param(..., marks=...)``, imperative calls), not from a collection run, so it costs
milliseconds; ``xfail_strict`` in pyproject.toml makes a mark without ``strict=`` strict too,
but a mark here must still say ``strict=True`` where it is read.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
PYPROJECT = TESTS.parent / "pyproject.toml"


@dataclass(frozen=True)
class Xfail:
    """One expected failure: where, how it is written, and what it says."""

    where: str
    imperative: bool
    strict: bool
    raises: str | None
    reason: str


def _is_xfail(node: ast.expr) -> bool:
    """``pytest.xfail``, ``pytest.mark.xfail``, or a bare ``xfail`` imported from pytest."""
    if isinstance(node, ast.Attribute) and node.attr == "xfail":
        return True
    return isinstance(node, ast.Name) and node.id == "xfail"


def _constant(node: ast.expr | None) -> object:
    if node is None:
        return None
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.JoinedStr):  # an f-string: its literal parts say what it is about
        return "".join(
            str(v.value) if isinstance(v, ast.Constant) else "{...}" for v in node.values
        )
    return ast.unparse(node)


def xfails_in(path: Path) -> list[Xfail]:
    """Every xfail written in ``path``."""
    text = path.read_text()
    if "xfail" not in text:
        return []  # (most files: parsing each would cost seconds)
    tree = ast.parse(text, filename=str(path))
    where = path.relative_to(TESTS.parent) if path.is_relative_to(TESTS.parent) else path
    found: list[Xfail] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _is_xfail(node.func):
            keywords = {k.arg: k.value for k in node.keywords}
            func = node.func
            imperative = isinstance(func, ast.Name) or (
                isinstance(func.value, ast.Name) and func.value.id == "pytest"  # type: ignore[attr-defined]
            )
            reason = keywords.get("reason") or (node.args[0] if node.args else None)
            if not imperative and node.args and not isinstance(node.args[0], ast.Constant):
                reason = keywords.get("reason")  # mark.xfail(condition, reason=...)
            found.append(
                Xfail(
                    where=f"{where}:{node.lineno}",
                    imperative=imperative,
                    strict=_constant(keywords.get("strict")) is True,
                    raises=None if "raises" not in keywords else ast.unparse(keywords["raises"]),
                    reason=str(_constant(reason) or ""),
                )
            )
        elif isinstance(node, ast.expr) and _is_xfail(node) and not _called(tree, node):
            # A bare ``@pytest.mark.xfail`` (no call, so no reason and no strict=).
            found.append(Xfail(f"{where}:{node.lineno}", False, False, None, ""))
    return found


def _called(tree: ast.AST, target: ast.expr) -> bool:
    """Whether ``target`` is the function of some call (so :func:`xfails_in` saw the call)."""
    return any(isinstance(n, ast.Call) and n.func is target for n in ast.walk(tree))


def every_xfail() -> list[Xfail]:
    found: list[Xfail] = []
    for path in sorted(TESTS.rglob("*.py")):
        if "node_modules" in path.parts or path == Path(__file__):
            continue
        found += xfails_in(path)
    return found


def test_every_xfail_is_strict_with_its_symptom_and_none_is_imperative() -> None:
    found = every_xfail()
    listing = "\n".join(
        f"{x.where}: {'pytest.xfail()' if x.imperative else 'mark'}"
        f" strict={x.strict} raises={x.raises} reason={x.reason!r}"
        for x in found
    )
    print(f"\n{len(found)} xfail(s) in the suite:\n{listing}")
    bad = [x for x in found if x.imperative or not x.strict or not x.raises or not x.reason]
    assert bad == [], (
        "an xfail must be a strict mark with the exception of its symptom (raises=) and a "
        f"reason naming it; imperative pytest.xfail() is never strict:\n{listing}"
    )


def test_marks_are_strict_by_default() -> None:
    assert "xfail_strict = true" in PYPROJECT.read_text()


# -- the listing finds each way an xfail is written ------------------------------------------

SAMPLE = """
import pytest
from pytest import xfail

pytestmark = pytest.mark.xfail(reason="module-wide")

@pytest.mark.xfail(strict=True, raises=MemoryError, reason="grows past 1 GiB")
def test_a(): ...

@pytest.mark.xfail
def test_b(): ...

@pytest.mark.parametrize("n", [1, pytest.param(2, marks=pytest.mark.xfail(True, reason="two"))])
def test_c(n):
    if n:
        pytest.xfail(f"slow: {n}")
    xfail("bare")
"""


def test_the_listing_finds_every_form(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(SAMPLE)
    found = xfails_in(sample)
    summary = sorted((x.imperative, x.strict, x.raises, x.reason) for x in found)
    assert summary == [
        (False, False, None, ""),
        (False, False, None, "module-wide"),
        (False, False, None, "two"),
        (False, True, "MemoryError", "grows past 1 GiB"),
        (True, False, None, "bare"),
        (True, False, None, "slow: {...}"),
    ]


@pytest.mark.parametrize(
    ("source", "ok"),
    [
        ("@pytest.mark.xfail(strict=True, raises=E, reason='r')\ndef t(): ...", True),
        ("@pytest.mark.xfail(strict=True, reason='r')\ndef t(): ...", False),  # any failure
        ("@pytest.mark.xfail(raises=E, reason='r')\ndef t(): ...", False),  # not strict
        ("def t():\n    pytest.xfail('r')", False),
    ],
)
def test_the_rule_refuses_what_hides_a_failure(tmp_path: Path, source: str, ok: bool) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("import pytest\n" + source + "\n")
    (found,) = xfails_in(sample)
    assert (
        not found.imperative and found.strict and bool(found.raises) and bool(found.reason)
    ) is ok
