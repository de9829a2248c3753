"""``firstwrite demo``: its options and how it hands them to ``firstwrite.demo.serve`` (the
service itself is tested end to end with the demo)."""

from __future__ import annotations

import subprocess
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from firstwrite.cli import build_parser


def test_defaults() -> None:
    args = build_parser().parse_args(["demo"])
    assert (args.host, args.port, args.engine_port, args.db) == (
        "127.0.0.1",
        8080,
        8000,
        "firstwrite-local.db",
    )


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """A stand-in ``firstwrite.demo`` that records what it was asked to serve."""
    calls: list[tuple[Any, ...]] = []
    module = types.ModuleType("firstwrite.demo")
    module.serve = lambda *args, **kw: calls.append(args + ((kw,) if kw else ()))  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "firstwrite.demo", module)
    return calls


def test_options_reach_the_service(
    cli: Callable[..., Any], served: list[tuple[Any, ...]], tmp_path: Path
) -> None:
    db = str(tmp_path / "demo.db")
    result = cli("demo", "--host", "0.0.0.0", "--port", "9090", "--engine-port", "0", "--db", db)
    assert result.code == 0, result.err
    assert served == [("0.0.0.0", 9090, 0, db)]


def test_allowed_hosts_reach_the_service(
    cli: Callable[..., Any], served: list[tuple[Any, ...]], tmp_path: Path
) -> None:
    db = str(tmp_path / "demo.db")
    result = cli("demo", "--db", db, "--allow-host", "demo.test", "--allow-host", "other.test")
    assert result.code == 0, result.err
    assert served == [("127.0.0.1", 8080, 8000, db, {"allowed_hosts": ["demo.test", "other.test"]})]


def test_aws_runs_it_on_dynamodb_with_no_local_database(
    cli: Callable[..., Any], served: list[tuple[Any, ...]]
) -> None:
    # No engine: the --db directory and the engine port are not the demo's concern then.
    result = cli("demo", "--aws", "--db", "/no/such/dir/demo.db", "--engine-port", "8080")
    assert result.code == 0, result.err
    assert served == [("127.0.0.1", 8080, 8080, "/no/such/dir/demo.db", {"aws": True})]


def test_python_dash_m_is_the_same_command(tmp_path: Path) -> None:
    # `python -m firstwrite.demo` is `firstwrite demo`: the same options, errors and statuses.
    run = [sys.executable, "-m", "firstwrite.demo"]
    shown = subprocess.run([*run, "--help"], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and "--aws" in shown.stdout and "--engine-port" in shown.stdout
    db = str(tmp_path / "no" / "demo.db")
    refused = subprocess.run([*run, "--db", db], capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        f"firstwrite: --db {db}: directory {tmp_path / 'no'} does not exist"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--port", "8000", "--engine-port", "8000"], "are both 8000"),
        (["--db", "/no/such/dir/demo.db"], "directory /no/such/dir does not exist"),
    ],
)
def test_bad_options_are_one_line_errors(
    cli: Callable[..., Any],
    one_line_error: Callable[..., str],
    served: list[tuple[Any, ...]],
    argv: list[str],
    message: str,
) -> None:
    result = cli("demo", *argv)
    assert result.code == 1
    assert message in one_line_error(result)
    assert served == []


def test_port_out_of_range_is_a_usage_error(cli: Callable[..., Any]) -> None:
    assert cli("demo", "--port", "70000").code == 2


def test_without_the_demo_module(
    cli: Callable[..., Any], one_line_error: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "firstwrite.demo", None)  # import fails
    result = cli("demo")
    assert result.code == 1
    assert "the demo service cannot start" in one_line_error(result)
