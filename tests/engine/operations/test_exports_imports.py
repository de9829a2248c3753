"""ExportTableToPointInTime (+ DescribeExport, ListExports) and ImportTable (+ DescribeImport,
ListImports) against an S3-API server (moto's, in server mode, on an ephemeral port), in process
and over HTTP.

Sources: the developer guide's "DynamoDB table export output format" (``AWSDynamoDB/<ExportId>/``
with ``_started``, ``manifest-summary.json``, ``manifest-files.json``, their checksum files and
``data/*.json.gz``; one ``{"Item": ...}`` a line; Ion with ``$dynamodb_SS`` etc.), "Requesting
a table export" (point-in-time recovery must be on; ExportTime within its window; the export is
the table as of that time) and "Import format quotas and validation" (DynamoDB JSON, Ion and
CSV; a record that is not an item of the table is counted in ErrorCount and skipped); the API
reference of each operation.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from tests.engine_process import start_server, stop_server

from firstwrite.engine.api import Engine
from firstwrite.engine.binding.sync import bind, dummy_client
from firstwrite.engine.clock import Clock
from firstwrite.engine.values import to_wire

BUCKET = "exports-bucket"
T0 = 1_800_000_000.0


@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def s3(moto_url: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The S3 client the test reads with; the engine finds the same server through the SDK's
    ``AWS_ENDPOINT_URL_S3``."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", moto_url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    client = boto3.client("s3", region_name="us-east-1")
    try:
        client.create_bucket(Bucket=BUCKET)
    except ClientError:
        pass
    return client


@pytest.fixture
def engine_ddb(tmp_path: Path) -> Iterator[tuple[Engine, Any]]:
    clock = Clock()
    clock.freeze(T0)
    with Engine(tmp_path / "x.db", clock=clock) as engine:
        yield engine, bind(dummy_client("dynamodb", "us-east-1"), engine)


ITEMS = [
    {"pk": {"S": "a"}, "n": {"N": "12.5"}, "b": {"B": b"\x00\xff"}, "ok": {"BOOL": True}},
    {
        "pk": {"S": "b"},
        "ss": {"SS": ["x", "y"]},
        "ns": {"NS": ["1", "-2E+3"]},
        "bs": {"BS": [b"\x01"]},
        "nothing": {"NULL": True},
        "deep": {"M": {"l": {"L": [{"S": 'é\n"q"'}, {"N": "0"}, {"M": {}}]}}},
    },
    {"pk": {"S": "c"}},
]


def make_table(ddb: Any, name: str, *, pitr: bool = True) -> str:
    arn = ddb.create_table(
        TableName=name,
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )["TableDescription"]["TableArn"]
    if pitr:
        ddb.update_continuous_backups(
            TableName=name,
            PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True},
        )
    return str(arn)


def creation(name: str) -> dict[str, Any]:
    """ImportTable's TableCreationParameters for a table keyed by ``pk`` (S)."""
    return {
        "TableName": name,
        "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
        "BillingMode": "PAY_PER_REQUEST",
    }


def scan(ddb: Any, name: str) -> list[dict[str, Any]]:
    return sorted(ddb.scan(TableName=name)["Items"], key=lambda i: i["pk"]["S"])


def objects(s3: Any, prefix: str) -> dict[str, bytes]:
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])
    return {o["Key"]: s3.get_object(Bucket=BUCKET, Key=o["Key"])["Body"].read() for o in listed}


def test_a_json_export_as_the_guide_lays_it_out(s3: Any, engine_ddb: Any) -> None:
    _engine, ddb = engine_ddb
    arn = make_table(ddb, "orders")
    for item in ITEMS:
        ddb.put_item(TableName="orders", Item=item)
    described = ddb.export_table_to_point_in_time(
        TableArn=arn, S3Bucket=BUCKET, S3Prefix="nightly"
    )["ExportDescription"]
    assert described["ExportStatus"] == "COMPLETED"
    assert described["ItemCount"] == 3 and described["ExportFormat"] == "DYNAMODB_JSON"
    export_id = described["ExportArn"].rsplit("/", 1)[-1]
    assert described["ExportArn"] == f"{arn}/export/{export_id}"
    root = f"nightly/AWSDynamoDB/{export_id}/"
    found = objects(s3, root)
    assert found[root + "_started"] == b""
    summary = json.loads(found[root + "manifest-summary.json"])
    assert summary["itemCount"] == 3 and summary["outputFormat"] == "DYNAMODB_JSON"
    assert summary["exportArn"] == described["ExportArn"] and summary["tableArn"] == arn
    assert summary["manifestFilesS3Key"] == root + "manifest-files.json"
    assert described["ExportManifest"] == root + "manifest-summary.json"
    assert {root + "manifest-summary.checksum", root + "manifest-files.checksum"} <= set(found)
    files = [json.loads(line) for line in found[root + "manifest-files.json"].splitlines()]
    lines = []
    for entry in files:
        assert entry["dataFileS3Key"].startswith(root + "data/")
        assert entry["dataFileS3Key"].endswith(".json.gz")
        body = found[entry["dataFileS3Key"]]
        lines += gzip.decompress(body).decode().splitlines()
    assert sum(f["itemCount"] for f in files) == 3
    exported = sorted((json.loads(line)["Item"] for line in lines), key=lambda i: i["pk"]["S"])
    wire = [json.loads(json.dumps(i, default=to_wire)) for i in scan(ddb, "orders")]
    assert exported == wire
    assert ddb.describe_export(ExportArn=described["ExportArn"])["ExportDescription"] == described
    summaries = ddb.list_exports(TableArn=arn)["ExportSummaries"]
    assert summaries == [
        {
            "ExportArn": described["ExportArn"],
            "ExportStatus": "COMPLETED",
            "ExportType": "FULL_EXPORT",
        }
    ]


