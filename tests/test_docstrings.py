"""Comments state contracts (issue 25): the rules for docstrings, checked on the source tree.

* Every module docstring under ``src/firstwrite`` is at most :data:`MAX_MODULE_DOCSTRING_LINES`
  lines, and its first line says what the module is: one line, ending with a period or a colon.
* No docstring or comment under ``src/`` carries a measurement, which goes stale: a µs/ms/ns
  timing, a ratio such as ``1.9x`` or ``2.2-3x``, a percentile (p50, p99), an instruction
  count or "callgrind". Measurements live in ``docs/`` and ``BENCHMARKS.md``. Limits that are
  DynamoDB's ("400 KB", "100 items", "1,000 WCU", transactions at "2x") are contracts and do
  not match.
* Every cross-reference in a docstring under ``src/firstwrite`` (roles ``:mod:``, ``:func:``,
  ``:class:``, ``:meth:``, ``:attr:``, ``:data:``, ``:exc:``) names something, as Sphinx's
  Python domain would find it, read from the source (nothing is imported but modules outside
  the package). The target is the text inside ``<...>`` when the reference has a title, with a
  leading ``~`` and a trailing ``()`` dropped; ``!target`` links nothing and is not checked. It
  is looked up in the enclosing classes (innermost first), then in the module (for a package,
  its ``__init__``), then:

  - written ``.name`` (relative): in the module's package, then in each package around it
    outward (``.wire`` in ``engine/server/app.py`` is ``firstwrite.engine.wire``). Sphinx looks
    a relative name up in the module, then as the end of any documented name; outward from the
    module is the same search with the nearest match first. ``..name`` is no Sphinx form and
    names nothing;
  - written ``name``: as a full dotted name (``firstwrite.engine.api.Engine``, a builtin, or a
    module or attribute outside the package, imported to check).

  Found means defined there (a module; a name bound at a module's top level; a method,
  class-level name, ``__slots__`` entry or ``self.x`` of a class), imported there (followed to
  what it stands for), or inherited from a base class. ``:mod:`` must name a module.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import io
import re
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "firstwrite"
MAX_MODULE_DOCSTRING_LINES = 20

# Files exempt from the rules (none: every module is under them).
EXEMPT: tuple[str, ...] = ()

_NUMBER = r"\d+(?:[.,]\d+)*"
MEASUREMENT = re.compile(
    "|".join(
        (
            # a timing: "170 µs", "1-8 ms", "~0.3 us", "40ns", "12 microseconds"
            rf"(?<![\w.]){_NUMBER}(?:\s?-\s?{_NUMBER})?\s?(?:µs|us|ms|ns)\b",
            rf"(?<![\w.]){_NUMBER}\s?(?:micro|milli|nano)seconds?\b",
            # a ratio with a fraction: "1.9x", "0.88x", "2.2-3x", "3.5-5x" (not DynamoDB's "2x")
            r"(?<![\w.])\d+\.\d+x\b",
            r"(?<![\w.])\d+(?:\.\d+)?\s?-\s?\d+(?:\.\d+)?x\b",
            # a percentile
            r"\bp(?:50|90|95|99|999)\b",
            # an instruction count, or the tool that counts them
            rf"(?<![\w.]){_NUMBER}\s?[kKMG]?\s+(?:CPU\s+)?instructions\b",
            r"\bcallgrind\b",
        )
    ),
    re.IGNORECASE,
)


def _relative(path: Path, package: Path) -> str:
    return path.relative_to(package).as_posix()


def _exempt(relative: str, exempt: tuple[str, ...]) -> bool:
    return any(
        relative.startswith(entry) if entry.endswith("/") else relative == entry for entry in exempt
    )


def module_docstring_problems(
    source: str, max_lines: int = MAX_MODULE_DOCSTRING_LINES
) -> list[str]:
    """What is wrong with a module's docstring: missing, too long, or no one-line summary."""
    docstring = ast.get_docstring(ast.parse(source), clean=False)
    if docstring is None:
        return ["no module docstring"]
    problems = []
    lines = docstring.count("\n") + 1  # the docstring's physical lines, quotes included
    if lines > max_lines:
        problems.append(f"module docstring is {lines} lines (at most {max_lines})")
    first = docstring.split("\n", 1)[0].strip()
    if not first or not first.endswith((".", ":")):
        problems.append(
            f"first line {first!r} does not say what the module is in one line ending with"
            " '.' or ':'"
        )
    return problems


