"""PartiQL's planner: a statement as its equivalent item request, against the key schema.

The request is a GetItem, Query, Scan, PutItem, UpdateItem or DeleteItem (or the matching
transaction action).

The statement's conditions become a ConditionExpression, KeyConditionExpression or
FilterExpression (names as ``#n``, values as ``:v`` placeholders), so the expression
language, its evaluator and its checks are the ones every other request uses. Choosing the
read: equality on the whole primary key of the table and nothing else is a GetItem; equality
on the partition key (of the table or of ``"table"."index"``) is a Query, with one sort-key
condition as its key condition and the rest as its filter; anything else is a Scan with the
whole WHERE as its filter (so is a Query whose filter would name a key attribute).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import resource_not_found, validation
from ..expressions.partiql import (
    Between,
    Call,
    Compare,
    Condition,
    Delete,
    Exists,
    In,
    Insert,
    Logical,
    Missing,
    Not,
    Operand,
    Path,
    Select,
    Statement,
    Update,
    Value,
    bind,
)
from ..item_keys import KeySchema
from ..storage import TableRow

__all__ = [
    "INCOMPLETE_KEY",
    "Plan",
    "count_check",
    "plan",
    "table_row",
]

INCOMPLETE_KEY = "Where clause does not contain a mandatory equality on all key attributes"
NOT_ON_INDEX = "This operation is not supported on an index"
DML_FROM = "FROM clause may only contain a single table name in data manipulation statements"
CONSISTENT_GSI = "Strongly consistent read is not supported on Global Secondary Indexes"
KEY_TYPE = "Key attribute's data type should match its data type in table's schema: Key {}"
KEY_ABSENT = "Key attribute should be present in the item: Key {}"
NESTED_KEY = (
    "Key attributes must be scalars; list random access '[]' and map lookup '.' are not "
    "allowed: Key {}"
)
IS_OPERAND = "The left hand side argument to IS must be a Variable Reference, Literal, or Path"
DUPLICATE_SELECT = "Duplicate identifiers in select clause: {}"
DELETE_RETURNING = (
    "Invalid returning clause: RETURNING {}. Only RETURNING ALL OLD * is allowed in DELETE "
    "statements."
)
ORDER_NO_WHERE = "Must have WHERE clause in the statement when using ORDER BY clause."
ORDER_NO_HASH = (
    "Must have at least one non-optional hash key condition in WHERE clause when using ORDER "
    "BY clause."
)
ORDER_NOT_KEY = "Variable reference {} in ORDER BY clause must be part of the primary key"
_RANGE_OPERATORS = frozenset({"=", "<", "<=", ">", ">="})
_RETURNING_TEXT = {
    "ALL_OLD": "ALL OLD *",
    "ALL_NEW": "ALL NEW *",
    "UPDATED_OLD": "MODIFIED OLD *",
    "UPDATED_NEW": "MODIFIED NEW *",
}


@dataclass(slots=True)
class Plan:
    """One statement as the request of ``operation`` on ``table``.

    ``projection``: the paths a SELECT names (``None``: every attribute), each returned under
    its leaf name; ``insert``: a failed condition is a duplicate key; ``returning``: the
    write's Attributes are its Items; ``key``: the request's Key (GetItem, writes)."""

    operation: str
    table: str
    request: dict[str, Any]
    projection: tuple[Path, ...] | None = None
    insert: bool = False
    returning: bool = False
    key: dict[str, Any] = field(default_factory=dict)


class _Expressions:
    """Placeholders for names and values, shared by every expression of one request."""

    __slots__ = ("_named", "names", "parameters", "values")

    def __init__(self, parameters: Sequence[Any]) -> None:
        self.parameters = parameters
        self.names: dict[str, str] = {}
        self.values: dict[str, Any] = {}
        self._named: dict[str, str] = {}

    def name(self, name: str) -> str:
        ref = self._named.get(name)
        if ref is None:
            ref = self._named[name] = f"#n{len(self._named)}"
            self.names[ref] = name
        return ref

    def value(self, value: Any) -> str:
        ref = f":v{len(self.values)}"
        self.values[ref] = value
        return ref

    def path(self, path: Path) -> str:
        out = []
        for part in path.parts:
            if isinstance(part, int):
                out.append(f"[{part}]")
            else:
                out.append(("." if out else "") + self.name(part))
        return "".join(out)

    def operand(self, operand: Operand) -> str:
        if isinstance(operand, Path):
            return self.path(operand)
        if isinstance(operand, Value):
            return self.value(bind(operand.template, self.parameters))
        if isinstance(operand, Call):
            if operand.name in ("+", "-"):
                left, right = operand.args
                return f"{self.operand(left)} {operand.name} {self.operand(right)}"
            args = []
            for arg in operand.args:  # (a loop, not a generator: one frame a nested call)
                args.append(self.operand(arg))
            return f"{operand.name}({', '.join(args)})"
        return f"({self.condition(operand)})"

    def condition(self, condition: Condition) -> str:
        if isinstance(condition, Compare):
            left, right = self.operand(condition.left), self.operand(condition.right)
            return f"{left} {condition.op} {right}"
        if isinstance(condition, Between):
            subject = self.operand(condition.subject)
            low, high = self.operand(condition.low), self.operand(condition.high)
            return f"{subject} BETWEEN {low} AND {high}"
        if isinstance(condition, In):
            options = ", ".join(self.operand(o) for o in condition.options)
            return f"{self.operand(condition.subject)} IN ({options})"
        if isinstance(condition, Missing):
            if not isinstance(condition.subject, Path):
                raise validation(IS_OPERAND)
            function = "attribute_exists" if condition.negated else "attribute_not_exists"
            return f"{function}({self.path(condition.subject)})"
        if isinstance(condition, Logical):
            items = []
            for item in condition.items:  # (a loop, not a generator: one frame a level)
                items.append(f"({self.condition(item)})")
            return f" {condition.op} ".join(items)
        if isinstance(condition, Not):
            return f"NOT ({self.condition(condition.item)})"
        return self.operand(condition)

    def attach(self, request: dict[str, Any]) -> dict[str, Any]:
        if self.names:
            request["ExpressionAttributeNames"] = self.names
        if self.values:
            request["ExpressionAttributeValues"] = self.values
        return request


def table_row(ctx_storage: Any, region: str, name: str) -> TableRow:
    """The catalog row of table ``name``, or ResourceNotFoundException as the item
    operations raise it."""
    row: TableRow | None = ctx_storage.cached_table(region, name)
    if row is None:
        raise resource_not_found()
    return row


def _conjuncts(where: Condition | None) -> list[Condition]:
    if where is None:
        return []
    if isinstance(where, Logical) and where.op == "AND":
        return list(where.items)
    return [where]


def _equality(condition: Condition, parameters: Sequence[Any]) -> tuple[str, Any] | None:
    """``(name, value)`` of ``name = value`` (either way round), else None."""
    if not isinstance(condition, Compare) or condition.op != "=":
        return None
    for subject, other in ((condition.left, condition.right), (condition.right, condition.left)):
        if isinstance(subject, Path) and isinstance(other, Value):
            name = subject.top
            if name is not None:
                return name, bind(other.template, parameters)
    return None


def _mentions(condition: Condition | Operand, names: frozenset[str]) -> bool:
    """Whether ``condition`` reads a top-level attribute in ``names`` (walked with a loop)."""
    stack: list[Condition | Operand] = [condition]
    while stack:
        node = stack.pop()
        if isinstance(node, Path):
            if isinstance(node.parts[0], str) and node.parts[0] in names:
                return True
        elif isinstance(node, Compare):
            stack += (node.left, node.right)
        elif isinstance(node, Between):
            stack += (node.subject, node.low, node.high)
        elif isinstance(node, In):
            stack += (node.subject, *node.options)
        elif isinstance(node, Missing):
            stack.append(node.subject)
        elif isinstance(node, Logical):
            stack += node.items
        elif isinstance(node, Not):
            stack.append(node.item)
        elif isinstance(node, Call):
            stack += node.args
    return False


def _checked_key_value(name: str, kind: str, value: Any) -> Any:
    if not isinstance(value, dict) or len(value) != 1 or next(iter(value)) != kind:
        raise validation(KEY_TYPE.format(name))
    return value


def _full_key(
    schema: KeySchema, conjuncts: list[Condition], parameters: Sequence[Any]
) -> tuple[dict[str, Any], list[Condition]] | None:
    """The Key named by equalities in ``conjuncts`` and the conjuncts left, or None."""
    key: dict[str, Any] = {}
    rest: list[Condition] = []
    wanted = dict((*schema.hash_attributes, *schema.range_attributes))
    for condition in conjuncts:
        equality = _equality(condition, parameters)
        if equality is not None and equality[0] in wanted and equality[0] not in key:
            name, value = equality
            key[name] = _checked_key_value(name, wanted[name], value)
        else:
            rest.append(condition)
    if len(key) != len(wanted):
        return None
    return key, rest


def _write_key(
    row: TableRow, where: Condition, parameters: Sequence[Any]
) -> tuple[dict[str, Any], list[Condition]]:
    """UPDATE and DELETE: the whole key, from equalities ANDed at the top of WHERE."""
    found = _full_key(row.key_schema, _conjuncts(where), parameters)
    if found is None:
        raise validation(INCOMPLETE_KEY)
    return found


def _read_only(stmt: Insert | Update | Delete | Exists) -> None:
    """Writes name a table, never an index."""
    if not isinstance(stmt, Exists) and stmt.source.index is not None:
        raise validation(DML_FROM if isinstance(stmt, Insert) else NOT_ON_INDEX)


def plan(
    stmt: Statement,
    parameters: Sequence[Any],
    row: TableRow,
    *,
    consistent: bool = False,
    limit: int | None = None,
    on_failure: str | None = None,
) -> Plan:
    """The request equivalent to ``stmt`` on table ``row`` (``stmt`` already bound to
    ``parameters`` by count); ValidationException where DynamoDB refuses the statement."""
    if isinstance(stmt, Select):
        return _select(stmt, parameters, row, consistent=consistent, limit=limit)
    _read_only(stmt)
    table = row.name
    values = _Expressions(parameters)
    if isinstance(stmt, Insert):
        item = bind(stmt.item.template, parameters)
        if not isinstance(item, dict) or "M" not in item:
            raise validation(
                "Unsupported format in item expression. Please use struct format {...} to "
                "express item values for insert statement."
            )
        fields = item["M"]
        for name, kind in (*row.key_schema.hash_attributes, *row.key_schema.range_attributes):
            if name not in fields:
                raise validation(KEY_ABSENT.format(name))
            _checked_key_value(name, kind, fields[name])
        condition = f"attribute_not_exists({values.name(row.key_schema.hash_name)})"
        request = {"TableName": table, "Item": fields, "ConditionExpression": condition}
        return Plan("PutItem", table, values.attach(request), insert=True)
    if isinstance(stmt, Exists):
        select = stmt.select
        if select.source.index is not None:
            raise validation("Operations on indices are not supported in transactions")
        found = _full_key(row.key_schema, _conjuncts(select.where), parameters)
        if found is None:
            raise validation("EXISTS() must contain a single item read with additional condition")
        key, rest = found
        parts = [f"attribute_exists({values.name(row.key_schema.hash_name)})"]
        parts.extend(f"({values.condition(c)})" for c in rest)
        request = {"TableName": table, "Key": key, "ConditionExpression": " AND ".join(parts)}
        return Plan("ConditionCheck", table, values.attach(request), key=key)
    key, rest = _write_key(row, stmt.where, parameters)
    if isinstance(stmt, Delete):
        if stmt.returning not in (None, "ALL_OLD"):
            raise validation(DELETE_RETURNING.format(_RETURNING_TEXT[stmt.returning]))
        request = {"TableName": table, "Key": key}
        if rest:
            request["ConditionExpression"] = " AND ".join(f"({values.condition(c)})" for c in rest)
    else:
        clauses = []
        if stmt.sets:
            actions = (f"{values.path(p)} = {values.operand(v)}" for p, v in stmt.sets)
            clauses.append("SET " + ", ".join(actions))
        for function, kind in (("set_add", "ADD"), ("set_delete", "DELETE")):
            chosen = [(p, v) for f, p, v in stmt.set_calls if f == function]
            if chosen:
                pairs = (f"{values.path(p)} {values.operand(v)}" for p, v in chosen)
                clauses.append(f"{kind} " + ", ".join(pairs))
        if stmt.removes:
            clauses.append("REMOVE " + ", ".join(values.path(p) for p in stmt.removes))
        parts = [f"attribute_exists({values.name(row.key_schema.hash_name)})"]
        parts.extend(f"({values.condition(c)})" for c in rest)
        request = {
            "TableName": table,
            "Key": key,
            "UpdateExpression": " ".join(clauses),
            "ConditionExpression": " AND ".join(parts),
        }
    if stmt.returning is not None:
        request["ReturnValues"] = stmt.returning
    if on_failure is not None:
        request["ReturnValuesOnConditionCheckFailure"] = on_failure
    operation = "DeleteItem" if isinstance(stmt, Delete) else "UpdateItem"
    return Plan(
        operation, table, values.attach(request), returning=stmt.returning is not None, key=key
    )


def _select(
    stmt: Select,
    parameters: Sequence[Any],
    row: TableRow,
    *,
    consistent: bool,
    limit: int | None,
) -> Plan:
    table = row.name
    values = _Expressions(parameters)
    request: dict[str, Any] = {"TableName": table}
    projection = stmt.projection
    if projection is not None:
        seen: set[str] = set()
        for path in projection:
            if path.leaf in seen:
                raise validation(DUPLICATE_SELECT.format(path.leaf))
            seen.add(path.leaf)
    schema = row.key_schema
    index_name = stmt.source.index
    if index_name is not None:
        request["IndexName"] = index_name
        index = next((i for i in row.indexes if i.name == index_name), None)
        if index is not None:
            schema = index.key
            if consistent and not index.local:
                raise validation(CONSISTENT_GSI)
    if consistent:
        request["ConsistentRead"] = True
    conjuncts = _conjuncts(stmt.where)
    if index_name is None and stmt.order is None:
        found = _full_key(schema, conjuncts, parameters)
        if found is not None and not found[1]:
            request["Key"] = found[0]
            _projection(values, request, projection)
            return Plan("GetItem", table, values.attach(request), projection, key=found[0])
    operation = _query(values, request, schema, row, conjuncts, parameters)
    if stmt.order is not None:
        _order(stmt, operation, schema, request)
    if operation == "Scan" and stmt.where is not None:
        request["FilterExpression"] = values.condition(stmt.where)
    if limit is not None:
        request["Limit"] = limit
    _projection(values, request, projection)
    return Plan(operation, table, values.attach(request), projection)


def _order(stmt: Select, operation: str, schema: KeySchema, request: dict[str, Any]) -> None:
    assert stmt.order is not None
    path, descending = stmt.order
    if stmt.where is None:
        raise validation(ORDER_NO_WHERE)
    if operation != "Query":
        raise validation(ORDER_NO_HASH)
    if path.top is None or path.top not in schema.names:
        raise validation(ORDER_NOT_KEY.format(path.leaf))
    if descending:
        request["ScanIndexForward"] = False


def _query(
    values: _Expressions,
    request: dict[str, Any],
    schema: KeySchema,
    row: TableRow,
    conjuncts: list[Condition],
    parameters: Sequence[Any],
) -> str:
    """Fill ``request`` as a Query when ``conjuncts`` pin the partition key: "Query", else
    leave it for a Scan: "Scan"."""
    hashes = dict(schema.hash_attributes)
    keyed: dict[str, tuple[Any, Condition]] = {}
    rest: list[Condition] = []
    for condition in conjuncts:
        equality = _equality(condition, parameters)
        if equality is not None and equality[0] in hashes and equality[0] not in keyed:
            keyed[equality[0]] = (equality[1], condition)
        else:
            rest.append(condition)
    if len(keyed) != len(hashes):
        return "Scan"
    for name, (value, _condition) in keyed.items():
        _checked_key_value(name, hashes[name], value)
    key_parts = [values.condition(condition) for _value, condition in keyed.values()]
    ranges = schema.range_attributes
    if len(ranges) == 1:
        range_name = ranges[0][0]
        for condition in rest:
            if _range_condition(condition, range_name):
                key_parts.append(values.condition(condition))
                rest.remove(condition)
                break
    key_names = schema.names | row.key_schema.names
    if any(_mentions(c, key_names) for c in rest):
        values.names.clear()
        values.values.clear()
        values._named.clear()
        return "Scan"
    request["KeyConditionExpression"] = " AND ".join(key_parts)
    if rest:
        request["FilterExpression"] = " AND ".join(f"({values.condition(c)})" for c in rest)
    return "Query"


def _range_condition(condition: Condition, name: str) -> bool:
    """Whether ``condition`` is a sort-key condition a KeyConditionExpression takes."""

    def is_key(operand: Operand) -> bool:
        return isinstance(operand, Path) and operand.top == name

    if isinstance(condition, Compare) and condition.op in _RANGE_OPERATORS:
        return (is_key(condition.left) and isinstance(condition.right, Value)) or (
            is_key(condition.right) and isinstance(condition.left, Value)
        )
    if isinstance(condition, Between):
        return (
            is_key(condition.subject)
            and isinstance(condition.low, Value)
            and isinstance(condition.high, Value)
        )
    if isinstance(condition, Call) and condition.name.lower() == "begins_with":
        args = condition.args
        return len(args) == 2 and is_key(args[0]) and isinstance(args[1], Value)
    return False


def _projection(
    values: _Expressions, request: dict[str, Any], projection: tuple[Path, ...] | None
) -> None:
    if projection is not None:
        request["ProjectionExpression"] = ", ".join(values.path(p) for p in projection)


def count_check(stmt: Statement, parameters: Sequence[Any]) -> None:
    """The statement's ``?`` count against the request's Parameters."""
    if stmt.params != len(parameters):
        raise validation("Number of parameters in request and statement don't match.")
