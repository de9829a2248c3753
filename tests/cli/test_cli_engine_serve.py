"""``firstwrite engine serve``: starts, answers real SDK calls, stops cleanly on signals."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from firstwrite.cli import build_parser, main
from firstwrite.engine.binding.sync import dummy_session

NO_RETRIES = Config(retries={"max_attempts": 0})


def client(url: str, key: str = "AKIDANY", secret: str = "any") -> Any:
    session = boto3.session.Session(botocore_session=dummy_session())
    return session.client(
        "dynamodb",
        region_name="us-east-1",
        endpoint_url=url,
        aws_access_key_id=key,
        aws_secret_access_key=secret,
        config=NO_RETRIES,
    )


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serve_answers_and_stops_cleanly(
    tmp_path: Path, cli_server: Callable[..., Any], sig: int
) -> None:
    db = tmp_path / "cli.db"
    server = cli_server("--durability", "full", db_path=db)
    assert server.url.startswith("http://127.0.0.1:")
    assert int(server.url.rsplit(":", 1)[1]) > 0  # --port 0 reported the real port
    assert httpx.get(server.url).text == "healthy: " + server.url.removeprefix("http://")
    assert client(server.url).list_tables()["TableNames"] == []
    status = server.stop(sig)
    assert status == 0, server.log()
    assert db.exists()
    # The port is free again.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", int(server.url.rsplit(":", 1)[1])))


def test_require_auth(cli_server: Callable[..., Any]) -> None:
    server = cli_server("--require-auth", "AKIDGOOD:s3cret:with:colons")
    good = client(server.url, "AKIDGOOD", "s3cret:with:colons")
    assert good.list_tables()["TableNames"] == []
    with pytest.raises(ClientError) as info:
        client(server.url, "AKIDBAD", "x").list_tables()
    assert info.value.response["Error"]["Code"] == "UnrecognizedClientException"
    assert server.stop() == 0


def test_the_console_is_served_and_behind_auth(cli_server: Callable[..., Any]) -> None:
    open_server = cli_server()
    page = httpx.get(f"{open_server.url}/console/race")
    assert page.status_code == 200 and "Race N claims" in page.text
    assert open_server.stop() == 0

    guarded = cli_server("--require-auth", "AKIDGOOD:s3cret")
    assert httpx.get(f"{guarded.url}/console/race").status_code == 401
    # A browser opening a page is sent to the console's sign-in page, and back afterwards.
    page = httpx.get(f"{guarded.url}/console/race", headers={"Accept": "text/html"})
    assert page.status_code == 303
    assert page.headers["location"] == "/console/login?next=%2Fconsole%2Frace"
    assert httpx.get(f"{guarded.url}/console/login").status_code == 200
    with httpx.Client(base_url=guarded.url) as browser:
        login = browser.post(
            "/_firstwrite/session",
            json={"access_key_id": "AKIDGOOD", "secret_access_key": "s3cret"},
        )
        assert login.status_code in (200, 201, 204), login.text
        assert browser.get("/console/race").status_code == 200
    assert guarded.stop() == 0


def test_port_in_use_is_a_one_line_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "firstwrite.cli", "engine", "serve", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "FIRSTWRITE_LOCAL_DB": str(tmp_path / "local.db")},
        )
    assert result.returncode == 1
    assert result.stderr.startswith("firstwrite: ")
    assert "Traceback" not in result.stderr and "[Errno" not in result.stderr
    # which address is busy, and which option moves it
    assert f"cannot listen on 127.0.0.1:{port} (--port): " in result.stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_without_db_it_serves_the_default_database_and_says_it_stopped(
    tmp_path: Path, sig: int
) -> None:
    """The database every other command opens by default ($FIRSTWRITE_LOCAL_DB, made if its
    directory is missing), not an in-memory one; a signal ends it with a line saying so."""
    default = tmp_path / "home" / ".firstwrite" / "local.db"
    process = subprocess.Popen(
        [sys.executable, "-m", "firstwrite.cli", "engine", "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "FIRSTWRITE_LOCAL_DB": str(default), "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        ready = process.stdout.readline()
        assert ready.startswith("firstwrite engine listening on "), ready
        assert f"(db {default}," in ready
        url = ready.split()[4]
        client(url).create_table(
            TableName="kept",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        process.send_signal(sig)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, err
    assert out.splitlines()[-1] == "firstwrite engine stopped"
    from firstwrite.engine import Engine, local_client

    with Engine(default) as engine:  # the table outlived the server, in that file
        assert local_client(engine).list_tables()["TableNames"] == ["kept"]


def test_db_memory_keeps_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    default = tmp_path / "local.db"
    monkeypatch.setenv("FIRSTWRITE_LOCAL_DB", str(default))
    seen: dict[str, Any] = {}

    def fake_serve(engine: Any, host: str, port: int, **kwargs: Any) -> None:
        seen["path"] = engine.path
        kwargs["ready"]("http://127.0.0.1:1234")

    monkeypatch.setattr("firstwrite.engine.server.app.serve", fake_serve)
    assert main(["engine", "serve", "--port", "0", "--db", ":memory:"]) == 0
    assert seen["path"] is None and not default.exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["engine", "serve", "--require-auth", "no-colon"],
        ["engine", "serve", "--port", "70000"],
        ["engine", "serve", "--durability", "sometimes"],
        ["engine"],
        [],
    ],
)
def test_bad_arguments_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert "usage: firstwrite" in capsys.readouterr().err


def test_parser_defaults() -> None:
    args = build_parser().parse_args(["engine", "serve"])
    assert (args.host, args.port, args.db, args.durability, args.require_auth) == (
        "127.0.0.1",
        8000,
        None,
        "normal",
        [],
    )


def test_console_script_is_installed() -> None:
    script = Path(sys.executable).parent / "firstwrite"
    if not script.exists():
        pytest.skip("package not installed with its console script")
    result = subprocess.run(
        [str(script), "engine", "serve", "--help"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0
    assert "--require-auth" in result.stdout


def test_db_in_a_missing_directory_is_a_one_line_error(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such" / "engine.db"
    result = subprocess.run(
        [sys.executable, "-m", "firstwrite.cli", "engine", "serve", "--db", str(missing)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"firstwrite: --db {missing}: directory {missing.parent} does not exist"
    ]


def test_server_construction_is_one_function(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Everything `engine serve` passes to the server goes through run_server (where the
    console mounts its routes): its arguments come from the command line."""

    monkeypatch.setenv("FIRSTWRITE_LOCAL_DB", str(tmp_path / "local.db"))
    seen: dict[str, Any] = {}

    def fake_serve(engine: Any, host: str, port: int, **kwargs: Any) -> None:
        seen.update(host=host, port=port, **kwargs)
        kwargs["ready"]("http://127.0.0.1:1234")

    monkeypatch.setattr("firstwrite.engine.server.app.serve", fake_serve)
    assert main(["engine", "serve", "--port", "0", "--threads", "3"]) == 0
    assert (seen["host"], seen["port"], seen["threads"]) == ("127.0.0.1", 0, 3)
    assert list(seen["mounts"]) == ["/console"]
    seen.clear()
    assert main(["engine", "serve", "--port", "0", "--no-console"]) == 0
    assert seen["mounts"] == {}


def test_a_port_that_is_no_number_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["engine", "serve", "--port", "abc"])
    assert info.value.code == 2
    assert "argument --port: not a port number: 'abc'" in capsys.readouterr().err
