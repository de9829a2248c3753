"""UpdateTable's secondary index work: GSI Create, Update and Delete, and billing switches.

It also gives a new global table replica its indexes. DynamoDB's rules and messages, each
marked with the ack-api-quirks finding (AWS-verified, ``table-indexes.md``) or the dynalite
source it comes from. The index entries and the background backfill/deletion are the indexes
feature's (``maintenance.py``); the descriptions and CreateTable's checks are ``index_definitions.py``'s.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ...errors import DynamoDBError, invalid_parameters, resource_not_found, validation
from ...index_definitions import (
    MAX_GSIS,
    check_gsi_key_schema,
    check_projection,
    gsi_description,
    gsi_update_actions,
)
from ...storage import TableRow, Writer

if TYPE_CHECKING:
    from ...context import Context

__all__ = [
    "IN_USE",
    "billing",
    "billing_switch",
    "check_delete",
    "created",
    "find",
    "gsi_updates",
    "gsis",
    "replicas",
    "set_index",
    "settled",
]

IN_USE = "Attempt to change a resource which is still in use: "
_ONE_ONLINE = (
    "Subscriber limit exceeded: Only 1 online index can be created or deleted simultaneously "
    "per table"
)
# A GSI Create or Delete may share an UpdateTable only with BillingMode and GSI Updates
# (DDB-TABLE-174, verified on DynamoDB): the refusal for each other member.
_ALONE = (
    ("ProvisionedThroughput", "You cannot create or delete index while updating table IOPS"),
    ("StreamSpecification", "You cannot create or delete index while changing stream status"),
    (
        "DeletionProtectionEnabled",
        "DeletionProtection modification must be the only operation in the request",
    ),
    (
        "SSESpecification",
        "Server-Side Encryption modification must be the only operation in the request",
    ),
    ("TableClass", "TableClass modification must be the only operation in the request"),
)


def gsis(definition: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list(definition.get("GlobalSecondaryIndexes") or ())


def find(definition: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    for index in definition.get("GlobalSecondaryIndexes") or ():
        if index["IndexName"] == name:
            return dict(index)
    return None


def billing(definition: Mapping[str, Any]) -> str:
    return str((definition.get("BillingModeSummary") or {}).get("BillingMode", "PROVISIONED"))


def settled(definition: dict[str, Any]) -> None:
    """The table is ACTIVE again unless an index still holds it (allocation or deletion)."""
    busy = any(
        i.get("IndexStatus") == "DELETING"
        or (i.get("IndexStatus") == "CREATING" and i.get("Backfilling") is False)
        for i in gsis(definition)
    )
    definition["TableStatus"] = "UPDATING" if busy else "ACTIVE"


def set_index(definition: dict[str, Any], name: str, **members: Any) -> None:
    """Set (``None``: remove) members of GSI ``name``'s description in ``definition``."""
    indexes = []
    for index in gsis(definition):
        if index["IndexName"] == name:
            index = dict(index)
            for key, value in members.items():
                if value is None:
                    index.pop(key, None)
                else:
                    index[key] = value
        indexes.append(index)
    definition["GlobalSecondaryIndexes"] = indexes


def created(w: Writer, row: TableRow) -> TableRow:
    """Storage for the indexes of a table CreateTable just made."""
    definition = row.definition
    names = [
        index["IndexName"]
        for member in ("LocalSecondaryIndexes", "GlobalSecondaryIndexes")
        for index in definition.get(member) or ()
    ]
    if not names:
        return row
    updated = copy.deepcopy(definition)
    updated["_index_ids"] = {name: w.index_allocate(row.id, name) for name in names}
    return w.update_table(row, updated)


def check_delete(row: TableRow) -> None:
    """DeleteTable waits for every index to settle (DDB-TABLE-150, verified on DynamoDB)."""
    if any(i.status in ("CREATING", "DELETING") for i in row.indexes):
        raise DynamoDBError(
            "ResourceInUseException",
            IN_USE + "Cannot delete table while indexes are being created, updated, or deleted.",
        )


