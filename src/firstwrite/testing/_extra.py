"""The local engine is an extra (``firstwrite[engine]``): import it only when a test needs it,
and say how to get it when it is missing."""

from __future__ import annotations

import importlib
from types import ModuleType


class EngineMissingError(ImportError):
    """firstwrite.testing needed the local engine and its extra is not installed."""


def require(module: str = "firstwrite.engine.api", *, extra: str = "engine") -> ModuleType:
    """Import ``module``; a missing third-party dependency becomes :class:`EngineMissingError`
    naming the extra to install (a missing firstwrite module is a real bug and propagates)."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        missing = exc.name or "?"
        if missing.split(".")[0] == "firstwrite":
            raise
        raise EngineMissingError(
            f"firstwrite.testing needs firstwrite's local engine, which is an extra: "
            f"pip install 'firstwrite[{extra}]' (missing module: {missing})",
            name=missing,
        ) from exc
