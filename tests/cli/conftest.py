"""Fixtures for the CLI tests: the command run in process (``cli``) and as a real process
(``run_cli``), each with its own local database and no AWS configuration from the machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from firstwrite.cli import main


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


@pytest.fixture
def clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The environment a user without AWS configuration has, with the default local database
    under ``tmp_path``; applied to this process and returned for subprocesses."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    env = {
        "FIRSTWRITE_LOCAL_DB": str(tmp_path / "home" / "local.db"),
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "AWS_EC2_METADATA_DISABLED": "true",
        "HOME": str(tmp_path / "home"),
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


@pytest.fixture
def cli(clean_env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> Callable[..., Result]:
    """``cli("keys", "list")``: ``firstwrite`` run in this process."""

    def run(*argv: str) -> Result:
        capsys.readouterr()
        try:
            code = main(list(argv))
        except SystemExit as exc:  # argparse: --help, --version, usage errors
            code = int(exc.code or 0)
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


@pytest.fixture
def run_cli(clean_env: dict[str, str]) -> Callable[..., Result]:
    """``run_cli("race", ...)``: ``python -m firstwrite.cli`` as a real process."""

    def run(*argv: str, timeout: float = 120, **env: str) -> Result:
        done = subprocess.run(
            [sys.executable, "-m", "firstwrite.cli", *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, **clean_env, **env},
        )
        return Result(done.returncode, done.stdout, done.stderr)

    return run


def _one_line_error(result: Result) -> str:
    assert "Traceback" not in result.err, result.err
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith("firstwrite: "), result.err
    return lines[0]


@pytest.fixture
def one_line_error() -> Callable[[Result], str]:
    """``one_line_error(result)``: the error line of a failed command, checked to be one
    ``firstwrite: ...`` line and no traceback."""
    return _one_line_error