def replicas(
    w: Writer, row: TableRow, params: Mapping[str, Any], schedule: Callable[[], None]
) -> None:
    """Give each new replica of ``row`` its own copy of every index (the replica's items
    were copied from ``row``'s in this transaction, so are the entries)."""
    for update in params["ReplicaUpdates"]:
        target = (update.get("Create") or {}).get("RegionName")
        replica = None if target is None else w.table(target, row.name)
        if replica is None or "_index_ids" in replica.definition or not row.indexes:
            continue
        definition = copy.deepcopy(replica.definition)
        arn = definition["TableArn"]
        ids: dict[str, int] = {}
        for index in row.indexes:
            if index.status == "DELETING":
                member = index.kind
                definition[member] = [i for i in definition[member] if i["IndexName"] != index.name]
                continue
            ids[index.name] = w.index_allocate(replica.id, index.name)
            if index.status == "ACTIVE":
                w.index_copy(index.id, ids[index.name])
            else:
                w.index_backfill_set(ids[index.name], replica.id, None)
                schedule()
        for member in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes"):
            for described in definition.get(member) or ():
                described["IndexArn"] = f"{arn}/index/{described['IndexName']}"
        definition["_index_ids"] = ids
        w.update_table(replica, definition)


def gsi_updates(
    ctx: Context,
    w: Writer,
    row: TableRow,
    params: Mapping[str, Any],
    schedule: Callable[[], None],
) -> TableRow:
    """Apply UpdateTable's GlobalSecondaryIndexUpdates (after the checks of DDB-TABLE-159,
    160, 174): throughput Updates at once, a Delete marks the index DELETING, a Create adds it
    CREATING with a backfill; ``schedule`` wakes the background work."""
    updates = params["GlobalSecondaryIndexUpdates"]
    if not updates:
        raise invalid_parameters("List of GlobalSecondaryIndexUpdates is empty")
    actions = gsi_update_actions(updates)
    online = [(kind, action) for kind, action in actions if kind != "Update"]
    if online:
        for member, message in _ALONE:
            if params.get(member) is not None:
                raise validation(message)
        if row.definition.get("Replicas"):
            raise validation(
                "Adding or deleting a global secondary index of a global table is not "
                "supported by the firstwrite local engine yet"
            )
        deleting = {a["IndexName"] for kind, a in online if kind == "Delete"}
        # Another index being built or dropped; the one a Delete names answers for itself.
        busy = [
            i
            for i in row.indexes
            if i.status in ("CREATING", "DELETING") and i.name not in deleting
        ]
        if len(online) > 1 or busy:
            raise DynamoDBError("LimitExceededException", _ONE_ONLINE)  # DDB-TABLE-159
    definition = copy.deepcopy(row.definition)
    for kind, action in actions:
        if kind == "Update":
            _update_gsi(ctx, w, row, definition, action)
        elif kind == "Delete":
            _delete_gsi(w, row, definition, action)
            schedule()
        else:
            _create_gsi(w, row, definition, action, params)
            schedule()
    settled(definition)
    return w.update_table(row, definition)


def _existing(row: TableRow, definition: Mapping[str, Any], name: str) -> dict[str, Any]:
    found = find(definition, name)
    if found is None:
        # DDB-TABLE-375 (verified on DynamoDB); LSIs are not GlobalSecondaryIndexUpdates'.
        raise resource_not_found(f"Requested resource not found: Index {name} for table {row.name}")
    if found.get("IndexStatus") == "DELETING":
        raise DynamoDBError(
            "ResourceInUseException",
            f"{IN_USE}Index is being deleted. Table: {row.name} Index: {name}",
        )
    return found