def measurements(source: str) -> list[tuple[int, str]]:
    """(line, text) of each docstring or comment line that carries a measurement."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            docstring = ast.get_docstring(node, clean=False)
            if docstring is not None:
                start = node.body[0].lineno
                for offset, line in enumerate(docstring.split("\n")):
                    if MEASUREMENT.search(line):
                        found.append((start + offset, line.strip()))
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT and MEASUREMENT.search(token.string):
            found.append((token.start[0], token.string.strip()))
    return sorted(found)


def check_tree(package: Path, exempt: tuple[str, ...] = EXEMPT) -> list[str]:
    """Every breach of the rules under ``package``, one line each, files in ``exempt`` aside."""
    breaches = []
    for path in sorted(package.rglob("*.py")):
        relative = _relative(path, package)
        if _exempt(relative, exempt):
            continue
        source = path.read_text(encoding="utf-8")
        breaches += [f"{relative}: {problem}" for problem in module_docstring_problems(source)]
        breaches += [
            f"{relative}:{line}: a measurement (move it to docs/): {text}"
            for line, text in measurements(source)
        ]
    return breaches


# --- cross-references --------------------------------------------------------------------------

ROLES = ("mod", "func", "class", "meth", "attr", "data", "exc")
REFERENCE = re.compile(r":(?:py:)?(" + "|".join(ROLES) + r"):`([^`]+)`")
_TITLED = re.compile(r"^.*<([^<>]+)>$", re.DOTALL)


@dataclass
class _Class:
    module: str  # the module the class is defined in, which its bases are named from
    bases: list[str]


@dataclass
class ObjectIndex:
    """What the modules under one package define, read from their source (nothing imported).

    ``objects``: every module, and every name bound at a module's top level (``if`` and ``try``
    blocks included), every class member (methods, class-level names, ``self.x`` assignments,
    ``__slots__``) and nested class, by full dotted name; ``modules``: the modules among them;
    ``aliases``: a name a module imports, to the full name it stands for; ``classes``: each
    class, for member lookup through its bases.
    """

    root: str
    objects: set[str] = field(default_factory=set)
    modules: set[str] = field(default_factory=set)
    packages: set[str] = field(default_factory=set)
    aliases: dict[str, str] = field(default_factory=dict)
    classes: dict[str, _Class] = field(default_factory=dict)

    def resolves(self, name: str, depth: int = 0) -> bool:
        """Whether the full dotted ``name`` names something: defined under the package, imported
        by one of its modules (followed to what it stands for), a member a class inherits, or
        outside the package a module or attribute Python can import."""
        if depth > 20:
            return False
        if name in self.objects:
            return True
        parts = name.split(".")
        if parts[0] != self.root:
            return _importable(name)
        for cut in range(len(parts), 0, -1):
            head, rest = ".".join(parts[:cut]), parts[cut:]
            if head in self.aliases:
                return self.resolves(".".join([self.aliases[head], *rest]), depth + 1)
            if rest and head in self.classes and head in self.objects:
                owner = self.classes[head]
                return any(
                    self.resolves(".".join([base, *rest]), depth + 1)
                    for base in (self._absolute(owner.module, b) for b in owner.bases)
                    if base is not None
                )
        return False

    def is_module(self, name: str, depth: int = 0) -> bool:
        if name in self.modules or (name.split(".")[0] != self.root and _importable(name, True)):
            return True
        target = self.aliases.get(name)
        return target is not None and depth < 20 and self.is_module(target, depth + 1)

    def _absolute(self, module: str, base: str) -> str | None:
        """A base class named in ``module`` (``Name`` or ``module.Name``), as a full name."""
        first = base.split(".")[0]
        if f"{module}.{first}" in self.objects or f"{module}.{first}" in self.aliases:
            return f"{module}.{base}"
        return base if first == self.root or _importable(first, True) else f"builtins.{base}"


def _importable(name: str, module_only: bool = False) -> bool:
    """Whether ``name`` (outside the package) is a module Python imports, or an attribute of
    one (a builtin when it has no dot)."""
    parts = name.split(".")
    if len(parts) == 1 and not module_only and hasattr(builtins, name):
        return True
    for cut in range(len(parts), 0, -1):
        try:
            value: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        if module_only and cut < len(parts):
            return False
        for attribute in parts[cut:]:
            if not hasattr(value, attribute):
                return False
            value = getattr(value, attribute)
        return True
    return False


def _bound_names(target: ast.expr) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [name for element in target.elts for name in _bound_names(element)]
    if isinstance(target, ast.Starred):
        return _bound_names(target.value)
    return []


def _top_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements of a module or class body, those inside ``if``/``try``/``with`` too."""
    found: list[ast.stmt] = []
    for node in body:
        found.append(node)
        if isinstance(node, ast.If):
            found += _top_level(node.body) + _top_level(node.orelse)
        elif isinstance(node, ast.Try):
            found += _top_level(node.body) + _top_level(node.orelse) + _top_level(node.finalbody)
            for handler in node.handlers:
                found += _top_level(handler.body)
        elif isinstance(node, ast.With):
            found += _top_level(node.body)
    return found


