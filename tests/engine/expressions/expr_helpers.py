"""Helpers shared by the expression tests."""

from __future__ import annotations

from typing import Any

import pytest

from firstwrite.engine.errors import DynamoDBError
from firstwrite.engine.expressions import Compiled, compile_expressions


def N(x: object) -> dict[str, str]:
    return {"N": str(x)}


def S(x: str) -> dict[str, str]:
    return {"S": x}


def compile_(**kw: Any) -> Compiled:
    return compile_expressions(**kw)


def error(**kw: Any) -> str:
    """The ValidationException message compile_expressions raises for ``kw``."""
    with pytest.raises(DynamoDBError) as info:
        compile_expressions(**kw)
    assert info.value.code == "ValidationException"
    return info.value.message
