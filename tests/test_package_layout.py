"""Where modules live, checked on the source tree (the layering rules are test_architecture.py's).

* ``src/firstwrite/`` holds packages only: besides ``__init__.py`` and ``py.typed``, every entry
  is a subpackage. A module belongs to the package of its users.
* The demo runs on its own: nothing in ``firstwrite.demo`` imports ``firstwrite.cli``. The CLI
  may import the demo (``firstwrite demo``), not the other way round.
* What the CLI, the console and the demo share lives in ``firstwrite.shared``, and each imports
  it from there: the race judgment (CLI and console), the one-line errors and the demo's options
  (CLI and demo). ``firstwrite.shared`` imports none of them, and the engine does not import it.

Imports are read with ``ast``: every ``import`` statement counts wherever it is (module level,
functions, ``if TYPE_CHECKING:``), and so does ``importlib.import_module("...")`` or
``__import__("...")`` with a literal name.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "firstwrite"
TOP_LEVEL_FILES = {"__init__.py", "py.typed"}
SHARED = "firstwrite.shared"


def _absolute(node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    base = package.split(".")
    base = base[: len(base) - node.level + 1]
    return ".".join([*base, node.module] if node.module else base)


def _is_dynamic_import(node: ast.Call) -> bool:
    name = ast.unparse(node.func)
    return name in ("__import__", "import_module") or name.endswith(".import_module")


def imports(path: Path, root: Path = SRC) -> set[str]:
    """Every module (and ``module.name``) the file at ``path`` imports, anywhere in it."""
    parts = path.relative_to(root.parent).with_suffix("").parts
    package = ".".join(parts[:-1])
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(node, package)
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Call) and _is_dynamic_import(node) and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                found.add(first.value)
    return found


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def imported_by(package: str, *prefixes: str) -> dict[str, list[str]]:
    """file of ``package`` (e.g. ``demo``) -> what it imports from under any of ``prefixes``."""
    found = {
        str(path.relative_to(SRC)): sorted(
            name for name in imports(path) if any(_within(name, p) for p in prefixes)
        )
        for path in sorted((SRC / package).rglob("*.py"))
    }
    return {k: v for k, v in found.items() if v}


# --- the top level holds packages only ---------------------------------------------------------


def test_the_top_level_holds_packages_only() -> None:
    entries = {p for p in SRC.iterdir() if p.name != "__pycache__"}
    files = {p.name for p in entries if not p.is_dir()}
    assert files == TOP_LEVEL_FILES, "move a top-level module into the package of its users"
    not_packages = sorted(
        p.name for p in entries if p.is_dir() and not (p / "__init__.py").exists()
    )
    assert not_packages == []


# --- the demo runs without the CLI -------------------------------------------------------------


def test_the_demo_imports_nothing_from_the_cli() -> None:
    assert imported_by("demo", "firstwrite.cli") == {}


def test_the_demo_and_the_cli_share_the_demos_command_line() -> None:
    main = imports(SRC / "demo" / "__main__.py")
    cli = imports(SRC / "cli" / "demo.py")
    for module in (f"{SHARED}.demo_command", f"{SHARED}.command_line"):
        assert module in main, module
    assert f"{SHARED}.demo_command" in cli
    # The CLI starts the demo only when the command runs (the demo needs the web stack).
    assert "firstwrite.demo" in cli


# --- what the CLI, the console and the demo share ----------------------------------------------


def _users(module: str) -> dict[str, set[str]]:
    """top-level package under src/firstwrite -> the names of ``module`` it imports."""
    found: dict[str, set[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        names = {n for n in imports(path) if _within(n, module)}
        if names:
            found.setdefault(path.relative_to(SRC).parts[0], set()).update(names)
    return found


def test_the_race_judgment_is_shared_from_one_place() -> None:
    module = f"{SHARED}.first_writer_wins"
    assert (SRC / "shared" / "first_writer_wins.py").is_file()
    assert set(_users(module)) == {"cli", "console"}
    # One judgment: neither side keeps its own copy, nor reaches it through the other.
    copies = sorted(
        f"{path.relative_to(SRC)}:{node.name}"
        for package in ("cli", "console")
        for path in (SRC / package).rglob("*.py")
        for node in ast.parse(path.read_text()).body
        if isinstance(node, (ast.FunctionDef, ast.ClassDef))
        and node.name in ("judge", "Answers", "KeyVerdict", "Violation")
    )
    assert copies == []
    assert imported_by("console", "firstwrite.cli") == {}


def test_the_one_line_errors_are_shared_by_the_cli_and_the_demo() -> None:
    users = _users(f"{SHARED}.command_line")
    assert {"cli", "demo"} <= set(users)
    assert not any(
        isinstance(node, ast.ClassDef) and node.name in ("CLIError", "ExitCode")
        for path in (SRC / "cli").rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
    ), "one CLIError and one ExitCode, in firstwrite.shared.command_line"


def test_shared_imports_none_of_its_users_and_the_engine_does_not_import_it() -> None:
    others = ("firstwrite.cli", "firstwrite.console", "firstwrite.demo", "firstwrite.engine")
    others += ("firstwrite.idempotency", "firstwrite.http", "firstwrite.testing")
    assert imported_by("shared", *others) == {}
    assert not any(
        name == "firstwrite" for path in (SRC / "shared").rglob("*.py") for name in imports(path)
    )
    assert imported_by("engine", SHARED) == {}


# --- the checker itself ------------------------------------------------------------------------


def test_the_checker_sees_every_kind_of_import(tmp_path: Path) -> None:
    root = tmp_path / "firstwrite"
    (root / "demo").mkdir(parents=True)
    module = root / "demo" / "run.py"
    module.write_text(
        "import importlib\n"
        "from typing import TYPE_CHECKING\n\n"
        "if TYPE_CHECKING:\n    from ..cli import target\n\n\n"
        "def main() -> None:\n    from firstwrite.cli import main\n\n\n"
        "def later() -> None:\n    importlib.import_module('firstwrite.cli.race')\n"
    )
    seen = {n for n in imports(module, root) if _within(n, "firstwrite.cli")}
    assert seen >= {"firstwrite.cli.target", "firstwrite.cli.main", "firstwrite.cli.race"}
    # And on the real tree it reads something (a checker that parses nothing passes anything).
    assert f"{SHARED}.first_writer_wins.judge" in imports(SRC / "cli" / "race_verdict.py")