def _index_body(index: ObjectIndex, module: str, scope: str, body: list[ast.stmt]) -> None:
    package = module if module in index.packages else module.rpartition(".")[0]
    for node in _top_level(body):
        names: list[str] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names = [node.name]
        elif isinstance(node, ast.ClassDef):
            names = [node.name]
            full = f"{scope}.{node.name}"
            index.classes[full] = _Class(module, [ast.unparse(b) for b in node.bases])
            _index_body(index, module, full, node.body)
            _index_instance_attributes(index, full, node)
        elif isinstance(node, ast.Assign):
            names = [n for target in node.targets for n in _bound_names(target)]
            if names == ["__slots__"] and isinstance(node.value, (ast.Tuple, ast.List)):
                names += [e.value for e in node.value.elts if isinstance(e, ast.Constant)]
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            names = _bound_names(node.target)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                index.aliases[f"{scope}.{bound}"] = alias.name if alias.asname else bound
        elif isinstance(node, ast.ImportFrom):
            source = node.module or ""
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                source = ".".join([*base, node.module] if node.module else base)
            for alias in node.names:
                index.aliases[f"{scope}.{alias.asname or alias.name}"] = f"{source}.{alias.name}"
        index.objects.update(f"{scope}.{name}" for name in names)


def _index_instance_attributes(index: ObjectIndex, full: str, node: ast.ClassDef) -> None:
    for method in node.body:
        if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for statement in ast.walk(method):
            targets: list[ast.expr] = []
            if isinstance(statement, ast.Assign):
                targets = statement.targets
            elif isinstance(statement, (ast.AnnAssign, ast.AugAssign)):
                targets = [statement.target]
            for target in targets:
                for element in target.elts if isinstance(target, ast.Tuple) else [target]:
                    if (
                        isinstance(element, ast.Attribute)
                        and isinstance(element.value, ast.Name)
                        and element.value.id == "self"
                    ):
                        index.objects.add(f"{full}.{element.attr}")


def object_index(package: Path) -> ObjectIndex:
    """The :class:`ObjectIndex` of the package at ``package`` (a directory)."""
    index = ObjectIndex(package.name)
    trees = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if parts[-1] == "__init__":
            index.packages.add(module)
        trees[module] = ast.parse(path.read_text(encoding="utf-8"))
    index.modules.update(trees)
    index.objects.update(trees)
    for module, tree in trees.items():
        _index_body(index, module, module, tree.body)
    return index


def _reference_target(text: str) -> str | None:
    """What a reference's text points at (``title <target>``, ``~target``, ``target()``), or
    ``None`` for ``!target``, which Sphinx renders without a link."""
    titled = _TITLED.match(text)
    target = (titled.group(1) if titled else text).strip()
    if target.startswith("!"):
        return None
    return target.removeprefix("~").removesuffix("()")