def test_export_time_reads_the_point_in_time_history(s3: Any, engine_ddb: Any) -> None:
    engine, ddb = engine_ddb
    arn = make_table(ddb, "history")
    ddb.put_item(TableName="history", Item={"pk": {"S": "k"}, "v": {"S": "old"}})
    ddb.put_item(TableName="history", Item={"pk": {"S": "gone"}})
    engine.clock.freeze(T0 + 100)
    ddb.put_item(TableName="history", Item={"pk": {"S": "k"}, "v": {"S": "new"}})
    ddb.delete_item(TableName="history", Key={"pk": {"S": "gone"}})
    ddb.put_item(TableName="history", Item={"pk": {"S": "later"}})
    past = ddb.export_table_to_point_in_time(
        TableArn=arn, S3Bucket=BUCKET, S3Prefix="past", ExportTime=T0 + 50
    )["ExportDescription"]
    assert past["ExportStatus"] == "COMPLETED" and past["ItemCount"] == 2
    ddb.import_table(
        S3BucketSource={
            "S3Bucket": BUCKET,
            "S3KeyPrefix": past["ExportManifest"].rsplit("/", 1)[0] + "/data/",
        },
        InputFormat="DYNAMODB_JSON",
        InputCompressionType="GZIP",
        TableCreationParameters=creation("history-then"),
    )
    assert scan(ddb, "history-then") == [
        {"pk": {"S": "gone"}},
        {"pk": {"S": "k"}, "v": {"S": "old"}},
    ]
    code = "InvalidExportTimeException"
    with pytest.raises(ClientError) as info:
        ddb.export_table_to_point_in_time(TableArn=arn, S3Bucket=BUCKET, ExportTime=T0 + 500)
    assert info.value.response["Error"]["Code"] == code


def test_ion_round_trip_and_errors_counted(s3: Any, engine_ddb: Any) -> None:
    _engine, ddb = engine_ddb
    arn = make_table(ddb, "source")
    for item in ITEMS:
        ddb.put_item(TableName="source", Item=item)
    described = ddb.export_table_to_point_in_time(
        TableArn=arn, S3Bucket=BUCKET, S3Prefix="ion", ExportFormat="ION"
    )["ExportDescription"]
    root = described["ExportManifest"].rsplit("/", 1)[0] + "/"
    data = [k for k in objects(s3, root + "data/")]
    assert len(data) == 1 and data[0].endswith(".ion.gz")
    text = gzip.decompress(objects(s3, root + "data/")[data[0]]).decode()
    assert text.startswith("$ion_1_0\n") and "$dynamodb_SS::" in text
    imported = ddb.import_table(
        S3BucketSource={"S3Bucket": BUCKET, "S3KeyPrefix": root + "data/"},
        InputFormat="ION",
        InputCompressionType="GZIP",
        TableCreationParameters=creation("copy"),
    )["ImportTableDescription"]
    assert imported["ImportStatus"] == "COMPLETED" and imported["ImportedItemCount"] == 3
    assert scan(ddb, "copy") == scan(ddb, "source")
    # A JSON source with a bad line, an item without the key and a good one.
    s3.put_object(
        Bucket=BUCKET,
        Key="raw/part-1.json",
        Body=b'{"Item":{"pk":{"S":"x"},"v":{"N":"1"}}}\nnot json\n{"Item":{"v":{"S":"no key"}}}\n',
    )
    loaded = ddb.import_table(
        S3BucketSource={"S3Bucket": BUCKET, "S3KeyPrefix": "raw/"},
        InputFormat="DYNAMODB_JSON",
        TableCreationParameters=creation("raw"),
    )["ImportTableDescription"]
    assert (loaded["ImportedItemCount"], loaded["ErrorCount"]) == (1, 2)
    assert scan(ddb, "raw") == [{"pk": {"S": "x"}, "v": {"N": "1"}}]
    assert ddb.describe_import(ImportArn=loaded["ImportArn"])["ImportTableDescription"] == loaded
    listed = ddb.list_imports()["ImportSummaryList"]
    assert [i["ImportArn"] for i in listed] == [imported["ImportArn"], loaded["ImportArn"]]


