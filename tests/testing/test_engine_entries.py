"""``firstwrite.testing`` reaches the engine through its public entries only: the
``firstwrite.engine`` and ``firstwrite.engine.binding`` packages, never a module inside them
(imports that only type-check, under ``TYPE_CHECKING``, aside)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "firstwrite"
ENTRIES = {"firstwrite.engine", "firstwrite.engine.binding"}


def _engine_imports(path: Path) -> set[str]:
    """The engine modules ``path`` imports at run time: import statements outside
    ``if TYPE_CHECKING:``, and module names passed as strings to ``require``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    typing_only = {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and ast.unparse(block.test) == "TYPE_CHECKING"
        for stmt in block.body
        for node in ast.walk(stmt)
    }
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module)
        elif (
            isinstance(node, ast.Call)
            and ast.unparse(node.func) in ("require", "_require")
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            found.add(str(node.args[0].value))
    return {name for name in found if name.startswith("firstwrite.engine")}


def test_testing_imports_only_the_engines_public_packages() -> None:
    offenders = {
        path.name: sorted(_engine_imports(path) - ENTRIES)
        for path in (SRC / "testing").rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_checker_sees_run_time_imports() -> None:
    seen = _engine_imports(SRC / "testing" / "redirect.py")
    assert "firstwrite.engine.binding" in seen and "firstwrite.engine" in seen
    assert "firstwrite.engine" in _engine_imports(SRC / "testing" / "plugin.py")


def test_the_binding_package_stays_light() -> None:
    """``follow`` is a plain export; the aiobotocore binding still loads on first use."""
    code = (
        "import sys, firstwrite.engine.binding as b\n"
        "assert callable(b.follow) and callable(b.bind)\n"
        "print('firstwrite.engine.binding.aio' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "False"