def _scopes(index: ObjectIndex, module: str, classes: list[str], relative: bool) -> list[str]:
    """Where a reference in ``module`` (inside ``classes``, outermost first) is looked up, in
    order: the enclosing classes, innermost first; the module; then, for a relative reference,
    each package around the module outward, or else nothing (the name as written)."""
    scopes = [".".join([module, *classes[:n]]) for n in range(len(classes), 0, -1)] + [module]
    if not relative:
        return [*scopes, ""]
    package = module.split(".")
    if module not in index.packages:
        package = package[:-1]
    return scopes + [".".join(package[:n]) for n in range(len(package), 0, -1)]


def reference_resolves(
    index: ObjectIndex, module: str, classes: list[str], role: str, text: str
) -> bool:
    target = _reference_target(text)
    if target is None:
        return True
    relative = target.startswith(".")
    name = target.removeprefix(".")
    for scope in _scopes(index, module, classes, relative):
        candidate = f"{scope}.{name}" if scope else name
        if index.is_module(candidate) if role == "mod" else index.resolves(candidate):
            return True
    return False


def _docstrings(node: ast.AST, classes: list[str]) -> Iterator[tuple[int, str, list[str]]]:
    """(first line, docstring, enclosing classes) of ``node`` and every definition in it."""
    if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        inside = [*classes, node.name] if isinstance(node, ast.ClassDef) else classes
        docstring = ast.get_docstring(node, clean=False)
        if docstring is not None:
            yield node.body[0].lineno, docstring, inside
        for child in ast.iter_child_nodes(node):
            yield from _docstrings(child, inside)
    else:
        for child in ast.iter_child_nodes(node):
            yield from _docstrings(child, classes)


def unresolved_references(package: Path) -> list[str]:
    """Every cross-reference in a docstring under ``package`` that names nothing, one line
    each: ``path:line: :role:`text```."""
    index = object_index(package)
    found = []
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for line, docstring, classes in _docstrings(tree, []):
            for match in REFERENCE.finditer(docstring):
                role, text = match.groups()
                if not reference_resolves(index, module, classes, role, text):
                    at = line + docstring.count("\n", 0, match.start())
                    found.append(f"{_relative(path, package)}:{at}: :{role}:`{text}`")
    return found


# --- the source tree ---------------------------------------------------------------------------


def test_module_docstrings_are_short_and_say_what_the_module_is_and_carry_no_measurement() -> None:
    breaches = check_tree(PACKAGE)
    assert breaches == [], "\n".join(breaches)


def test_every_cross_reference_in_a_docstring_resolves() -> None:
    unresolved = unresolved_references(PACKAGE)
    assert unresolved == [], "references that name nothing:\n" + "\n".join(unresolved)


def test_nothing_else_under_src_carries_a_measurement() -> None:
    outside = [path for path in SRC.rglob("*.py") if PACKAGE not in path.parents]
    found = [
        f"{path.relative_to(SRC)}:{line}: {text}"
        for path in outside
        for line, text in measurements(path.read_text(encoding="utf-8"))
    ]
    assert found == []


# --- the checker itself ------------------------------------------------------------------------


