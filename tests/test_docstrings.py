"""Comments state contracts (issue 25): the rules for docstrings, checked on the source tree.

* Every module docstring under ``src/firstwrite`` is at most :data:`MAX_MODULE_DOCSTRING_LINES`
  lines, and its first line says what the module is: one line, ending with a period or a colon.
* No docstring or comment under ``src/`` carries a measurement, which goes stale: a µs/ms/ns
  timing, a ratio such as ``1.9x`` or ``2.2-3x``, a percentile (p50, p99), an instruction
  count or "callgrind". Measurements live in ``docs/`` and ``BENCHMARKS.md``. Limits that are
  DynamoDB's ("400 KB", "100 items", "1,000 WCU", transactions at "2x") are contracts and do
  not match.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
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


# --- the source tree ---------------------------------------------------------------------------


def test_module_docstrings_are_short_and_say_what_the_module_is_and_carry_no_measurement() -> None:
    breaches = check_tree(PACKAGE)
    assert breaches == [], "\n".join(breaches)


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
