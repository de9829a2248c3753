"""Programs outside Python that some tests need, and what a test does where one is missing.

``make test`` needs only Python 3.11+ and make; a few suites also drive programs the machine may
lack (``.ci/run`` installs them all). A test that needs one calls :func:`need_tool` (or carries
``@pytest.mark.needs_tool("name", ...)``, which calls it before the test runs):

* the program is found: its path is returned;
* it is missing: the test is skipped with a reason that starts ``missing tool: <name>`` and
  names the command that installs it, and ``tests/conftest.py`` ends the run with one line
  listing every such skip (:func:`summary_line`);
* it is missing and ``FIRSTWRITE_REQUIRE_TOOLS=1`` is set (``.ci/run`` sets it): the test fails
  instead, with the same reason, so a CI machine that lost a tool cannot pass by skipping.

A program is found on ``PATH`` (and, for a daemon Debian installs in ``/usr/sbin``, there too).
``FIRSTWRITE_HIDE_TOOLS=chromium,rabbitmq-server`` makes the named programs count as missing,
to see the skips on a machine that has them (``PATH`` alone cannot hide ``/usr/bin/chromium``
without hiding ``/usr/bin``).
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import pytest

REQUIRE_ENV = "FIRSTWRITE_REQUIRE_TOOLS"
HIDE_ENV = "FIRSTWRITE_HIDE_TOOLS"
PREFIX = "missing tool: "


@dataclass(frozen=True)
class Tool:
    name: str
    install: str
    #: Searched after ``PATH``: where Debian puts the program when ``PATH`` may lack it.
    also_in: tuple[str, ...] = ()


#: Every program a test may need, with the command that installs it on Debian or Ubuntu
#: (``.ci/run`` installs the same packages).
TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in (
        Tool("node", "apt-get install -y nodejs"),
        Tool("npm", "apt-get install -y npm"),
        Tool("wrk", "apt-get install -y wrk"),
        Tool("valgrind", "apt-get install -y valgrind"),
        Tool("curl", "apt-get install -y curl"),
        Tool("chromium", "apt-get install -y chromium"),
        Tool("rabbitmq-server", "apt-get install -y rabbitmq-server", also_in=("/usr/sbin",)),
    )
}


def _hidden() -> set[str]:
    return {name.strip() for name in os.environ.get(HIDE_ENV, "").split(",") if name.strip()}


def tool_path(name: str) -> str | None:
    """Where ``name`` is, or None (missing, or hidden by ``FIRSTWRITE_HIDE_TOOLS``)."""
    if name in _hidden():
        return None
    tool = TOOLS.get(name)
    search = os.pathsep.join([os.environ.get("PATH", os.defpath), *(tool.also_in if tool else ())])
    return shutil.which(name, path=search)


def missing_reason(name: str, install: str | None = None) -> str:
    """``missing tool: <name> (install: <command>)``: the skip reason for a missing program."""
    command = install or (TOOLS[name].install if name in TOOLS else f"install {name}")
    return f"{PREFIX}{name} (install: {command})"


def tools_required() -> bool:
    return os.environ.get(REQUIRE_ENV, "") not in ("", "0")


def need_tool(name: str, install: str | None = None) -> str:
    """The path of the program ``name``; where it is missing, skip the calling test (or fail
    it under ``FIRSTWRITE_REQUIRE_TOOLS=1``) with :func:`missing_reason`."""
    found = tool_path(name)
    if found is not None:
        return found
    reason = missing_reason(name, install)
    if tools_required():
        pytest.fail(f"{reason}; {REQUIRE_ENV}=1 forbids skipping", pytrace=False)
    pytest.skip(reason)


def need_tools(names: Iterable[str]) -> None:
    """:func:`need_tool` for each name, in order (the first missing one skips)."""
    for name in names:
        need_tool(name)


def summary_line(skip_reasons: Iterable[str]) -> str | None:
    """One line for the end of a run: how many tests each missing tool skipped, and how to
    install it; None when no test was skipped for a missing tool."""
    counts = Counter(reason[reason.index(PREFIX) :] for reason in skip_reasons if PREFIX in reason)
    if not counts:
        return None
    parts = [f"{reason.removeprefix(PREFIX)} x{n}" for reason, n in sorted(counts.items())]
    total = sum(counts.values())
    return (
        f"missing tools skipped {total} test{'s' if total > 1 else ''}: "
        + "; ".join(parts)
        + f" ({REQUIRE_ENV}=1 makes these failures)"
    )