def _update_gsi(
    ctx: Context,
    w: Writer,
    row: TableRow,
    definition: dict[str, Any],
    action: Mapping[str, Any],
) -> None:
    name = action["IndexName"]
    index = _existing(row, definition, name)
    throughput = action.get("ProvisionedThroughput")
    if throughput is None:
        return  # OnDemandThroughput / WarmThroughput only: nothing the engine models
    if billing(definition) == "PAY_PER_REQUEST":
        raise validation(  # DDB-TABLE-152
            f"The only Updates for index: {name} when TableThroughputMode is PAY_PER_REQUEST "
            "can be to OnDemandThroughput, WarmThroughput"
        )
    current = dict(index["ProvisionedThroughput"])
    read, write = int(throughput["ReadCapacityUnits"]), int(throughput["WriteCapacityUnits"])
    if read == current["ReadCapacityUnits"] and write == current["WriteCapacityUnits"]:
        raise validation(  # DDB-TABLE-164
            f"The provisioned throughput for the index {name} will not change. The requested "
            "value equals the current value. Current ReadCapacityUnits provisioned for index "
            f"{name}: {read}. Requested ReadCapacityUnits: {read}. Current WriteCapacityUnits "
            f"provisioned for index {name}: {write}. Requested WriteCapacityUnits: {write}. "
            "Refer to the Amazon DynamoDB Developer Guide for current limits and how to "
            "request higher limits."
        )
    now = ctx.now()
    if read < current["ReadCapacityUnits"] or write < current["WriteCapacityUnits"]:
        current["NumberOfDecreasesToday"] = current.get("NumberOfDecreasesToday", 0) + 1
        current["LastDecreaseDateTime"] = now
    if read > current["ReadCapacityUnits"] or write > current["WriteCapacityUnits"]:
        current["LastIncreaseDateTime"] = now
    current.update(ReadCapacityUnits=read, WriteCapacityUnits=write)
    set_index(definition, name, ProvisionedThroughput=current)


def _delete_gsi(
    w: Writer, row: TableRow, definition: dict[str, Any], action: Mapping[str, Any]
) -> None:
    name = action["IndexName"]
    index = _existing(row, definition, name)
    if index.get("IndexStatus") == "CREATING" and index.get("Backfilling") is False:
        raise DynamoDBError(  # DDB-TABLE-149 (verified on DynamoDB)
            "ResourceInUseException",
            f"{IN_USE}Index creation is in resource allocation phase. Retry deletion during "
            f"backfilling phase or when the index is active. Table: {row.name} Index: {name}",
        )
    set_index(definition, name, IndexStatus="DELETING", Backfilling=None)
    index_id = definition["_index_ids"][name]
    w.index_backfill_done(index_id)


def _create_gsi(
    w: Writer,
    row: TableRow,
    definition: dict[str, Any],
    action: Mapping[str, Any],
    params: Mapping[str, Any],
) -> None:
    name = action["IndexName"]
    names = {
        i["IndexName"]
        for member in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes")
        for i in definition.get(member) or ()
    }
    if name in names:
        # ScyllaDB's test_gsi_updatetable.py (run against DynamoDB) pins "already exists", for
        # a GSI's name and an LSI's alike; the wording is moto's for this refusal.
        raise invalid_parameters(f"Global Secondary Index already exists: {name}")
    provided = params.get("AttributeDefinitions")
    if provided is None:
        raise validation(f"AttributeDefinitions is not specified for index: {name}")  # 162
    # Only the new key attributes are taken from the request; existing definitions win
    # (DDB-TABLE-162: unused or conflicting entries are ignored).
    attributes = list(definition["AttributeDefinitions"])
    # An existing key attribute given another type for the new key is refused (its other
    # entries are ignored, as above); a name repeated within the request takes its first type.
    existing = {d["AttributeName"]: d["AttributeType"] for d in attributes}
    keys = {k["AttributeName"] for k in action["KeySchema"]}
    for spec in provided:
        attribute = spec.get("AttributeName")
        if attribute in keys and existing.get(attribute, spec.get("AttributeType")) != spec.get(
            "AttributeType"
        ):
            raise _redefined(definition, action, attribute, provided)
    known = set(existing)
    for spec in provided:
        attribute = spec.get("AttributeName")
        if attribute in keys and attribute not in known:
            attributes.append(
                {"AttributeName": attribute, "AttributeType": spec.get("AttributeType")}
            )
            known.add(attribute)
    check_gsi_key_schema(action, [d["AttributeName"] for d in attributes])
    check_projection(action["Projection"])
    mode = billing(definition)
    if mode == "PAY_PER_REQUEST" and action.get("ProvisionedThroughput") is not None:
        raise invalid_parameters(
            f"ProvisionedThroughput should not be specified for index: {name} when "
            "BillingMode is PAY_PER_REQUEST"
        )
    if mode == "PROVISIONED" and action.get("ProvisionedThroughput") is None:
        raise validation(  # DDB-TABLE-152
            f"Both ReadCapacityUnits and WriteCapacityUnits must be specified for index: {name}"
        )
    if len([i for i in gsis(definition) if i.get("IndexStatus") != "DELETING"]) >= MAX_GSIS:
        raise DynamoDBError(  # DDB-TABLE-169
            "LimitExceededException",
            "Subscriber limit exceeded: Number of global secondary indexes exceeds per-table "
            f"limit of {MAX_GSIS}",
        )
    described = gsi_description(action, definition["TableArn"], mode, status="CREATING")
    described["Backfilling"] = False
    definition["GlobalSecondaryIndexes"] = [*gsis(definition), described]
    definition["AttributeDefinitions"] = attributes
    index_id = w.index_allocate(row.id, name)
    definition["_index_ids"] = {**(definition.get("_index_ids") or {}), name: index_id}
    w.index_backfill_set(index_id, row.id, None)


