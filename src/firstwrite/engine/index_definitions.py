"""Secondary index definitions, checked as DynamoDB checks them and described as it does.

The definitions are CreateTable's ``GlobalSecondaryIndexes`` and ``LocalSecondaryIndexes`` and
UpdateTable's GSI ``Create``; the descriptions are those DescribeTable shows.

Messages and their order come from DynamoDB: dynalite's ``validations/createTable.js`` (whose
tests run against DynamoDB), and the AWS-verified findings of the ack-api-quirks catalogue of
DynamoDB table behaviour (``table-indexes.md``: DDB-TABLE-043, 126, 127, 128, 129) where they are
newer or more precise. The storage of an index (its entries) is ``storage/indexes.py``; keeping
them is the indexes feature (``features/indexes/``).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .errors import invalid_parameters, validation
from .validation import TABLE_NAME_PATTERN, F

__all__ = [
    "GSI_MEMBERS",
    "GSI_UPDATES",
    "LSI_MEMBERS",
    "MAX_GSIS",
    "MAX_LSIS",
    "PROJECTION",
    "THROUGHPUT",
    "check_create_indexes",
    "check_gsi_key_names",
    "check_gsi_key_schema",
    "check_index_key_schema",
    "check_projection",
    "describe_indexes",
    "gsi_description",
    "gsi_update_actions",
    "java_set_order",
    "lsi_description",
]

MAX_GSIS = 20
MAX_LSIS = 5
MAX_KEY_ATTRIBUTES = 4  # HASH, and RANGE, attributes of a GSI key (multi-attribute keys)

THROUGHPUT = F(
    "ProvisionedThroughput",
    kind="struct",
    members=(
        F("ReadCapacityUnits", kind="int", long=True, required=True, min=1),
        F("WriteCapacityUnits", kind="int", long=True, required=True, min=1),
    ),
)
INDEX_NAME = F("IndexName", required=True, min_len=3, max_len=255, pattern=TABLE_NAME_PATTERN)
_KEY_ELEMENTS = (
    F("AttributeName", required=True, min_len=1, max_len=255),
    F("KeyType", required=True, enum=("HASH", "RANGE")),
)
PROJECTION = F(
    "Projection",
    kind="struct",
    required=True,
    members=(
        F("ProjectionType", enum=("ALL", "INCLUDE", "KEYS_ONLY")),  # in DynamoDB's order
        F(
            "NonKeyAttributes",
            kind="list",
            min_len=1,
            max_len=20,
            element="str",
            element_len=(1, 255),
        ),
    ),
)
# GSI keys may have up to 4 HASH and 4 RANGE attributes (multi-attribute keys); LSI keys two.
GSI_MEMBERS = (
    INDEX_NAME,
    F(
        "KeySchema",
        kind="list",
        required=True,
        min_len=1,
        members=_KEY_ELEMENTS,
        shape="KeySchemaElement",
    ),
    PROJECTION,
    THROUGHPUT,
)
LSI_MEMBERS = (
    INDEX_NAME,
    F(
        "KeySchema",
        kind="list",
        required=True,
        min_len=1,
        max_len=2,
        members=_KEY_ELEMENTS,
        shape="KeySchemaElement",
    ),
    PROJECTION,
)

GSI_UPDATES = F(
    "GlobalSecondaryIndexUpdates",
    kind="list",
    members=(
        F("Update", kind="struct", members=(INDEX_NAME, THROUGHPUT)),
        F("Create", kind="struct", members=GSI_MEMBERS),
        F("Delete", kind="struct", members=(INDEX_NAME,)),
    ),
)


def java_set_order(names: Iterable[str]) -> list[str]:
    """``names`` in the iteration order of a Java ``HashSet<String>`` built from them.

    DynamoDB prints some sets of attribute names that way ("keys used: [a, sk, pk]",
    DDB-TABLE-127): buckets of ``hashCode`` (spread as ``HashMap`` does) in a table that
    doubles past a 0.75 load factor, insertion order within a bucket.
    """
    unique = list(dict.fromkeys(names))
    capacity = 16
    while len(unique) > capacity * 0.75:
        capacity *= 2

    def bucket(name: str) -> int:
        data = name.encode("utf-16-be")  # String.hashCode runs over UTF-16 code units
        h = 0
        for i in range(0, len(data), 2):
            h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(unique, key=bucket)  # sorted() is stable: insertion order within a bucket


def _listed(names: Sequence[str]) -> str:
    return "[" + ", ".join(names) + "]"


def check_gsi_key_schema(index: Mapping[str, Any], defined: list[str]) -> None:
    """A GSI's KeySchema: up to four HASH then up to four RANGE attributes (DynamoDB's
    multi-attribute keys; messages from the AWS-verified finding DDB-TABLE-123), after the
    checks every index key gets."""
    check_index_key_schema(index, defined)
    schema = index["KeySchema"]
    kinds = [k["KeyType"] for k in schema]
    if kinds.count("HASH") > MAX_KEY_ATTRIBUTES:
        raise validation("The KeySchema exceeds the maximum allowed number of HASH key attributes")
    if kinds.count("RANGE") > MAX_KEY_ATTRIBUTES:
        raise validation("The KeySchema exceeds the maximum allowed number of RANGE key attributes")
    if "RANGE" in kinds and "HASH" in kinds[kinds.index("RANGE") :]:
        raise validation(
            "All HASH key attributes must precede RANGE key attributes in the KeySchema"
        )
    check_gsi_key_names(index)


def check_gsi_key_names(index: Mapping[str, Any]) -> None:
    """A GSI's KeySchema names each attribute once (DDB-TABLE-123's message). CreateTable
    checks it before it looks for unused AttributeDefinitions: ScyllaDB's
    test_gsi_composite_keys.py (run against DynamoDB) gets "same name" for a KeySchema
    ``[a HASH, a HASH]`` beside an unused definition."""
    names = [k["AttributeName"] for k in index["KeySchema"]]
    if len(set(names)) != len(names):
        raise validation("The KeySchema contains multiple key attributes with the same name")


def gsi_update_actions(updates: Sequence[Mapping[str, Any]]) -> list[tuple[str, Mapping[str, Any]]]:
    """UpdateTable's GlobalSecondaryIndexUpdates as ``(Update|Create|Delete, action)``, after the
    rules that need no table (checked before the table is looked for: dynalite's tests of
    DynamoDB; DDB-TABLE-160's messages)."""
    actions: list[tuple[str, Mapping[str, Any]]] = []
    seen: set[str] = set()
    for update in updates:
        present = [k for k in ("Update", "Create", "Delete") if update.get(k) is not None]
        if not present:
            # dynalite validations/updateTable.js.
            raise invalid_parameters(
                "One of GlobalSecondaryIndexUpdate.Update, GlobalSecondaryIndexUpdate.Create, "
                "GlobalSecondaryIndexUpdate.Delete must not be null"
            )
        if len(present) > 1:
            raise invalid_parameters(  # DDB-TABLE-160
                "Only one global secondary index action is allowed per "
                "GlobalSecondaryIndexUpdate object"
            )
        action = update[present[0]]
        name = action["IndexName"]
        if name in seen:
            raise invalid_parameters(
                "Only one global secondary index update per index is allowed simultaneously. "
                f"Index: {name}"
            )
        seen.add(name)
        actions.append((present[0], action))
    return actions


def check_projection(projection: Mapping[str, Any]) -> None:
    """The Projection rules of DDB-TABLE-126 (and dynalite's order)."""
    kind = projection.get("ProjectionType")
    if kind is None:
        raise invalid_parameters("Unknown ProjectionType: null")
    non_key = projection.get("NonKeyAttributes")
    if non_key is not None and kind != "INCLUDE":
        raise invalid_parameters(f"ProjectionType is {kind}, but NonKeyAttributes is specified")
    if kind == "INCLUDE" and non_key is None:
        raise invalid_parameters("ProjectionType is INCLUDE, but NonKeyAttributes is not specified")
    seen: set[str] = set()
    for name in non_key or ():
        if name in seen:
            raise invalid_parameters(f"Duplicate element in NonKeyAttributes: {name}")
        seen.add(name)


def check_index_key_schema(
    index: Mapping[str, Any], defined: list[str], *, local: bool = False
) -> None:
    """An index's KeySchema against the AttributeDefinitions names ``defined`` (a local
    index's has one HASH then one RANGE attribute; a global one's is checked further by
    :func:`check_gsi_key_schema`)."""
    keys = [k["AttributeName"] for k in index["KeySchema"]]
    if any(k not in defined for k in keys):
        raise invalid_parameters(
            "Some index key attributes are not defined in AttributeDefinitions. "
            f"Keys: {_listed(keys)}, AttributeDefinitions: {_listed(defined)}"
        )
    schema = index["KeySchema"]
    kinds = [k["KeyType"] for k in schema]
    if kinds == ["HASH", "RANGE"] and schema[0]["AttributeName"] == schema[1]["AttributeName"]:
        raise validation(
            "Both the Hash Key and the Range Key element in the KeySchema have the same name"
        )
    if schema[0]["KeyType"] != "HASH":
        raise validation("Invalid KeySchema: The first KeySchemaElement is not a HASH key type")
    if len(schema) == 2 and schema[1]["KeyType"] != "RANGE" and local:
        raise validation("Invalid KeySchema: The second KeySchemaElement is not a RANGE key type")


def check_create_indexes(params: Mapping[str, Any], billing: str) -> None:
    """CreateTable's index rules, after the table's own key schema was checked: the unused
    AttributeDefinitions check first (it masks every other index error, DDB-TABLE-127), then
    each LSI, each GSI and the counts, in dynalite's order."""
    lsis = params.get("LocalSecondaryIndexes")
    gsis = params.get("GlobalSecondaryIndexes")
    defined = [d["AttributeName"] for d in params["AttributeDefinitions"]]
    table_keys = [k["AttributeName"] for k in params["KeySchema"]]
    for index in gsis or ():
        if [k["KeyType"] for k in index["KeySchema"]] != ["HASH", "RANGE"]:
            check_gsi_key_names(index)  # a two-attribute key keeps dynalite's order
    used = list(table_keys)
    for index in [*(lsis or ()), *(gsis or ())]:
        used.extend(k["AttributeName"] for k in index["KeySchema"])
    if set(defined) - set(used):
        raise invalid_parameters(
            f"Some AttributeDefinitions are not used. AttributeDefinitions: {_listed(defined)}, "
            f"keys used: {_listed(java_set_order(used))}"
        )
    names: set[str] = set()

    def unique(name: str) -> None:
        if name in names:
            raise invalid_parameters(f"Duplicate index name: {name}")
        names.add(name)

    if lsis is not None:
        if not lsis:
            raise invalid_parameters("List of LocalSecondaryIndexes is empty")
        if len(table_keys) != 2:
            raise invalid_parameters(
                "Table KeySchema does not have a range key, which is required when specifying a "
                "LocalSecondaryIndex"
            )
        for index in lsis:
            check_index_key_schema(index, defined, local=True)
            name = index["IndexName"]
            if len(index["KeySchema"]) != 2:
                raise invalid_parameters(
                    f"Index KeySchema does not have a range key for index: {name}"
                )
            index_hash = index["KeySchema"][0]["AttributeName"]
            if index_hash != table_keys[0]:
                raise invalid_parameters(
                    "Index KeySchema does not have the same leading hash key as table KeySchema "
                    f"for index: {name}. index hash key: {index_hash}, table hash key: "
                    f"{table_keys[0]}"
                )
            check_projection(index["Projection"])
            unique(name)
        if len(lsis) > MAX_LSIS:
            raise invalid_parameters(
                f"Number of LocalSecondaryIndexes exceeds per-table limit of {MAX_LSIS}"
            )
    if gsis is not None:
        if not gsis:
            raise invalid_parameters("List of GlobalSecondaryIndexes is empty")
        for index in gsis:
            check_gsi_key_schema(index, defined)
            check_projection(index["Projection"])
            _check_gsi_throughput(index, billing)
            unique(index["IndexName"])
        if len(gsis) > MAX_GSIS:
            raise invalid_parameters(
                f"GlobalSecondaryIndex count exceeds the per-table limit of {MAX_GSIS}"
            )


def _check_gsi_throughput(index: Mapping[str, Any], billing: str) -> None:
    name = index["IndexName"]
    provided = index.get("ProvisionedThroughput")
    if billing == "PAY_PER_REQUEST" and provided is not None:
        raise invalid_parameters(
            f"ProvisionedThroughput should not be specified for index: {name} when BillingMode "
            "is PAY_PER_REQUEST"
        )
    if billing == "PROVISIONED" and provided is None:
        raise invalid_parameters(f"ProvisionedThroughput is not specified for index: {name}")


def _projection(projection: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"ProjectionType": projection["ProjectionType"]}
    if projection.get("NonKeyAttributes") is not None:
        # DescribeTable lists them sorted by name (DDB-TABLE-125).
        out["NonKeyAttributes"] = sorted(projection["NonKeyAttributes"])
    return out


def _key_schema(index: Mapping[str, Any]) -> list[dict[str, str]]:
    return [
        {"AttributeName": k["AttributeName"], "KeyType": k["KeyType"]} for k in index["KeySchema"]
    ]


def gsi_description(
    index: Mapping[str, Any], table_arn: str, billing: str, *, status: str = "ACTIVE"
) -> dict[str, Any]:
    """A GlobalSecondaryIndexDescription (IndexSizeBytes and ItemCount are added live)."""
    provided = index.get("ProvisionedThroughput")
    throughput: dict[str, Any] = {"NumberOfDecreasesToday": 0}
    if billing == "PAY_PER_REQUEST" or provided is None:
        # PAY_PER_REQUEST indexes report zero throughput (DDB-TABLE-133).
        throughput.update(ReadCapacityUnits=0, WriteCapacityUnits=0)
    else:
        throughput.update(
            ReadCapacityUnits=int(provided["ReadCapacityUnits"]),
            WriteCapacityUnits=int(provided["WriteCapacityUnits"]),
        )
    return {
        "IndexName": index["IndexName"],
        "KeySchema": _key_schema(index),
        "Projection": _projection(index["Projection"]),
        "IndexStatus": status,
        "ProvisionedThroughput": throughput,
        "IndexArn": f"{table_arn}/index/{index['IndexName']}",
    }


def lsi_description(index: Mapping[str, Any], table_arn: str) -> dict[str, Any]:
    """A LocalSecondaryIndexDescription (no status or throughput of its own, DDB-TABLE-357)."""
    return {
        "IndexName": index["IndexName"],
        "KeySchema": _key_schema(index),
        "Projection": _projection(index["Projection"]),
        "IndexArn": f"{table_arn}/index/{index['IndexName']}",
    }


def describe_indexes(
    definition: Mapping[str, Any], stats: Mapping[str, tuple[int, int]]
) -> dict[str, Any]:
    """The GlobalSecondaryIndexes/LocalSecondaryIndexes members of a TableDescription, with
    each index's live ``IndexSizeBytes`` and ``ItemCount`` (``stats``: name -> (count, bytes))."""
    out: dict[str, Any] = {}
    for member in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes"):
        indexes = definition.get(member)
        if not indexes:
            continue
        described = []
        for index in indexes:
            entry = copy.deepcopy(index)
            count, size = stats.get(index["IndexName"], (0, 0))
            entry["IndexSizeBytes"] = size
            entry["ItemCount"] = count
            described.append(entry)
        out[member] = described
    return out
