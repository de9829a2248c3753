"""Export to and import from S3 of big tables, against copying the database file (a same-run
floor).

For each size, a table of that many items (about 100 bytes each) with point-in-time recovery
on, in an engine's own file: the time of ``ExportTableToPointInTime`` (DynamoDB JSON, gzip) to
moto's S3 server (in this process, in memory, on an ephemeral port), and of ``ImportTable`` of
that export's data files into a new table, against the time of copying the whole database file
with ``shutil.copyfile`` after a WAL checkpoint.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ._common import Section, Series, Settings, Table, Target, scratch_dir
from .backups import _checkpoint, _fill, _timed

SIZES = (100_000, 1_000_000)
QUICK_SIZES = (2_000, 20_000)
COPY = "file copy (floor)"
EXPORT = "ExportTableToPointInTime"
IMPORT = "ImportTable"
# An export encodes, gzips and uploads every item over HTTP; an import downloads, parses and
# writes each through BatchWriteItem (indexes, streams and history kept): both far above a page
# copy (1e5 items on the 2-core dev machine: export about 4 s, import about 18 s, the copy
# 0.05 s).
TARGET_EXPORT = 150.0
TARGET_IMPORT = 600.0
BUCKET = "bench-exports"
_S3_ENV = ("AWS_ENDPOINT_URL_S3", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")


def _repetition(
    engine: Any, path: Path, copy: Path, rep: int, arn: str, series: dict[str, Series]
) -> None:
    _checkpoint(path)
    _timed(series[COPY], shutil.copyfile, path, copy)
    copy.unlink()
    made = _timed(
        series[EXPORT],
        engine.execute,
        "ExportTableToPointInTime",
        {"TableArn": arn, "S3Bucket": BUCKET, "S3Prefix": f"rep{rep}"},
    )["ExportDescription"]
    assert made["ExportStatus"] == "COMPLETED", made
    root = made["ExportManifest"].rsplit("/", 1)[0]
    loaded = _timed(
        series[IMPORT],
        engine.execute,
        "ImportTable",
        {
            "S3BucketSource": {"S3Bucket": BUCKET, "S3KeyPrefix": f"{root}/data/"},
            "InputFormat": "DYNAMODB_JSON",
            "InputCompressionType": "GZIP",
            "TableCreationParameters": {
                "TableName": "imported",
                "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
                "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
                "BillingMode": "PAY_PER_REQUEST",
            },
        },
    )["ImportTableDescription"]
    assert loaded["ImportedItemCount"] == made["ItemCount"], loaded
    engine.execute("DeleteTable", {"TableName": "imported"})


def measure(settings: Settings, log: Callable[[str], None], sizes: tuple[int, ...]) -> list[Table]:
    import boto3
    from moto.server import ThreadedMotoServer

    from firstwrite.engine import Engine

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    # The engine's S3 client is the SDK's: moto's endpoint and fake keys, for this run only.
    saved = {k: os.environ.get(k) for k in _S3_ENV}
    os.environ.update(
        AWS_ENDPOINT_URL_S3=f"http://{host}:{port}",
        AWS_ACCESS_KEY_ID=os.environ.get("AWS_ACCESS_KEY_ID", "AKIDBENCH"),
        AWS_SECRET_ACCESS_KEY=os.environ.get("AWS_SECRET_ACCESS_KEY", "bench-secret"),
    )
    tables = []
    try:
        boto3.client("s3", region_name="us-east-1").create_bucket(Bucket=BUCKET)
        with scratch_dir("transfers-") as directory:
            for size in sizes:
                tables.append(_size(settings, log, directory, size, Engine))
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        server.stop()
    return tables


def _size(
    settings: Settings, log: Callable[[str], None], directory: Path, size: int, engine_type: Any
) -> Table:
    path = directory / f"transfers-{size}.db"
    table = Table(
        title=f"{size:,} items",
        series=[Series(n, unit="s") for n in (COPY, EXPORT, IMPORT)],
        ours=[EXPORT, IMPORT],
        targets=[
            Target(EXPORT, COPY, maximum=TARGET_EXPORT),
            Target(IMPORT, COPY, maximum=TARGET_IMPORT),
        ],
    )
    engine = engine_type(path)
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
        engine.clock.advance(60)
        arn = engine.execute("DescribeTable", {"TableName": "big"})["Table"]["TableArn"]
        series = {s.name: s for s in table.series}
        for rep in range(settings.reps):
            _repetition(engine, path, directory / "copy.db", rep, arn, series)
            log(
                f"    rep {rep + 1}: "
                + ", ".join(f"{s.name}={s.values[-1]:.3f} s" for s in table.series)
            )
    finally:
        engine.close()
    table.extra["database file (MiB)"] = {COPY: f"{path.stat().st_size / 2**20:.0f}"}
    return table


def run(settings: Settings, log: Callable[[str], None]) -> Section:
    sizes = QUICK_SIZES if settings.quick else SIZES
    section = Section(
        key="transfers",
        title="Export to and import from S3 vs copying the database file",
        method=[
            "One engine on its own file per size, a table of N items of about 100 bytes "
            "written straight to storage, point-in-time recovery on.",
            f"**{COPY}**: `shutil.copyfile` of the database file after a WAL checkpoint "
            "(TRUNCATE), measured in the same run beside each repetition; every contender "
            "starts after an `os.sync()`.",
            f"**{EXPORT}**: `Engine.execute`, DynamoDB JSON, to moto's S3 server "
            "(`ThreadedMotoServer`, in this process, in memory) named by "
            f"`AWS_ENDPOINT_URL_S3`. **{IMPORT}**: that export's data files into a new table "
            "(deleted after each repetition, not timed).",
            f"Targets: {EXPORT} <= {TARGET_EXPORT:g}x the copy, {IMPORT} <= "
            f"{TARGET_IMPORT:g}x. {settings.reps} repetitions; sizes "
            f"{', '.join(f'{n:,}' for n in sizes)}.",
        ],
    )
    section.tables.extend(measure(settings, log, sizes))
    return section
