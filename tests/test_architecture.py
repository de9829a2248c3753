"""The structure rules of docs/engine.md (Layout) and the architecture note, checked on the tree.

* Layering: the engine is a DynamoDB, full stop. It never imports the idempotency layer or
  anything built on it (CLI, HTTP middleware, demo, console, testing helpers). The layer talks
  to DynamoDB only through a boto3 client; its one permitted touch of the engine is the
  no-configuration default in ``idempotency/local.py``.
* The engine's own layout: at most 12 modules at its top level; the core (the top-level modules
  but the front door ``api.py``, and ``operations/``, ``expressions/``, ``storage/``) imports
  none of ``features/``, ``server/``, ``binding/``, ``direct/``; features never import each
  other (they meet through the hooks); features and the core type against ``context.Host``,
  never the concrete ``api.Engine``.
* The three ways in (``server/``, ``binding/``, ``direct/``) reach the engine through its front
  door (``api``, with ``errors`` and ``values``) and what stands beside it for all three:
  ``wire``, DynamoDB's JSON protocol without the HTTP, and ``client_exceptions``, the exception
  classes boto3 clients raise. None of the three imports another: whatever two of them share
  stands beside the door.
* No import cycles among the modules of ``src/``, nor among those of ``bench/``, counting imports
  made only for the type checker.
* Modules of ``src/`` and ``bench/`` stay under ~500 lines, or say in their docstring why one
  concept needs more; none passes 700 lines, reason or not.

How imports are read for the cycle check. Every ``import`` counts: at module level, in a class
body, inside functions, and under ``if TYPE_CHECKING:``. A deferred import is the usual way to
hide a cycle (the module graph still goes round, only the crash is postponed to the call), and
a type-checking import is the other: the modules still depend on each other, so both count as
edges like any other. ``from package import name`` is an edge to ``package.name`` when that is
a module (Python loads the submodule, the package's own code is already running) and to
``package`` otherwise; importing a submodule does not count as an edge to its parent package,
which Python always initialises first.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "firstwrite"
BENCH = Path(__file__).resolve().parents[1] / "bench"

# Above the engine: it must never import these (nor the root package, whose API is the layer).
ABOVE_THE_ENGINE = (
    "firstwrite.idempotency",
    "firstwrite.cli",
    "firstwrite.http",
    "firstwrite.demo",
    "firstwrite.console",
    "firstwrite.testing",
)
ENGINE = SRC / "engine"
MAX_ENGINE_TOP_LEVEL = 12
# The engine's parts beside its core, each a subpackage.
FEATURES = "firstwrite.engine.features"
WAYS_IN = ("server", "binding", "direct")
# The core's subpackages; the core is these and the top-level modules but the front door.
CORE_PACKAGES = ("operations", "expressions", "storage")
FRONT_DOOR = "api.py"
# What the ways in may import of the engine outside their own subpackages: the front door, and
# what stands beside it for all three (the wire protocol, boto3's exception classes).
FRONT_DOOR_MODULES = (
    "firstwrite.engine.api",
    "firstwrite.engine.errors",
    "firstwrite.engine.values",
    "firstwrite.engine.wire",
    "firstwrite.engine.client_exceptions",
)

# Cycles and long modules being taken apart on other branches of issue 10 at the time of
# writing. Each entry must go as soon as the work lands: the tests fail while one is stale.
PENDING_CYCLES: set[frozenset[str]] = set()
PENDING_LONG_MODULES: set[str] = set()
MAX_LINES = 500
HARD_MAX_LINES = 700  # no reason in a docstring takes a module past this
_SIZE_REASON = re.compile(r"^Size: \S", re.MULTILINE)


# --- what a module imports ---------------------------------------------------------------------


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package_of(path: Path, root: Path) -> str:
    return ".".join(path.relative_to(root.parent).parts[:-1])


def _absolute(node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    base = package.split(".")
    base = base[: len(base) - node.level + 1]
    return ".".join([*base, node.module] if node.module else base)


def _imports(path: Path) -> set[str]:
    """Every name a module imports (TYPE_CHECKING blocks included), for the layering rules."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = _package_of(path, SRC)
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(node, package)
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return ast.unparse(test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")


def _runtime_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """The import statements that can run: anywhere but under ``if TYPE_CHECKING:``."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _all_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement, type-checking ones included."""
    return [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]


def import_graph(root: Path, *, type_checking: bool = True) -> dict[str, set[str]]:
    """module -> the modules of the tree under ``root`` (a package directory) it imports
    (``type_checking``: imports under ``if TYPE_CHECKING:`` count too)."""
    statements = _all_imports if type_checking else _runtime_imports
    paths = {_module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        package = _package_of(path, root)
        edges: set[str] = set()
        for node in statements(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                edges.update(alias.name for alias in node.names if alias.name in paths)
                continue
            base = _absolute(node, package)
            for alias in node.names:
                target = f"{base}.{alias.name}"
                if target in paths:
                    edges.add(target)
                elif base in paths:
                    edges.add(base)
        edges.discard(module)
        graph[module] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The import cycles of ``graph``: its strongly connected parts of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()

    def connect(module: str) -> None:  # Tarjan's algorithm
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(graph[module]):
            if target not in index:
                connect(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            part = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                part.add(member)
                if member == module:
                    break
            if len(part) > 1:
                found.add(frozenset(part))

    for module in sorted(graph):
        if module not in index:
            connect(module)
    return found


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


# --- layering ----------------------------------------------------------------------------------


def test_the_engine_never_imports_the_layers_above_it() -> None:
    offenders = {
        str(path.relative_to(SRC)): sorted(
            name
            for name in _imports(path)
            if name == "firstwrite" or name.startswith(ABOVE_THE_ENGINE)
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


# The layer's private package: the state machine, reached only by the modules that drive it.
MACHINE = "firstwrite.idempotency._machine"
MACHINE_DRIVERS = ("guard.py", "aio.py", "local.py")


def test_only_the_guards_reach_into_the_layers_private_machine() -> None:
    """``idempotency/_machine/`` is a layer under the public modules: the vocabulary they share
    with it (effects, verdicts, client errors, serialization) lives beside them, and only the
    drivers of the machine (the two guards and the local default) import it."""
    layer = SRC / "idempotency"
    outside = [
        p
        for p in sorted(SRC.rglob("*.py"))
        if (layer / "_machine") not in p.parents
        and not (p.parent == layer and p.name in MACHINE_DRIVERS)
    ]
    private = _offenders(
        outside, lambda _p, name: name == MACHINE or name.startswith(MACHINE + ".")
    )
    assert private == {}
    drivers = [layer / name for name in MACHINE_DRIVERS]
    assert all(_offenders([p], lambda _p, n: n.startswith(MACHINE)) for p in drivers)


def _engine_files(*parts: str) -> list[Path]:
    return sorted(p for part in parts for p in (ENGINE / part).rglob("*.py"))


def _core_files() -> list[Path]:
    top = [p for p in ENGINE.glob("*.py") if p.name not in (FRONT_DOOR, "__init__.py")]
    return sorted(top) + _engine_files(*CORE_PACKAGES)


def _offenders(paths: list[Path], bad: Callable[[Path, str], bool]) -> dict[str, list[str]]:
    found = {
        str(path.relative_to(SRC)): sorted(name for name in _imports(path) if bad(path, name))
        for path in paths
    }
    return {k: v for k, v in found.items() if v}


def test_the_engine_top_level_stays_small() -> None:
    modules = sorted(p.name for p in ENGINE.glob("*.py"))
    assert len(modules) <= MAX_ENGINE_TOP_LEVEL, modules


def test_the_core_imports_no_feature_and_no_way_in() -> None:
    """Fault injection, replication, streams, TTL, tags and indexes reach the core through the
    hooks (context.Hooks), never by being imported; nor does the core know how it is called."""
    parts = tuple(f"firstwrite.engine.{p}" for p in ("features", *WAYS_IN))
    assert _offenders(_core_files(), lambda _p, name: name.startswith(parts)) == {}


def _feature_of(path: Path) -> str:
    return path.relative_to(ENGINE / "features").with_suffix("").parts[0]


def test_features_never_import_each_other() -> None:
    def other_feature(path: Path, name: str) -> bool:
        if not name.startswith(FEATURES + "."):
            return False
        return name.removeprefix(FEATURES + ".").split(".")[0] != _feature_of(path)

    paths = [
        p
        for p in _engine_files("features")
        if p.name != "__init__.py" or p.parent.name != "features"
    ]
    assert len({_feature_of(p) for p in paths}) >= 6
    assert _offenders(paths, other_feature) == {}


def test_features_and_the_core_type_against_the_host_not_the_engine() -> None:
    paths = _core_files() + _engine_files("features")
    assert _offenders(paths, lambda _p, name: name.startswith("firstwrite.engine.api")) == {}


def _within(name: str, module: str) -> bool:
    return name == module or name.startswith(module + ".")


def _way_in_of(path: Path) -> str:
    return path.relative_to(ENGINE).parts[0]


def past_the_door(path: Path, name: str) -> bool:
    """Whether a way in at ``path``, importing ``name``, reaches past the engine's front door:
    into the engine's package itself, its core, its features or another way in."""
    if not _within(name, "firstwrite.engine"):
        return False
    if _within(name, f"firstwrite.engine.{_way_in_of(path)}"):
        return False
    return not any(_within(name, door) for door in FRONT_DOOR_MODULES)


def test_the_ways_in_reach_the_engine_through_its_front_door_and_never_each_other() -> None:
    assert _offenders(_engine_files(*WAYS_IN), past_the_door) == {}


def test_the_front_door_rule_flags_a_way_in_reaching_past_it() -> None:
    binding = ENGINE / "binding" / "sync.py"
    for name in (
        "firstwrite.engine.server.asgi.Problem",  # another way in
        "firstwrite.engine.direct",
        "firstwrite.engine.storage",  # the core
        "firstwrite.engine.features.ttl",  # a feature
        "firstwrite.engine.context.Host",  # a top-level module not beside the door
        "firstwrite.engine.Engine",  # the package's own names
        "firstwrite.engine.wireless",  # a prefix is not the module
    ):
        assert past_the_door(binding, name), name
    for name in (
        "firstwrite.engine.binding.parse",  # its own subpackage
        "firstwrite.engine.api.Engine",
        "firstwrite.engine.wire.wire_call",
        "firstwrite.engine.client_exceptions",
        "botocore.session",
    ):
        assert not past_the_door(binding, name), name


def test_the_checker_sees_relative_imports() -> None:
    # Guard against a checker that passes because it parses nothing.
    assert "firstwrite.engine.errors" in _imports(SRC / "engine" / "values.py")
    assert "firstwrite.engine.storage" in _imports(SRC / "engine" / "operations" / "items.py")


# --- import cycles -----------------------------------------------------------------------------


def test_no_import_cycles_in_src() -> None:
    found = cycles(import_graph(SRC))
    new = {tuple(sorted(c)) for c in found - PENDING_CYCLES}
    assert new == set(), "import cycles (see this module's docstring for how imports count)"
    assert import_graph(SRC)["firstwrite.engine.context"], "the graph reads type-checking imports"
    gone = {tuple(sorted(c)) for c in PENDING_CYCLES - found}
    assert gone == set(), "these cycles are gone: remove them from PENDING_CYCLES"


def test_no_import_cycles_in_bench() -> None:
    graph = import_graph(BENCH)
    assert cycles(graph) == set(), "import cycles (see this module's docstring for how they count)"
    # The graph reads bench's relative imports (what the benchmarks run on).
    assert "bench._common" in graph["bench.idempotency"]


def test_the_cycle_check_finds_cycles_and_only_cycles(tmp_path: Path) -> None:
    root = tmp_path / "pkg"
    _write(
        root,
        {
            "__init__.py": "from .a import thing\n",
            # a -> b at module level, b -> a inside a function: a cycle all the same.
            "a.py": "from .b import other\nthing = other\n",
            "b.py": "other = 1\n\n\ndef later() -> None:\n    from .a import thing  # noqa\n",
            # c <-> d, but one side only for the type checker: no cycle.
            "c.py": "from .d import D\n\n\nclass C: ...\n",
            "d.py": (
                "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from .c import C\n"
                "else:\n    import json\n\n\nclass D: ...\n"
            ),
            # A package importing its submodules, which import siblings by `from . import`.
            "sub/__init__.py": "from . import e\n",
            "sub/e.py": "from . import f\n",
            "sub/f.py": "import pkg.c\n",
            # A submodule importing a name (not a module) from its own package: a cycle.
            "loop/__init__.py": "from .x import X\nHELPER = 1\n",
            "loop/x.py": "from . import HELPER\nX = HELPER\n",
            # Three modules in a ring, the last edge through `import pkg.ring.one`.
            "ring/one.py": "from .two import two\none = 1\n",
            "ring/two.py": "from pkg.ring.three import three\ntwo = 2\n",
            "ring/three.py": "def three() -> None:\n    import pkg.ring.one\n",
        },
    )
    graph = import_graph(root, type_checking=False)
    assert graph["pkg.sub.f"] == {"pkg.c"} and graph["pkg.d"] == set()
    # Counting what is imported for the type checker, c <-> d goes round too.
    assert frozenset({"pkg.c", "pkg.d"}) in cycles(import_graph(root))
    assert cycles(graph) == {
        frozenset({"pkg.a", "pkg.b"}),
        frozenset({"pkg.loop", "pkg.loop.x"}),
        frozenset({"pkg.ring.one", "pkg.ring.two", "pkg.ring.three"}),
    }


# --- module size -------------------------------------------------------------------------------


def _long_modules(root: Path) -> dict[str, int]:
    """Modules over MAX_LINES lines whose docstring does not say why (a ``Size:`` line)."""
    found: dict[str, int] = {}
    for path in sorted(root.rglob("*.py")):
        text = path.read_text()
        lines = len(text.splitlines())
        if lines <= MAX_LINES:
            continue
        docstring = ast.get_docstring(ast.parse(text)) or ""
        if not _SIZE_REASON.search(docstring):
            found[path.relative_to(root).as_posix()] = lines
    return found


def test_modules_stay_short_or_say_why() -> None:
    long = _long_modules(SRC)
    new = {k: v for k, v in long.items() if k not in PENDING_LONG_MODULES}
    assert new == {}, (
        f"over {MAX_LINES} lines: split them, or give the docstring a 'Size: <why one concept "
        "needs more>' line"
    )
    done = PENDING_LONG_MODULES - set(long)
    assert done == set(), "these are short now (or say why): remove them from the pending list"


def test_bench_modules_stay_short_or_say_why() -> None:
    assert _long_modules(BENCH) == {}, (
        f"over {MAX_LINES} lines: split them, or give the docstring a 'Size: ...' line"
    )


def _too_long(root: Path) -> dict[str, int]:
    """Modules over HARD_MAX_LINES lines, whatever their docstring says."""
    found = {
        path.relative_to(root).as_posix(): len(path.read_text().splitlines())
        for path in sorted(root.rglob("*.py"))
    }
    return {name: lines for name, lines in found.items() if lines > HARD_MAX_LINES}


def test_no_module_passes_the_hard_cap() -> None:
    found = {f"src/firstwrite/{k}": v for k, v in _too_long(SRC).items()}
    found |= {f"bench/{k}": v for k, v in _too_long(BENCH).items()}
    assert found == {}, f"over {HARD_MAX_LINES} lines: split them"


def test_the_size_check_reads_lines_and_reasons(tmp_path: Path) -> None:
    body = "x = 1\n" * MAX_LINES
    _write(
        tmp_path,
        {
            "short.py": '"""Short."""\n' + "x = 1\n" * (MAX_LINES - 1),
            "long.py": '"""Long."""\n' + body,
            "justified.py": '"""Long.\n\nSize: one state machine, its table of moves.\n"""\n'
            + body,
        },
    )
    assert _long_modules(tmp_path) == {"long.py": MAX_LINES + 1}
    _write(
        tmp_path,
        {"huge.py": '"""Huge.\n\nSize: a reason.\n"""\n' + "x = 1\n" * HARD_MAX_LINES},
    )
    assert _long_modules(tmp_path) == {"long.py": MAX_LINES + 1}
    assert _too_long(tmp_path) == {"huge.py": HARD_MAX_LINES + 4}
