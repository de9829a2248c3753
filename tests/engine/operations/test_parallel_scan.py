"""Parallel scans (Segment, TotalSegments) on tables and on indexes, through boto3 in process
and over HTTP: the segments of one TotalSegments are disjoint and together hold every item (or
index entry) exactly once, page after page, and segments are scanned by concurrent threads
as applications do.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from botocore.exceptions import ClientError

ITEMS = 120


@pytest.fixture
def table(ddb: Any, table_name: str) -> tuple[Any, str]:
    ddb.create_table(
        TableName=table_name,
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "N"},
            {"AttributeName": "g", "AttributeType": "N"},
        ],
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "by-g",
                "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            }
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    for start in range(0, ITEMS, 25):
        ddb.batch_write_item(
            RequestItems={
                table_name: [
                    {
                        "PutRequest": {
                            "Item": {
                                "pk": {"S": f"p{n % 37}"},
                                "sk": {"N": str(n)},
                                # every third item has no g: not in the index
                                **({"g": {"N": str(n % 11)}} if n % 3 else {}),
                            }
                        }
                    }
                    for n in range(start, min(start + 25, ITEMS))
                ]
            }
        )
    return ddb, table_name


def segment(ddb: Any, name: str, number: int, total: int, **kw: Any) -> list[int]:
    """Every item of one segment, two at a time (LastEvaluatedKey stays in the segment)."""
    params: dict[str, Any] = {
        "TableName": name,
        "Segment": number,
        "TotalSegments": total,
        "Limit": 2,
        **kw,
    }
    seen: list[int] = []
    while True:
        page = ddb.scan(**params)
        seen.extend(int(i["sk"]["N"]) for i in page["Items"])
        if "LastEvaluatedKey" not in page:
            return seen
        params["ExclusiveStartKey"] = page["LastEvaluatedKey"]


@pytest.mark.parametrize("total", [1, 2, 3, 7, 40])
@pytest.mark.parametrize("index", [None, "by-g"])
def test_segments_cover_every_item_exactly_once(
    table: tuple[Any, str], total: int, index: str | None
) -> None:
    ddb, name = table
    kw = {} if index is None else {"IndexName": index}
    with ThreadPoolExecutor(max_workers=4) as pool:
        parts = list(pool.map(lambda n: segment(ddb, name, n, total, **kw), range(total)))
    everything = [sk for part in parts for sk in part]
    expected = list(range(ITEMS)) if index is None else [n for n in range(ITEMS) if n % 3]
    assert sorted(everything) == expected  # nothing missing, nothing twice
    if total > 1:
        assert sum(1 for part in parts if part) > 1  # the work is actually split


def test_segment_rules(table: tuple[Any, str]) -> None:
    ddb, name = table

    def error(**kw: Any) -> tuple[str, str]:
        with pytest.raises(ClientError) as info:
            ddb.scan(TableName=name, **kw)
        return info.value.response["Error"]["Code"], info.value.response["Error"]["Message"]

    assert error(Segment=3, TotalSegments=3) == (
        "ValidationException",
        "The Segment parameter is zero-based and must be less than parameter TotalSegments: "
        "Segment: 3 is not less than TotalSegments: 3",
    )
    assert error(Segment=0) == (
        "ValidationException",
        "The TotalSegments parameter is required but was not present in the request when "
        "Segment parameter is present",
    )
    # An ExclusiveStartKey from another segment (dynalite actions/scan.js, whose tests run
    # against DynamoDB).
    first = ddb.scan(TableName=name, Segment=0, TotalSegments=2, Limit=1)
    start = first["LastEvaluatedKey"]
    assert error(Segment=1, TotalSegments=2, ExclusiveStartKey=start) == (
        "ValidationException",
        "The provided starting key is invalid: Invalid ExclusiveStartKey. Please use "
        "ExclusiveStartKey with correct Segment. TotalSegments: 2 Segment: 1",
    )
