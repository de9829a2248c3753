"""The property: whatever sequence of writes a table receives (puts, updates, deletes, batches,
transactions, some of them refused), every index answers Query and Scan exactly as a model
computed from the base table alone (index_model.py): the same entries, the same projections,
sparse where attributes are missing, in DynamoDB's order, page after page.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from index_model import assert_indexes_agree, model, order_of

from firstwrite.engine.api import Engine
from firstwrite.engine.direct.client import DirectClient
from firstwrite.engine.values import normalize_number
from hypothesis_budget import examples

TABLE = "prop"
DEFINITIONS = [
    {"AttributeName": "pk", "AttributeType": "S"},
    {"AttributeName": "sk", "AttributeType": "N"},
    {"AttributeName": "g", "AttributeType": "S"},
    {"AttributeName": "r", "AttributeType": "N"},
    {"AttributeName": "h", "AttributeType": "N"},
    {"AttributeName": "bin", "AttributeType": "B"},
    {"AttributeName": "r2", "AttributeType": "S"},
]
TYPES = {d["AttributeName"]: d["AttributeType"] for d in DEFINITIONS}


def _index(name: str, keys: list[tuple[str, str]], **projection: Any) -> dict[str, Any]:
    return {
        "IndexName": name,
        "KeySchema": [{"AttributeName": a, "KeyType": k} for a, k in keys],
        "Projection": projection,
    }


GSIS = [
    _index(
        "g-r", [("g", "HASH"), ("r", "RANGE")], ProjectionType="INCLUDE", NonKeyAttributes=["v"]
    ),
    _index("by-h", [("h", "HASH")], ProjectionType="KEYS_ONLY"),
    _index("bin-g", [("bin", "HASH"), ("g", "RANGE")], ProjectionType="ALL"),
    # A multi-attribute key: two HASH and three RANGE attributes of all three types.
    _index(
        "multi",
        [("g", "HASH"), ("h", "HASH"), ("r2", "RANGE"), ("bin", "RANGE"), ("r", "RANGE")],
        ProjectionType="INCLUDE",
        NonKeyAttributes=["w"],
    ),
]
MULTI_RANGE = ("r2", "bin", "r")
OPERATORS = st.sampled_from(["=", "<", "<=", ">", ">=", "BETWEEN", "begins_with"])
LSIS = [_index("by-r2", [("pk", "HASH"), ("r2", "RANGE")], ProjectionType="KEYS_ONLY")]

# Small domains, so that index keys collide, items move between partitions and order matters.
STRINGS = st.sampled_from(["a", "b", "ab", "é", "Z", "a b", "a\x00"])  # NUL: a key byte 00
NUMBERS = st.sampled_from(["-10", "-1.5", "0", "2", "10", "100", "1e3"])
BINARIES = st.sampled_from([b"\x00", b"\x01", b"\xff", b"\x00\x01", b"\xff\x00"])
VALUES = {
    "g": STRINGS,
    "r": NUMBERS,
    "h": NUMBERS,
    "bin": BINARIES,
    "r2": STRINGS,
    "v": STRINGS,
    "w": STRINGS,
}
KEYS = st.tuples(st.sampled_from(["p1", "p2", "p3"]), st.sampled_from(["1", "2", "3"]))


def _typed(name: str, raw: Any) -> dict[str, Any]:
    if isinstance(raw, bytes):
        return {"B": raw}
    kind = TYPES.get(name, "S")
    if name in ("v", "w"):
        kind = "S"
    return {kind: raw}


@st.composite
def attributes(draw: st.DrawFn) -> dict[str, Any]:
    chosen = draw(st.sets(st.sampled_from(sorted(VALUES)), max_size=len(VALUES)))
    out = {name: _typed(name, draw(VALUES[name])) for name in chosen}
    if draw(st.integers(0, 9)) == 0 and chosen & {"g", "h"}:
        # Now and then an index key of the wrong type: the write must be refused whole.
        name = sorted(chosen & {"g", "h"})[0]
        out[name] = {"S": "x"} if name == "h" else {"N": "1"}
    return out


def _key(pk: str, sk: str) -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"N": sk}}


OPERATIONS = st.one_of(
    st.tuples(st.just("put"), KEYS, attributes()),
    st.tuples(st.just("update"), KEYS, attributes(), st.sets(st.sampled_from(sorted(VALUES)))),
    st.tuples(st.just("delete"), KEYS),
    st.tuples(st.just("batch"), st.lists(st.tuples(KEYS, st.none() | attributes()), max_size=3)),
    st.tuples(st.just("transact"), st.lists(st.tuples(KEYS, st.none() | attributes()), max_size=3)),
)


def _valid(item: dict[str, Any]) -> bool:
    return all(
        next(iter(item[name])) == kind
        for name, kind in TYPES.items()
        if name in item and name not in ("pk", "sk")
    )


def _normal(item: dict[str, Any]) -> dict[str, Any]:
    """The item as stored: numbers normalised (1e3 is 1000)."""
    return {k: {"N": normalize_number(v["N"])} if "N" in v else v for k, v in item.items()}


def apply(
    client: DirectClient, state: dict[tuple[str, str], dict[str, Any]], op: tuple[Any, ...]
) -> None:
    kind = op[0]
    if kind == "put":
        (pk, sk), attrs = op[1], op[2]
        new = {**_key(pk, sk), **attrs}
        _write(client.put_item, _valid(new), TableName=TABLE, Item=new)
        if _valid(new):
            state[(pk, sk)] = _normal(new)
    elif kind == "update":
        (pk, sk), attrs, removed = op[1], op[2], op[3] - set(op[2])
        sets = [f"#{n} = :{n}" for n in attrs]
        clauses = (["SET " + ", ".join(sets)] if sets else []) + (
            ["REMOVE " + ", ".join(f"#{n}" for n in removed)] if removed else []
        )
        if not clauses:
            return
        old = state.get((pk, sk))
        new = {**(old or _key(pk, sk)), **attrs}
        for name in removed:
            new.pop(name, None)
        names = {f"#{n}": n for n in (*attrs, *removed)}
        values = {f":{n}": v for n, v in attrs.items()}
        _write(
            client.update_item,
            _valid(new),
            TableName=TABLE,
            Key=_key(pk, sk),
            UpdateExpression=" ".join(clauses),
            ExpressionAttributeNames=names,
            **({"ExpressionAttributeValues": values} if values else {}),
        )
        if _valid(new) and (old is not None or attrs):
            state[(pk, sk)] = _normal(new)
    elif kind == "delete":
        pk, sk = op[1]
        client.delete_item(TableName=TABLE, Key=_key(pk, sk))
        state.pop((pk, sk), None)
    else:
        writes: dict[tuple[str, str], dict[str, Any] | None] = {}
        for key, attrs in op[1]:
            writes[key] = None if attrs is None else {**_key(*key), **attrs}
        if not writes:
            return
        valid = all(item is None or _valid(item) for item in writes.values())
        if kind == "batch":
            requests = [
                {"DeleteRequest": {"Key": _key(*k)}} if v is None else {"PutRequest": {"Item": v}}
                for k, v in writes.items()
            ]
            _write(client.batch_write_item, valid, RequestItems={TABLE: requests})
        else:
            actions = [
                {"Delete": {"TableName": TABLE, "Key": _key(*k)}}
                if v is None
                else {"Put": {"TableName": TABLE, "Item": v}}
                for k, v in writes.items()
            ]
            _write(client.transact_write_items, valid, TransactItems=actions)
        if valid:
            for key, item in writes.items():
                if item is None:
                    state.pop(key, None)
                else:
                    state[key] = _normal(item)


def _write(call: Any, valid: bool, **params: Any) -> None:
    try:
        call(**params)
    except ClientError as exc:
        code = exc.response["Error"]["Code"]
        assert not valid and code in ("ValidationException", "TransactionCanceledException"), exc
    else:
        assert valid, params


def query_all(
    client: DirectClient,
    index: str,
    condition: str,
    values: dict[str, Any],
    *,
    names: dict[str, str] | None = None,
    limit: int,
    forward: bool,
) -> list[dict[str, Any]]:
    """Every page of a Query on ``index``, ``limit`` entries at a time."""
    out: list[dict[str, Any]] = []
    params: dict[str, Any] = {
        "TableName": TABLE,
        "IndexName": index,
        "KeyConditionExpression": condition,
        "ExpressionAttributeValues": values,
        "Limit": limit,
        "ScanIndexForward": forward,
    }
    if names:
        params["ExpressionAttributeNames"] = names
    while True:
        page = client.query(**params)
        out.extend(page["Items"])
        if "LastEvaluatedKey" not in page:
            return out
        params["ExclusiveStartKey"] = page["LastEvaluatedKey"]


@settings(
    max_examples=examples(100),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    operations=st.lists(OPERATIONS, min_size=1, max_size=25),
    limit=st.integers(1, 4),
    bounds=st.tuples(NUMBERS, NUMBERS),
    conditions=st.lists(st.tuples(st.integers(0, 2), OPERATORS), max_size=4),
    data=st.data(),
)
def test_every_index_answers_as_its_model(
    operations: list[tuple[Any, ...]],
    limit: int,
    bounds: tuple[str, str],
    conditions: list[tuple[int, str]],
    data: st.DataObject,
) -> None:
    with Engine() as engine:
        client = DirectClient(engine)
        client.create_table(
            TableName=TABLE,
            AttributeDefinitions=DEFINITIONS,
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            GlobalSecondaryIndexes=GSIS,
            LocalSecondaryIndexes=LSIS,
            BillingMode="PAY_PER_REQUEST",
        )
        state: dict[tuple[str, str], dict[str, Any]] = {}
        for op in operations:
            apply(client, state, op)
        # The table is the model's base: the refused writes left nothing behind.
        stored = client.scan(TableName=TABLE, ConsistentRead=True)["Items"]
        assert sorted(map(repr, stored)) == sorted(map(repr, state.values()))
        assert_indexes_agree(client, TABLE)  # Scan: every entry, projections, counts
        description = client.describe_table(TableName=TABLE)["Table"]
        items = list(state.values())
        for index in GSIS + LSIS:
            described = next(
                i
                for i in description.get("GlobalSecondaryIndexes", [])
                + description.get("LocalSecondaryIndexes", [])
                if i["IndexName"] == index["IndexName"]
            )
            entries = model(description, described, items)
            hash_names = [k["AttributeName"] for k in index["KeySchema"] if k["KeyType"] == "HASH"]
            partitions = {repr([e[n] for n in hash_names]): e for e in entries}
            for sample in partitions.values():
                expected = [e for e in entries if all(e[n] == sample[n] for n in hash_names)]
                names = {f"#h{i}": n for i, n in enumerate(hash_names)}
                for forward in (True, False):
                    got = query_all(
                        client,
                        index["IndexName"],
                        " AND ".join(f"#h{i} = :h{i}" for i in range(len(hash_names))),
                        {f":h{i}": sample[n] for i, n in enumerate(hash_names)},
                        names=names,
                        limit=limit,
                        forward=forward,
                    )
                    assert got == (expected if forward else expected[::-1]), index["IndexName"]
        _query_multi(client, description, items, conditions, data, limit)
        # A sort key range on g-r: BETWEEN the two drawn bounds.
        low, high = sorted(bounds, key=lambda n: order_of({"N": n}))
        entries = model(description, description["GlobalSecondaryIndexes"][0], items)
        for g in {e["g"]["S"] for e in entries}:
            expected = [
                e
                for e in entries
                if e["g"]["S"] == g
                and order_of({"N": low}) <= order_of(e["r"]) <= order_of({"N": high})
            ]
            got = query_all(
                client,
                "g-r",
                "g = :g AND r BETWEEN :a AND :b",
                {":g": {"S": g}, ":a": {"N": low}, ":b": {"N": high}},
                limit=limit,
                forward=True,
            )
            assert got == expected


def _meets(value: dict[str, Any], operator: str, operands: list[dict[str, Any]]) -> bool:
    """The model of one sort-key condition, in DynamoDB's order."""
    have = order_of(value)
    bounds = [order_of(o) for o in operands]
    if operator == "begins_with":
        ((_, raw),) = value.items()
        ((_, prefix),) = operands[0].items()
        return bool(raw.startswith(prefix))
    if operator == "BETWEEN":
        return bounds[0] <= have <= bounds[1]
    return {
        "=": have == bounds[0],
        "<": have < bounds[0],
        "<=": have <= bounds[0],
        ">": have > bounds[0],
        ">=": have >= bounds[0],
    }[operator]


