"""Tables and items for the pages that browse them, read through the engine's own operations.

The operations are ListTables, DescribeTable, DescribeTimeToLive and Scan."""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from firstwrite.engine import DynamoDBError, Engine
from firstwrite.idempotency import record_view

from .records import key_text, wire_json

PAGE_SIZE = 25
_REGION = re.compile(r"[a-z0-9-]{1,32}\Z")


class BadInput(ValueError):
    """A page asked for something that cannot be shown (a malformed region or page token)."""


class NoSuchTable(LookupError):
    def __init__(self, name: str, region: str) -> None:
        super().__init__(f"There is no table named {name!r} in {region}.")
        self.name = name
        self.region = region


def region_of(text: str | None, default: str) -> str:
    if not text:
        return default
    if not _REGION.match(text):
        raise BadInput(f"{text!r} is not a region name (lower-case letters, digits and dashes)")
    return text


@dataclass(frozen=True, slots=True)
class TableSummary:
    name: str
    keys: str
    billing: str
    items: int
    ttl: str
    stream: str


@dataclass(frozen=True, slots=True)
class TableDetail:
    name: str
    region: str
    arn: str
    status: str
    key_schema: list[tuple[str, str, str]]  # (attribute, HASH/RANGE, S/N/B)
    billing: str
    throughput: str
    items: int
    size_bytes: int
    ttl_status: str
    ttl_attribute: str | None
    stream: str
    stream_arn: str | None
    replicas: list[str]


@dataclass(frozen=True, slots=True)
class ItemRow:
    key: str
    record: record_view.RecordView | None
    json: str


@dataclass(frozen=True, slots=True)
class ItemsPage:
    rows: list[ItemRow]
    next_token: str | None
    scanned: int

    @property
    def records(self) -> int:
        return sum(r.record is not None for r in self.rows)


def list_tables(engine: Engine, region: str) -> list[TableSummary]:
    names: list[str] = []
    request: dict[str, Any] = {}
    while True:
        page = engine.execute("ListTables", request, region=region)
        names.extend(page.get("TableNames", []))
        last = page.get("LastEvaluatedTableName")
        if not last:
            break
        request = {"ExclusiveStartTableName": last}
    summaries = []
    for name in names:
        try:
            detail = describe(engine, region, name)
        except NoSuchTable:  # dropped between the two calls
            continue
        summaries.append(
            TableSummary(
                name,
                ", ".join(f"{a} ({k}, {t})" for a, k, t in detail.key_schema),
                detail.billing,
                detail.items,
                detail.ttl_status
                if detail.ttl_attribute is None
                else f"{detail.ttl_status} on {detail.ttl_attribute}",
                detail.stream,
            )
        )
    return summaries


def describe(engine: Engine, region: str, name: str) -> TableDetail:
    try:
        table = engine.execute("DescribeTable", {"TableName": name}, region=region)["Table"]
        ttl = engine.execute("DescribeTimeToLive", {"TableName": name}, region=region)
    except DynamoDBError as error:
        if error.code in ("ResourceNotFoundException", "ValidationException"):
            raise NoSuchTable(name, region) from None
        raise
    types = {a["AttributeName"]: a["AttributeType"] for a in table.get("AttributeDefinitions", [])}
    schema = [
        (k["AttributeName"], k["KeyType"], types.get(k["AttributeName"], "?"))
        for k in table.get("KeySchema", [])
    ]
    billing = (table.get("BillingModeSummary") or {}).get("BillingMode", "PROVISIONED")
    throughput = table.get("ProvisionedThroughput") or {}
    stream_spec = table.get("StreamSpecification") or {}
    ttl_desc = ttl.get("TimeToLiveDescription") or {}
    return TableDetail(
        name=name,
        region=region,
        arn=str(table.get("TableArn", "")),
        status=str(table.get("TableStatus", "")),
        key_schema=schema,
        billing=billing,
        throughput=(
            "on demand"
            if billing == "PAY_PER_REQUEST"
            else f"{throughput.get('ReadCapacityUnits', 0)} RCU, {throughput.get('WriteCapacityUnits', 0)} WCU"
        ),
        items=int(table.get("ItemCount", 0)),
        size_bytes=int(table.get("TableSizeBytes", 0)),
        ttl_status=str(ttl_desc.get("TimeToLiveStatus", "DISABLED")),
        ttl_attribute=ttl_desc.get("AttributeName"),
        stream=(
            str(stream_spec.get("StreamViewType", "on"))
            if stream_spec.get("StreamEnabled")
            else "off"
        ),
        stream_arn=table.get("LatestStreamArn") if stream_spec.get("StreamEnabled") else None,
        replicas=sorted(r["RegionName"] for r in table.get("Replicas", []) if "RegionName" in r),
    )


def items(
    engine: Engine, detail: TableDetail, token: str | None, limit: int = PAGE_SIZE
) -> ItemsPage:
    """One page of ``Scan``; ``token`` is the previous page's ``next_token``."""
    request: dict[str, Any] = {"TableName": detail.name, "Limit": limit}
    if token:
        request["ExclusiveStartKey"] = decode_token(token)
    try:
        page = engine.execute("Scan", request, region=detail.region, wire=True)
    except DynamoDBError as error:
        if token and error.code in ("ValidationException", "SerializationException"):
            raise BadInput(f"the page token does not fit this table: {error.message}") from None
        if error.code == "ResourceNotFoundException":
            raise NoSuchTable(detail.name, detail.region) from None
        raise
    names = [a for a, _, _ in detail.key_schema]
    rows = [
        ItemRow(key_text(item, names), record_view.decode(item), wire_json(item))
        for item in page.get("Items", [])
    ]
    last = page.get("LastEvaluatedKey")
    return ItemsPage(
        rows, None if not last else encode_token(last), int(page.get("ScannedCount", 0))
    )


def encode_token(key: Mapping[str, Any]) -> str:
    return base64.urlsafe_b64encode(wire_json(key).encode()).decode().rstrip("=")


def decode_token(token: str) -> dict[str, Any]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        value = json.loads(raw)
    except (ValueError, binascii.Error):
        raise BadInput("the page token is not valid; start again from the first page") from None
    if not isinstance(value, dict):
        raise BadInput("the page token is not valid; start again from the first page")
    return value
