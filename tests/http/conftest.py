"""Fixtures for the middleware tests (helpers in ``http_support``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def local_client(engine: Any) -> Any:
    """A real boto3 client bound in process to the test's engine file."""
    from firstwrite.engine import local_client as bound

    return bound(engine)


@pytest.fixture
def db_file(tmp_path: Path) -> Path:
    return tmp_path / "http.db"
