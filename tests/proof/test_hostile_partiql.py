"""The PartiQL fuzz (issue 39, point 1): statements drawn from the engine's PartiQL grammar,
valid and broken, nested past every limit, with parameters of every shape, sent over HTTP to a
real ``firstwrite engine serve`` in ExecuteStatement, BatchExecuteStatement and
ExecuteTransaction. Whatever is sent:

* the answer comes within :data:`ANSWER_TIMEOUT_S` (a hang fails), the connection not dropped
  (a reset fails);
* it is 200, or 400 with one of DynamoDB's error types a PartiQL request can earn (never a 5xx);
  a batch's per-statement errors are never ``InternalServerError``;
* the server logs no traceback, and still answers ListTables at the end.

Hypothesis draws the statements production by production (:mod:`partiql_grammar`). The short
form runs in ``make test``; ``make proof-hostile`` (``FIRSTWRITE_PROOF=long``) runs the long one.
The fixed regressions of point 1 are tests/engine/operations/test_partiql_nesting.py's.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hostile import HEADERS, TARGET, encode
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from partiql_grammar import HASH_TABLE, INDEX, KEYS, OPERATIONS, REQUESTS, TABLE
from proofkit import proof_summary, report, scale  # noqa: F401  (proof_summary: the numbers)

from engine_process import HttpServer, start_server

pytestmark = pytest.mark.slow

EXAMPLES = scale(30, 1500)  # per operation
# A hang fails: the slowest answer of a short run on a shared 2-core machine is far under this
# (the report lists it).
ANSWER_TIMEOUT_S = 15.0
# What a PartiQL request may earn from DynamoDB (the part of __type after '#').
PARTIQL_ERRORS = frozenset(
    {
        "ValidationException",
        "SerializationException",
        "ResourceNotFoundException",
        "ConditionalCheckFailedException",
        "DuplicateItemException",
        "TransactionCanceledException",
        "TransactionConflictException",
        "TransactionInProgressException",
        "IdempotentParameterMismatchException",
    }
)

_answers: Counter[str] = Counter()
_slowest: dict[str, float] = {}


def _call(http: httpx.Client, operation: str, body: dict[str, Any]) -> httpx.Response:
    headers = {**HEADERS, "X-Amz-Target": TARGET + operation}
    return http.post("/", content=encode(body), headers=headers)


def _ok(http: httpx.Client, operation: str, body: dict[str, Any]) -> dict[str, Any]:
    response = _call(http, operation, body)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    served = start_server(tmp_path_factory.mktemp("partiql-fuzz") / "engine.db")
    try:
        with httpx.Client(base_url=served.url, timeout=60) as http:
            _tables(http)
        yield served
    finally:
        served.stop()


def _tables(http: httpx.Client) -> None:
    _ok(
        http,
        "CreateTable",
        {
            "TableName": TABLE,
            "KeySchema": [
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            "AttributeDefinitions": [
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "N"},
                {"AttributeName": "v", "AttributeType": "S"},
            ],
            "GlobalSecondaryIndexes": [
                {
                    "IndexName": INDEX,
                    "KeySchema": [{"AttributeName": "v", "KeyType": "HASH"}],
                    "Projection": {"ProjectionType": "ALL"},
                }
            ],
            "BillingMode": "PAY_PER_REQUEST",
        },
    )
    _ok(
        http,
        "CreateTable",
        {
            "TableName": HASH_TABLE,
            "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
            "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
            "BillingMode": "PAY_PER_REQUEST",
        },
    )
    _stock(http)


def _stock(http: httpx.Client) -> None:
    """The items of :data:`KEYS` (again: the fuzz deletes and changes them)."""
    for pk, sk in KEYS:
        item = {
            "pk": {"S": pk},
            "sk": {"N": str(sk)},
            "v": {"S": "x"},
            "n": {"N": "1"},
            "m": {"M": {"a": {"L": [{"N": "1"}, {"S": "b"}]}}},
            "l": {"L": [{"S": "a"}, {"N": "2"}]},
            "s": {"SS": ["a", "b"]},
        }
        _ok(http, "PutItem", {"TableName": TABLE, "Item": item})
    _ok(http, "PutItem", {"TableName": HASH_TABLE, "Item": {"pk": {"S": "a"}}})


@pytest.fixture(scope="module")
def http(server: HttpServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=ANSWER_TIMEOUT_S) as client:
        yield client


class _Log:
    """The server log read on from where the last example left it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = path.stat().st_size if path.exists() else 0

    def new(self) -> str:
        with self.path.open("rb") as log:
            log.seek(self.offset)
            text = log.read()
        self.offset += len(text)
        return text.decode(errors="replace")


