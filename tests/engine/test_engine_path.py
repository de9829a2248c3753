"""An engine opened on a relative path keeps using that file after the process changes
directory: the path is resolved once, where the engine is built (SQLite would resolve it
again for every connection opened later, against the working directory of that moment)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from firstwrite.engine import Engine

TABLE = {
    "TableName": "paths",
    "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
    "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
    "BillingMode": "PAY_PER_REQUEST",
}
KEY = {"pk": {"S": "kept"}}


def _in_new_thread(engine: Engine, operation: str, request: dict[str, Any]) -> Any:
    """``engine.execute`` from a thread that has never used the engine: it opens its own
    SQLite connection, after the chdir."""
    answers: list[Any] = []
    thread = threading.Thread(target=lambda: answers.append(engine.execute(operation, request)))
    thread.start()
    thread.join(30)
    return answers[0]


def test_a_relative_path_is_made_absolute_where_the_engine_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with Engine("local.db") as engine:
        assert engine.path == str(tmp_path / "local.db")
        assert os.path.isabs(engine.path)


def test_connections_opened_after_a_chdir_use_the_same_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with Engine("local.db") as engine:
        engine.execute("CreateTable", TABLE)
        engine.execute("PutItem", {"TableName": "paths", "Item": {**KEY, "n": {"N": "1"}}})
        monkeypatch.chdir(elsewhere)
        listed = _in_new_thread(engine, "ListTables", {})
        got = _in_new_thread(engine, "GetItem", {"TableName": "paths", "Key": KEY})
        _in_new_thread(engine, "PutItem", {"TableName": "paths", "Item": {"pk": {"S": "later"}}})
    assert listed["TableNames"] == ["paths"]
    assert got["Item"] == {**KEY, "n": {"N": "1"}}
    assert not (elsewhere / "local.db").exists()
    with Engine(tmp_path / "local.db") as reopened:  # the write after the chdir is in the file
        later = reopened.execute("GetItem", {"TableName": "paths", "Key": {"pk": {"S": "later"}}})
    assert later["Item"] == {"pk": {"S": "later"}}


def test_a_real_process_that_changes_directory_keeps_its_database(tmp_path: Path) -> None:
    # A real chdir in a real process, as an application (or a test runner) does it, with the
    # TTL sweeper's thread and a worker thread opening their connections after it.
    (tmp_path / "elsewhere").mkdir()
    script = textwrap.dedent(
        f"""
        import os, threading
        from firstwrite.engine import Engine

        engine = Engine("local.db")
        engine.execute("CreateTable", {TABLE!r})
        os.chdir("elsewhere")
        thread = threading.Thread(target=lambda: engine.execute(
            "PutItem", {{"TableName": "paths", "Item": {KEY!r}}}))
        thread.start()
        thread.join()
        print(engine.path)
        engine.close()
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(tmp_path / "local.db")
    assert not (tmp_path / "elsewhere" / "local.db").exists()
    with Engine(tmp_path / "local.db") as engine:
        assert engine.execute("GetItem", {"TableName": "paths", "Key": KEY})["Item"] == KEY


def test_memory_is_sqlites_name_for_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with Engine(":memory:") as engine:
        assert engine.path is None
        engine.execute("CreateTable", TABLE)
        engine.execute("PutItem", {"TableName": "paths", "Item": KEY})
        assert _in_new_thread(engine, "GetItem", {"TableName": "paths", "Key": KEY})["Item"] == KEY
    assert list(tmp_path.iterdir()) == []  # no file named ":memory:" (or its WAL) was made