def _schema(key_schema: Sequence[Mapping[str, Any]], types: Mapping[str, Any]) -> str:
    elements = ", ".join(
        f"SchemaElement: key{{{k['AttributeName']}:{types.get(k['AttributeName'])}:{k['KeyType']}}}"
        for k in key_schema
    )
    return f"Schema:[{elements}]"


def _redefined(
    definition: Mapping[str, Any],
    action: Mapping[str, Any],
    attribute: str,
    provided: Sequence[Mapping[str, Any]],
) -> DynamoDBError:
    """A GSI Create whose key gives an existing key attribute another type: DynamoDB's words
    (ScyllaDB's test/alternator/test_gsi_updatetable.py records them), the existing key schema
    that uses the attribute (the table's, a GSI's or an LSI's) against the new index's."""
    types = {d["AttributeName"]: d["AttributeType"] for d in definition["AttributeDefinitions"]}
    schemas = [definition["KeySchema"]] + [
        i["KeySchema"]
        for member in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes")
        for i in definition.get(member) or ()
    ]
    existing = next(s for s in schemas if any(k["AttributeName"] == attribute for k in s))
    new_types = dict(types)
    for spec in provided:  # the new attributes' first types; the redefined one's own
        new_types.setdefault(spec.get("AttributeName"), spec.get("AttributeType"))
    new_types[attribute] = next(
        d.get("AttributeType")
        for d in provided
        if d.get("AttributeName") == attribute and d.get("AttributeType") != types[attribute]
    )
    return invalid_parameters(
        "Attributes cannot be redefined. Please check that your attribute has the same type as "
        f"previously defined. Existing schema: {_schema(existing, types)} New schema: "
        f"{_schema(action['KeySchema'], new_types)}"
    )


def billing_switch(w: Writer, row: TableRow) -> TableRow:
    """A table's GSIs follow its billing mode: zero throughput on PAY_PER_REQUEST, and a
    switch to PROVISIONED needs an Update with throughput for every GSI (DDB-TABLE-152)."""
    current = gsis(row.definition)
    if not current:
        return row
    definition = copy.deepcopy(row.definition)
    if billing(definition) == "PAY_PER_REQUEST":
        for index in current:
            throughput = dict(index["ProvisionedThroughput"])
            throughput.update(ReadCapacityUnits=0, WriteCapacityUnits=0)
            set_index(definition, index["IndexName"], ProvisionedThroughput=throughput)
    else:
        missing = [
            index["IndexName"]
            for index in current
            if index["ProvisionedThroughput"]["ReadCapacityUnits"] == 0
            and index.get("IndexStatus") != "DELETING"
        ]
        if missing:
            # dynalite actions/updateTable.js getThroughputUpdates.
            raise invalid_parameters(
                f"ProvisionedThroughput must be specified for index: {','.join(missing)}"
            )
    if definition == row.definition:
        return row
    return w.update_table(row, definition)
