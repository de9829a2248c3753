"""``firstwrite keys get`` on results kept in a result store or sealed (where they live; opened
only with the key), and ``firstwrite results orphans``."""

from __future__ import annotations

import base64
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from firstwrite.engine import Engine, local_client
from firstwrite.idempotency import Idempotency, IdempotencyConfig
from firstwrite.idempotency.result_cipher import LocalKeyCipher
from firstwrite.idempotency.result_store import DirectoryResultStore, ResultAddress

KEY = os.urandom(32)
SECRET = "tok_sss" + base64.b64encode(os.urandom(100_000)).decode()  # goes to the store


def _write(tmp_path: Path) -> tuple[str, str]:
    db, folder = str(tmp_path / "r.db"), str(tmp_path / "results")
    config = IdempotencyConfig(
        result_store=DirectoryResultStore(folder),
        result_cipher=LocalKeyCipher({"k1": KEY}, "k1"),
        result_store_threshold=1024,
    )
    with Engine(db) as engine:
        guard = Idempotency(config, client=local_client(engine))
        guard.ensure_table()
        guard.run("doc-1", lambda: {"token": SECRET})
        guard.run("small-1", lambda: {"token": "tok_small"})
    return db, folder


def test_keys_get_shows_where_a_result_lives_and_opens_it_only_with_the_key(
    tmp_path: Path, cli: Callable[..., Any]
) -> None:
    db, folder = _write(tmp_path)
    shown = cli("keys", "get", "doc-1", "--db", db, "--json").json()
    assert shown["result_at"]["where"] == "store" and shown["result_at"]["sealed"] is True
    assert "tok_" not in str(shown)
    text = cli("keys", "get", "small-1", "--db", db)
    assert "sealed" in text.out and "tok_small" not in text.out
    key = "k1=" + base64.b64encode(KEY).decode()
    opened = cli("keys", "get", "doc-1", "--db", db, "--result-dir", folder, "--local-key", key)
    assert opened.code == 0 and "tok_sss" in opened.out
    wrong = "k1=" + base64.b64encode(os.urandom(32)).decode()
    refused = cli("keys", "get", "doc-1", "--db", db, "--result-dir", folder, "--local-key", wrong)
    assert refused.code == 1
    assert (
        "cannot open the result" in refused.err and "does not open for this record" in refused.err
    )


def test_results_orphans_lists_and_deletes_objects_no_record_points_at(
    tmp_path: Path, cli: Callable[..., Any]
) -> None:
    db, folder = _write(tmp_path)
    store = DirectoryResultStore(folder)
    table = IdempotencyConfig().table_name
    store.put(ResultAddress(table, "IDEMPOTENCY#gone", "a" * 32), b"left behind")
    store.put(ResultAddress(table, "IDEMPOTENCY#doc-1", "b" * 32), b"an older claim's")
    listed = cli("results", "orphans", "--db", db, "--result-dir", folder, "--json").json()
    whys = sorted((o["record_id"], o["why"]) for o in listed["orphans"])
    assert whys == [
        ("IDEMPOTENCY#doc-1", "record points elsewhere"),
        ("IDEMPOTENCY#gone", "record gone"),
    ]
    cli("results", "orphans", "--db", db, "--result-dir", folder, "--delete")
    assert len(list(store.objects())) == 1  # doc-1's own object stays
    again = cli("results", "orphans", "--db", db, "--result-dir", folder)
    assert again.out.strip() == "no orphans"
