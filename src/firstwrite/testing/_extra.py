"""The optional extras: the local engine (``firstwrite[engine]``) and aiobotocore.

Both (``firstwrite[engine]``, ``firstwrite[async]``) are imported only when a test needs them,
saying which to install when one is missing."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, overload

# The extra that brings a missing top-level module, and what it is for; anything else is the
# engine's (lark, msgpack, uvicorn, ...).
_EXTRA_OF = {"aiobotocore": "async", "aiohttp": "async"}
_WHAT = {"engine": "firstwrite's local engine", "async": "aiobotocore"}


class MissingExtraError(ImportError):
    """firstwrite.testing needed an extra (the engine, aiobotocore) that is not installed."""


@overload
def require(module: str) -> ModuleType: ...
@overload
def require(module: str, name: str) -> Any: ...
def require(module: str, name: str | None = None) -> Any:
    """Import ``module`` (and get its attribute ``name``: a lazily loaded one imports what it
    needs then); a missing third-party dependency becomes :class:`MissingExtraError` naming the
    extra to install (a missing firstwrite module is a real bug and propagates)."""
    try:
        loaded = importlib.import_module(module)
        return loaded if name is None else getattr(loaded, name)
    except ModuleNotFoundError as exc:
        missing = exc.name or "?"
        top = missing.split(".")[0]
        if top == "firstwrite":
            raise
        extra = _EXTRA_OF.get(top, "engine")
        raise MissingExtraError(
            f"firstwrite.testing needs {_WHAT[extra]}, which is an extra: "
            f"pip install 'firstwrite[{extra}]' (missing module: {top})",
            name=missing,
        ) from exc