def test_csv_import_types_the_keys(s3: Any, engine_ddb: Any) -> None:
    _engine, ddb = engine_ddb
    s3.put_object(Bucket=BUCKET, Key="csv/a.csv", Body=b"id;name;note\n7;seven;\n8;eight;x\n")
    ddb.import_table(
        S3BucketSource={"S3Bucket": BUCKET, "S3KeyPrefix": "csv/"},
        InputFormat="CSV",
        InputFormatOptions={"Csv": {"Delimiter": ";"}},
        TableCreationParameters={
            "TableName": "people",
            "AttributeDefinitions": [{"AttributeName": "id", "AttributeType": "N"}],
            "KeySchema": [{"AttributeName": "id", "KeyType": "HASH"}],
            "BillingMode": "PAY_PER_REQUEST",
        },
    )
    got = sorted(ddb.scan(TableName="people")["Items"], key=lambda i: i["id"]["N"])
    assert got == [
        {"id": {"N": "7"}, "name": {"S": "seven"}},
        {"id": {"N": "8"}, "name": {"S": "eight"}, "note": {"S": "x"}},
    ]


def test_refusals_and_failures(s3: Any, engine_ddb: Any) -> None:
    _engine, ddb = engine_ddb
    arn = make_table(ddb, "plain", pitr=False)
    with pytest.raises(ClientError) as info:
        ddb.export_table_to_point_in_time(TableArn=arn, S3Bucket=BUCKET)
    assert info.value.response["Error"] == {
        "Code": "PointInTimeRecoveryUnavailableException",
        "Message": "Point in time recovery is not enabled for table 'plain'",
    }
    arn = make_table(ddb, "kept")
    failed = ddb.export_table_to_point_in_time(TableArn=arn, S3Bucket="no-such-bucket")
    assert failed["ExportDescription"]["ExportStatus"] == "FAILED"
    assert failed["ExportDescription"]["FailureCode"] == "S3NoSuchBucket"
    first = ddb.export_table_to_point_in_time(TableArn=arn, S3Bucket=BUCKET, ClientToken="t1")
    again = ddb.export_table_to_point_in_time(TableArn=arn, S3Bucket=BUCKET, ClientToken="t1")
    assert again["ExportDescription"]["ExportArn"] == first["ExportDescription"]["ExportArn"]
    with pytest.raises(ClientError) as info:
        ddb.export_table_to_point_in_time(
            TableArn=arn, S3Bucket=BUCKET, ClientToken="t1", S3Prefix="other"
        )
    assert info.value.response["Error"]["Code"] == "ExportConflictException"
    with pytest.raises(ClientError) as info:
        ddb.describe_export(ExportArn=arn + "/export/00000000000000-00000000")
    assert info.value.response["Error"]["Code"] == "ExportNotFoundException"


def test_over_http(s3: Any, tmp_path: Path) -> None:
    server = start_server(tmp_path / "served.db")  # inherits AWS_ENDPOINT_URL_S3
    try:
        ddb = boto3.client(
            "dynamodb",
            endpoint_url=server.url,
            region_name="us-east-1",
            config=Config(retries={"max_attempts": 0}),
        )
        arn = make_table(ddb, "web")
        for item in ITEMS:
            ddb.put_item(TableName="web", Item=item)
        described = ddb.export_table_to_point_in_time(TableArn=arn, S3Bucket=BUCKET, S3Prefix="web")
        root = described["ExportDescription"]["ExportManifest"].rsplit("/", 1)[0]
        imported = ddb.import_table(
            S3BucketSource={"S3Bucket": BUCKET, "S3KeyPrefix": root + "/data/"},
            InputFormat="DYNAMODB_JSON",
            InputCompressionType="GZIP",
            TableCreationParameters=creation("web-copy"),
        )
        assert imported["ImportTableDescription"]["ImportedItemCount"] == 3
        assert scan(ddb, "web-copy") == scan(ddb, "web")
    finally:
        stop_server(server)
