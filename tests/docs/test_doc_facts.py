"""Numbers and defaults stated in README.md and docs/*.md are the code's.

Each fact is a pattern over the text, with the value the code has: a statement that no longer
matches the code fails here, naming the file and what it says. Every pattern must match at
least once, so rewording a statement without keeping it checked fails too (add it here).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tools import TOOLS

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def _scenario_count() -> str:
    from firstwrite.console.scenarios import count_in_words

    return count_in_words()


def _config(name: str) -> Callable[[], str]:
    def value() -> str:
        from firstwrite.idempotency import IdempotencyConfig

        return _number(getattr(IdempotencyConfig(), name))

    return value


def _number(value: object) -> str:
    assert isinstance(value, int | float), value
    return f"{value:g}"


def _http(name: str, unit: int = 1) -> Callable[[], str]:
    def value() -> str:
        from firstwrite.http import HttpConfig

        return _number(getattr(HttpConfig(), name) / unit)

    return value


def _lease_margin() -> str:
    import inspect

    from firstwrite.events import SQSBatch

    return _number(inspect.signature(SQSBatch).parameters["lease_margin"].default)


def _retry_attempts() -> str:
    from firstwrite.idempotency.config import RetryPolicy

    return _number(RetryPolicy().max_attempts)


def _retry_after() -> str:
    from firstwrite.idempotency.config import RetryAfter

    default = RetryAfter()
    return f"{default.expected}, {default.poll}"


@dataclass(frozen=True)
class Fact:
    what: str
    pattern: str  # its first group is the stated value
    value: Callable[[], str]


_WORD = r"(one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|\d+)"

FACTS = [
    Fact(
        "the number of console scenarios",
        _WORD + r" (?:guided )?(?:failure )?(?:scenarios|guided failure cases)",
        _scenario_count,
    ),
    Fact(
        "the default wait of a duplicate for the first request",
        r"in_progress_wait`?[^()\n]{0,40}\((\d+(?:\.\d+)?) s by default",
        _config("in_progress_wait"),
    ),
    Fact(
        "the default wait, in http.md's table of answers",
        r"finishes within the wait \((\d+(?:\.\d+)?) s by default\)",
        _config("in_progress_wait"),
    ),
    Fact(
        "the default time budget of a call",
        r"(?:`IdempotencyConfig\(budget=(\d+(?:\.\d+)?)\)` by default"
        r"|IdempotencyConfig\.budget`, (\d+(?:\.\d+)?) s by default)",
        _config("budget"),
    ),
    Fact("the default lease", r"whole lease \((\d+(?:\.\d+)?) s by default\)", _config("lease")),
    Fact(
        "the Lambda sources' lease margin",
        r"less `lease_margin`, (\d+(?:\.\d+)?) s by default",
        _lease_margin,
    ),
    Fact(
        "the retry policy's attempts", r"attempts are spent \((\d+) by default\)", _retry_attempts
    ),
    Fact(
        "RetryAfter's default",
        r"`RetryAfter\(\)` \(the default: `expected=([\d.]+, )poll=([\d.]+)`\)",
        _retry_after,
    ),
    Fact(
        "HttpConfig.max_key_length", r"\| `max_key_length` \| `(\d+)` \|", _http("max_key_length")
    ),
    Fact(
        "HttpConfig.max_request_body",
        r"\| `max_request_body` \| (\d+) MiB \|",
        _http("max_request_body", 1024 * 1024),
    ),
    Fact(
        "HttpConfig.max_stored_response",
        r"\| `max_stored_response` \| (\d+) KiB \|",
        _http("max_stored_response", 1024),
    ),
]


def _stated(fact: Fact) -> list[tuple[str, str]]:
    found = []
    for path in DOCS:
        for match in re.finditer(fact.pattern, path.read_text(), flags=re.IGNORECASE):
            said = "".join(group for group in match.groups() if group)
            found.append((path.relative_to(REPO).as_posix(), said))
    return found


def _same(said: str, expected: str) -> bool:
    """Equal as words, or number by number ("10.0" is "10")."""
    if said.lower() == expected.lower():
        return True
    try:
        return [float(x) for x in said.split(",")] == [float(x) for x in expected.split(",")]
    except ValueError:
        return False


@pytest.mark.parametrize("fact", FACTS, ids=lambda fact: fact.what)
def test_what_the_docs_state_is_what_the_code_has(fact: Fact) -> None:
    stated = _stated(fact)
    assert stated, (
        f"no statement of {fact.what} found: reworded? update tests/docs/test_doc_facts.py"
    )
    expected = fact.value()
    wrong = [(where, said) for where, said in stated if not _same(said, expected)]
    assert not wrong, f"{fact.what} is {expected!r} in the code; the docs say {wrong}"


def test_the_facts_fail_on_a_wrong_statement() -> None:
    """The patterns catch a wrong number, not only the right one."""
    text = "run eight guided scenarios; waits up to `in_progress_wait` (3 s by default)"
    assert re.search(FACTS[0].pattern, text).group(1) == "eight"  # type: ignore[union-attr]
    assert re.search(FACTS[1].pattern, text).group(1) == "3"  # type: ignore[union-attr]


def test_the_readme_lists_every_extra() -> None:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    install = (REPO / "README.md").read_text().split("## Install", 1)[1].split("\n## ", 1)[0]
    missing = [name for name in extras if f"`{name}`" not in install and f"[{name}]" not in install]
    assert not missing, f"README's Install section does not name the extras {missing}"


def test_the_readme_lists_every_optional_tool() -> None:
    readme = (REPO / "README.md").read_text()
    rows = {row.split("|")[1].strip() for row in readme.splitlines() if row.startswith("| ")}
    listed = {name.strip() for row in rows for name in row.split(",")}
    assert set(TOOLS) <= listed, f"README's table of optional programs lacks {set(TOOLS) - listed}"
