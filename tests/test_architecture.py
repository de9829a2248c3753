"""The layering rules of docs/engine.md and the architecture note, checked on the source tree.

The engine is a DynamoDB, full stop: it never imports the idempotency layer or the CLI. The
idempotency layer talks to DynamoDB only through a boto3 client; its one permitted touch of the
engine is the no-configuration default in ``idempotency/local.py``.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "firstwrite"


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    package = ".".join(path.relative_to(SRC.parent).with_suffix("").parts[:-1])
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def test_the_engine_never_imports_the_layers_above_it() -> None:
    offenders = {
        str(path.relative_to(SRC)): sorted(
            name
            for name in _imports(path)
            if name.startswith(("firstwrite.idempotency", "firstwrite.cli", "firstwrite.web"))
        )
        for path in (SRC / "engine").rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_idempotency_layer_uses_the_engine_only_for_its_local_default() -> None:
    offenders = {
        str(path.relative_to(SRC)): sorted(
            name for name in _imports(path) if name.startswith("firstwrite.engine")
        )
        for path in (SRC / "idempotency").rglob("*.py")
        if path.name != "local.py"
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_checker_sees_relative_imports() -> None:
    # Guard against a checker that passes because it parses nothing.
    assert "firstwrite.engine.errors" in _imports(SRC / "engine" / "values.py")
