"""Real Chromium for the browser tests: Debian's ``chromium`` (``/usr/bin/chromium``), headless,
driven by Playwright. Playwright's own browsers are never downloaded (``.ci/run`` installs the
Debian package); a test module that needs the browser marks itself with :func:`needs_chromium`
and is skipped where it is absent, as ``tests/tools.py`` skips any missing program. The ``playwright`` fixture (``tests/conftest.py``)
starts Playwright once per module; :func:`launch` and :func:`launch_persistent` start Chromium
with the options every browser test uses.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tools import tool_path

CHROMIUM = Path("/usr/bin/chromium")  # Debian's, found on PATH by tools.tool_path
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def needs_chromium(*, unless_env: str | None = None) -> pytest.MarkDecorator:
    """Skip where Chromium is absent (``tools.need_tool``), unless the environment variable
    ``unless_env`` is set (a run that was asked for the browser's output must fail loudly
    instead)."""
    if unless_env is not None and os.environ.get(unless_env):
        return pytest.mark.needs_tool()
    return pytest.mark.needs_tool("chromium")


def _executable() -> str:
    return tool_path("chromium") or str(CHROMIUM)


def launch(playwright: Any, **options: Any) -> Any:
    """A headless Chromium (``playwright.chromium.launch``); close it when done."""
    return playwright.chromium.launch(
        executable_path=_executable(), headless=True, args=ARGS, **options
    )


def launch_persistent(playwright: Any, profile: Path, **options: Any) -> Any:
    """A headless Chromium context on its own profile directory (its own cookies and storage);
    close it when done."""
    return playwright.chromium.launch_persistent_context(
        str(profile), executable_path=_executable(), headless=True, args=ARGS, **options
    )