def _problem(response: httpx.Response) -> str | None:
    """What is wrong with an answer (None: nothing)."""
    status = response.status_code
    if status == 200:
        entries = response.json().get("Responses", [])
        internal = [e for e in entries if e.get("Error", {}).get("Code") == "InternalServerError"]
        return f"a statement answered {internal[0]}" if internal else None
    try:
        kind = str(response.json().get("__type", "")).rpartition("#")[2]
    except ValueError:
        return f"{status} with a body that is not JSON: {response.text[:300]}"
    if status != 400 or kind not in PARTIQL_ERRORS:
        return f"{status} {response.text[:500]}"
    return None


def _tally(operation: str, response: httpx.Response) -> None:
    """Count the answer by status and error type; a batch's statements each by their own."""
    answer = response.json()
    if response.status_code != 200:
        _answers[f"{operation}:400:{answer['__type'].rpartition('#')[2]}"] += 1
        return
    _answers[f"{operation}:200"] += 1
    if operation == "BatchExecuteStatement":
        for entry in answer["Responses"]:
            outcome = entry["Error"]["Code"] if "Error" in entry else "ok"
            _answers[f"{operation}:statement:{outcome}"] += 1


def _send(http: httpx.Client, server: HttpServer, log: _Log, operation: str, body: Any) -> None:
    shown = json.dumps(body)[:600]
    try:
        response = _call(http, operation, body)
    except httpx.TimeoutException:
        pytest.fail(f"{operation}: no answer in {ANSWER_TIMEOUT_S} s to {shown}")
    except httpx.TransportError as error:
        pytest.fail(f"{operation}: {error!r} (connection lost) for {shown}")
    elapsed = response.elapsed.total_seconds()
    _slowest[operation] = max(_slowest.get(operation, 0.0), elapsed)
    problem = _problem(response)
    assert problem is None, f"{operation} {shown}: {problem}"
    _tally(operation, response)
    assert server.process.poll() is None, server.log()[-3000:]
    logged = log.new()
    assert "Traceback" not in logged, f"{operation} {shown}:\n{logged[-3000:]}"
    token = response.json().get("NextToken") if response.status_code == 200 else None
    if operation == "ExecuteStatement" and token:  # the next page, as a client asks for it
        _send(http, server, log, operation, {**body, "NextToken": token})


@pytest.mark.parametrize("operation", OPERATIONS)
def test_no_partiql_request_gets_a_5xx_or_a_hang(
    http: httpx.Client, server: HttpServer, operation: str
) -> None:
    log = _Log(server.log_path)

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
            HealthCheck.filter_too_much,
        ],
    )
    @given(body=REQUESTS[operation], restock=st.integers(0, 19))
    def fuzz(body: dict[str, Any], restock: int) -> None:
        if restock == 0:  # deletes would leave nothing to read and update
            _stock(http)
        _send(http, server, log, operation, body)

    fuzz()
    # The server is alive, said nothing went wrong, and still answers.
    assert server.process.poll() is None
    assert "Traceback" not in server.log(), server.log()[-3000:]
    tables = _ok(http, "ListTables", {})["TableNames"]
    assert {TABLE, HASH_TABLE} <= set(tables)
    report(
        "hostile-partiql",
        operation=operation,
        examples=EXAMPLES,
        slowest_answer_s=round(_slowest.get(operation, 0.0), 3),
        answers={k: n for k, n in sorted(_answers.items()) if k.startswith(operation + ":")},
    )
