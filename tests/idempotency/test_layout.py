"""The layer's structure, checked on its source: no import cycles (function-level imports
included), small modules, and guards that expose only their documented API."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from firstwrite.idempotency import AsyncIdempotency, Idempotency

LAYER = Path(__file__).resolve().parents[2] / "src" / "firstwrite" / "idempotency"
PACKAGE = "firstwrite.idempotency"
MAX_LINES = 500


def _name(path: Path) -> str:
    parts = path.relative_to(LAYER).with_suffix("").parts
    return ".".join([PACKAGE, *(parts[:-1] if parts[-1] == "__init__" else parts)])


def _modules() -> dict[str, Path]:
    return {_name(p): p for p in LAYER.rglob("*.py")}


def _edges(module: str, path: Path, known: set[str]) -> set[str]:
    """The layer modules ``module`` imports, anywhere in its body."""
    package = module if path.stem == "__init__" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            target = (
                ".".join([*base, node.module] if node.module else base)
                if node.level
                else (node.module or "")
            )
            subs = {f"{target}.{a.name}" for a in node.names} & known
            found.update(subs or {target})
    return {m for m in found if m in known and m != module}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    # The package's __init__ re-exports the public API; a submodule importing a sibling goes
    # through it only to reach that sibling, so the edges that count start at the submodules.
    return {m: _edges(m, p, known) - {PACKAGE} for m, p in modules.items() if m != PACKAGE}


def test_no_import_cycles_in_the_layer() -> None:
    assert _cycle(_graph()) is None


def test_the_cycle_finder_finds_cycles() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    graph = _graph()
    assert f"{PACKAGE}._machine.machine" in graph[f"{PACKAGE}.guard"]  # it parses imports at all
    assert f"{PACKAGE}.requests" in graph[f"{PACKAGE}._machine.machine"]  # relative to a parent
    assert f"{PACKAGE}.local" in graph[f"{PACKAGE}.guard"]  # function-level ones too


def test_modules_are_small_or_say_why() -> None:
    long = {
        p.name: n
        for p in LAYER.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > MAX_LINES
        and "one concept" not in (ast.get_docstring(ast.parse(p.read_text())) or "")
    }
    assert long == {}


DOCUMENTED = {
    "clock_estimate",
    "config",
    "client",
    "metrics",
    "record_id",
    "dynamodb_key",
    "ensure_table",
    "claim",
    "complete",
    "fail",
    "renew",
    "mark",
    "run",
    "claim_with",
    "complete_with",
    "get",
    "replays",
    "is_async",
}


def test_guards_expose_only_the_documented_api() -> None:
    for guard in (Idempotency, AsyncIdempotency):
        public = {name for name in dir(guard) if not name.startswith("_")}
        assert public == DOCUMENTED, guard


def test_sync_and_async_guards_take_the_same_arguments() -> None:
    for name in DOCUMENTED:
        sync, aio = getattr(Idempotency, name), getattr(AsyncIdempotency, name)
        if isinstance(sync, property) or not callable(sync):
            continue
        assert list(inspect.signature(sync).parameters) == list(
            inspect.signature(aio).parameters
        ), name
        assert inspect.iscoroutinefunction(aio) == (
            name not in ("record_id", "dynamodb_key", "clock_estimate")
        )
    same = ("config", "client", "metrics", "non_retryable", "clock", "rng", "sleep", "monotonic")
    for guard in (Idempotency, AsyncIdempotency):
        assert set(same) <= set(inspect.signature(guard).parameters)