def _query_multi(
    client: DirectClient,
    description: dict[str, Any],
    items: list[dict[str, Any]],
    conditions: list[tuple[int, str]],
    data: st.DataObject,
    limit: int,
) -> None:
    """Queries on the multi-attribute GSI: = on both HASH attributes, = on the first ``used``
    RANGE attributes of a drawn entry, and a drawn condition on the next one."""
    described = next(i for i in description["GlobalSecondaryIndexes"] if i["IndexName"] == "multi")
    entries = model(description, described, items)
    for used, operator in conditions:
        if not entries:
            return
        sample = data.draw(st.sampled_from(entries))
        attribute = MULTI_RANGE[used]
        if operator == "begins_with" and attribute == "r":
            operator = ">="  # begins_with takes S and B only
        domain = VALUES[attribute]
        count = 2 if operator == "BETWEEN" else 1
        operands = sorted(
            (_typed(attribute, data.draw(domain)) for _ in range(count)), key=order_of
        )
        if operator == "begins_with" and attribute == "r2":
            operands = [{"S": operands[0]["S"][:1]}]
        fixed = {"g": sample["g"], "h": sample["h"]}
        fixed.update({n: sample[n] for n in MULTI_RANGE[:used]})
        expected = [
            e
            for e in entries
            if all(e[n] == v for n, v in fixed.items()) and _meets(e[attribute], operator, operands)
        ]
        values = {f":{n}": v for n, v in fixed.items()}
        terms = [f"{n} = :{n}" for n in fixed]
        refs = [f":c{i}" for i in range(count)]
        values.update(zip(refs, operands, strict=True))
        if operator == "BETWEEN":
            terms.append(f"{attribute} BETWEEN :c0 AND :c1")
        elif operator == "begins_with":
            terms.append(f"begins_with({attribute}, :c0)")
        else:
            terms.append(f"{attribute} {operator} :c0")
        for forward in (True, False):
            got = query_all(
                client, "multi", " AND ".join(terms), values, limit=limit, forward=forward
            )
            assert got == (expected if forward else expected[::-1]), (terms, values)
