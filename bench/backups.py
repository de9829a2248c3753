"""Backup and restore of big tables, against copying the database file (a same-run floor).

For each size, a table of that many items (about 100 bytes each) in an engine's own file: the
time of ``CreateBackup``, of ``RestoreTableFromBackup`` and of a ``RestoreTableToPointInTime``
(recovery on, a thousandth of the items changed after the instant restored to), against the
time of copying the whole database file with ``shutil.copyfile`` after a WAL checkpoint: what
any backup of those items must at least read and write, measured in the same run.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ._common import Section, Series, Settings, Table, Target, scratch_dir

SIZES = (100_000, 1_000_000)
QUICK_SIZES = (2_000, 20_000)
COPY = "file copy (floor)"
BACKUP = "CreateBackup"
RESTORE = "RestoreTableFromBackup"
POINT = "RestoreTableToPointInTime"
# A backup or restore moves the rows through SQLite's B-trees, where the copy is the kernel's
# memcpy of pages: within 30x of it (1e6 items, 2-core dev machine: backup and restore about
# 2 s each, the copy 0.1 s from the page cache).
TARGET_BACKUP = 30.0
TARGET_RESTORE = 30.0
_FILL_BATCH = 10_000
_PAYLOAD = "x" * 80


def _fill(engine: Any, count: int) -> None:
    """``count`` items in table ``big``, written straight to storage in big transactions."""
    from firstwrite.engine.item_keys import item_key
    from firstwrite.engine.values import item_size

    engine.execute(
        "CreateTable",
        {
            "TableName": "big",
            "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
            "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
            "BillingMode": "PAY_PER_REQUEST",
        },
    )
    row = engine.storage.read(lambda r: r.table("us-east-1", "big"))

    def batch(w: Any, start: int, stop: int) -> None:
        for i in range(start, stop):
            item = {"pk": {"S": f"item-{i:08d}"}, "payload": {"S": _PAYLOAD}}
            pk, sk = item_key(row.key_schema, item)
            w.put(row.id, pk, sk, item_size(item), item)

    for start in range(0, count, _FILL_BATCH):
        stop = min(count, start + _FILL_BATCH)
        engine.storage.write(lambda w, a=start, b=stop: batch(w, a, b))


def _checkpoint(path: Path) -> None:
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    finally:
        conn.close()


def _timed(series: Series, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``, its time appended to ``series``; returns what it returned."""
    os.sync()  # no contender pays for the write-back of another's dirty pages
    t0 = time.perf_counter()
    result = fn(*args)
    series.values.append(time.perf_counter() - t0)
    return result


def _repetition(
    engine: Any, path: Path, copy: Path, rep: int, instant: float, series: dict[str, Series]
) -> None:
    """One repetition: the copy, a backup, both restores; then drop what they made."""
    _checkpoint(path)
    _timed(series[COPY], shutil.copyfile, path, copy)
    copy.unlink()
    made = _timed(
        series[BACKUP],
        engine.execute,
        "CreateBackup",
        {"TableName": "big", "BackupName": f"bench-{rep}"},
    )
    arn = made["BackupDetails"]["BackupArn"]
    _timed(
        series[RESTORE],
        engine.execute,
        "RestoreTableFromBackup",
        {"TargetTableName": "restored", "BackupArn": arn},
    )
    point = {"SourceTableName": "big", "TargetTableName": "point", "RestoreDateTime": instant}
    _timed(series[POINT], engine.execute, "RestoreTableToPointInTime", point)
    for name in ("restored", "point"):
        engine.execute("DeleteTable", {"TableName": name})
    engine.execute("DeleteBackup", {"BackupArn": arn})


def measure(settings: Settings, log: Callable[[str], None], sizes: tuple[int, ...]) -> list[Table]:
    from firstwrite.engine import Engine

    tables = []
    with scratch_dir("backups-") as directory:
        for size in sizes:
            path = directory / f"backups-{size}.db"
            table = Table(
                title=f"{size:,} items",
                series=[Series(n, unit="s") for n in (COPY, BACKUP, RESTORE, POINT)],
                ours=[BACKUP, RESTORE, POINT],
                targets=[
                    Target(BACKUP, COPY, maximum=TARGET_BACKUP),
                    Target(RESTORE, COPY, maximum=TARGET_RESTORE),
                    Target(POINT, COPY, maximum=TARGET_RESTORE),
                ],
            )
            engine = Engine(path)
            try:
                engine.clock.freeze(time.time() - 3600)
                t0 = time.perf_counter()
                _fill(engine, size)
                log(f"  {size:,} items written in {time.perf_counter() - t0:.1f} s")
                engine.execute(
                    "UpdateContinuousBackups",
                    {
                        "TableName": "big",
                        "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
                    },
                )
                instant = engine.clock.advance(1)
                engine.clock.advance(1)
                for i in range(0, size, 1000):  # a thousandth of the items changed after it
                    engine.execute(
                        "PutItem", {"TableName": "big", "Item": {"pk": {"S": f"item-{i:08d}"}}}
                    )
                engine.clock.advance(600)
                series = {s.name: s for s in table.series}
                for rep in range(settings.reps):
                    _repetition(engine, path, directory / "copy.db", rep, instant, series)
                    log(
                        f"    rep {rep + 1}: "
                        + ", ".join(f"{s.name}={s.values[-1]:.3f} s" for s in table.series)
                    )
                count = engine.execute("DescribeTable", {"TableName": "big"})["Table"]["ItemCount"]
                assert count == size, count
            finally:
                engine.close()
            table.extra["database file (MiB)"] = {COPY: f"{path.stat().st_size / 2**20:.0f}"}
            tables.append(table)
    return tables


def run(settings: Settings, log: Callable[[str], None]) -> Section:
    sizes = QUICK_SIZES if settings.quick else SIZES
    section = Section(
        key="backups",
        title="Backup and restore vs copying the database file",
        method=[
            "One engine on its own file per size, a table of N items of about 100 bytes "
            "written straight to storage; point-in-time recovery on, then a thousandth of the "
            "items rewritten after the instant the point-in-time restore goes back to.",
            f"**{COPY}**: `shutil.copyfile` of the database file after a WAL checkpoint "
            "(TRUNCATE): every byte of the items read and written once, the least a copy of "
            "them costs. Measured in the same run, beside each repetition. Every contender "
            "starts after an `os.sync()`, so none pays for another's write-back.",
            f"**{BACKUP}**, **{RESTORE}**, **{POINT}**: `Engine.execute` of each, timed "
            "alone; the restored tables and the backup are deleted after each repetition "
            "(not timed).",
            f"Targets: {BACKUP} <= {TARGET_BACKUP:g}x the copy, each restore <= "
            f"{TARGET_RESTORE:g}x. {settings.reps} repetitions; sizes "
            f"{', '.join(f'{n:,}' for n in sizes)}.",
        ],
    )
    section.tables.extend(measure(settings, log, sizes))
    return section