def test_the_checker_flags_planted_breaches(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    body = "".join(f"line {n}.\n" for n in range(MAX_MODULE_DOCSTRING_LINES - 1))
    (package / "long.py").write_text(f'"""A long module.\n{body}"""\n')
    (package / "just_right.py").write_text(f'"""Twenty lines.\n{body[: body.rindex("line")]}"""\n')
    (package / "wrapped.py").write_text('"""A summary that goes on\nto a second line."""\n')
    (package / "bare.py").write_text("x = 1\n")
    (package / "timed.py").write_text(
        '"""A module.\n\nA call takes about 170 µs, 1.9x the floor.\n"""\n\n\n'
        "class C:\n"
        '    """The p99 rose 2.2-3x during a sweep (callgrind: 41,200 instructions)."""\n\n'
        "    def f(self) -> None:\n"
        '        """Fast."""\n'
        "        x = 1  # ~0.3 us a parameter, measured\n"
    )
    (package / "sub" / "skipped.py").write_text('"""Exempt, 5 ms p99.\n"""\n')
    breaches = check_tree(package, exempt=("sub/",))
    flagged = "a measurement (move it to docs/)"
    assert breaches == [
        "bare.py: no module docstring",
        f"long.py: module docstring is {MAX_MODULE_DOCSTRING_LINES + 1} lines (at most "
        f"{MAX_MODULE_DOCSTRING_LINES})",
        f"timed.py:3: {flagged}: A call takes about 170 µs, 1.9x the floor.",
        f"timed.py:8: {flagged}: The p99 rose 2.2-3x during a sweep (callgrind: 41,200 "
        "instructions).",
        f"timed.py:12: {flagged}: # ~0.3 us a parameter, measured",
        "wrapped.py: first line 'A summary that goes on' does not say what the module is in "
        "one line ending with '.' or ':'",
    ]


def test_the_reference_checker_resolves_as_its_rule_says(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text(
        '"""Pkg: :mod:`.sub`, :class:`.sub.mod.Thing`."""\n\nfrom .sub.mod import Thing\n'
    )
    (package / "sub" / "__init__.py").write_text('"""Sub: :func:`.mod.helper`."""\n')
    (package / "sub" / "mod.py").write_text(
        '"""Mod: :class:`Thing`, :meth:`Thing.run`, :attr:`Thing.size`, :attr:`Thing.slot`,\n'
        ":meth:`Child.run` (inherited), :func:`~.helper`, :mod:`.other` and :mod:`.sub` (around),\n"
        ":class:`json.JSONDecoder`, :exc:`ValueError`, :meth:`Path.exists` (imported),\n"
        ":class:`a title <Thing>`, :func:`!nowhere` (no link), :func:`helper()`, :class:`Pkg`.\n"
        ":func:`.nowhere`\n"
        ":mod:`Thing`\n"
        ":meth:`Thing.gone`\n"
        ":mod:`..other`\n"
        ":func:`json.nothing`\n"
        ':class:`Elsewhere`\n"""\n'
        "from pathlib import Path\n\n"
        "from .. import Thing as Pkg\n\n\n"
        "class Thing:\n"
        '    """:meth:`run`, :attr:`size`; :meth:`Thing.run`\n    :meth:`missing`\n    """\n\n'
        '    __slots__ = ("slot",)\n    size: int\n\n'
        "    def run(self) -> None:\n"
        '        """:attr:`count`, :class:`Thing`\n        :attr:`total`"""\n'
        "        self.count = 1\n\n\n"
        "class Child(Thing): ...\n\n\n"
        "def helper() -> None: ...\n"
    )
    (package / "sub" / "other.py").write_text(
        '"""Other: :class:`.mod.Thing`, :class:`~pkg.sub.mod.Child`.\n:func:`.helper`\n"""\n'
    )
    assert unresolved_references(package) == [
        "sub/mod.py:5: :func:`.nowhere`",
        "sub/mod.py:6: :mod:`Thing`",
        "sub/mod.py:7: :meth:`Thing.gone`",
        "sub/mod.py:8: :mod:`..other`",
        "sub/mod.py:9: :func:`json.nothing`",
        "sub/mod.py:10: :class:`Elsewhere`",
        "sub/mod.py:19: :meth:`missing`",
        "sub/mod.py:27: :attr:`total`",
        "sub/other.py:2: :func:`.helper`",
    ]


def test_contracts_are_not_measurements() -> None:
    contracts = [
        "An item is at most 400 KB; a transaction holds at most 100 items.",
        "A table provisioned at 1,000 WCU; transactions consume 2x the units.",
        "Bodies over 16 MiB are refused; a 4 MB transaction; 25 items a BatchWriteItem call.",
        "Stream records are kept 24 hours; a token's window is 10 minutes.",
        "Host names: localhost, *.localhost, 127.x.y.z, [::1]; a 0x1F byte.",
        "Formats: 45s, 12m05s, 15%; the instructions in docs/testing.md; ms and us alone.",
        "SWEEP_CHORE_S of work per batch, as set; five years in the past.",
    ]
    for text in contracts:
        assert MEASUREMENT.search(text) is None, text
    for text in ("170 µs", "1-8 ms", "~6 us", "40ns", "12 microseconds", "0.88x", "3.5-5x",
                 "P99", "p50", "callgrind", "1.2 M instructions"):  # fmt: skip
        assert MEASUREMENT.search(text) is not None, text
