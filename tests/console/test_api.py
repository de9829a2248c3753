"""The console's JSON API over real HTTP: what it does, and what it refuses.

Every state change is a same-origin JSON POST; anything else is refused before it reaches the
engine. Bad input is a 4xx ``application/problem+json`` with a detail a person can act on, and
nothing is lost.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from firstwrite.console.race import MAX_N, RACE_TABLE
from firstwrite.engine import Engine

from .conftest import Server, post_json


def problem(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    assert body["status"] == status and body["detail"]
    return body


# -- refusing what is not a same-origin JSON request ------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    ["application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "text/plain", None],
)
def test_state_changes_need_json(http: httpx.Client, content_type: str | None) -> None:
    headers = {} if content_type is None else {"Content-Type": content_type}
    response = http.post("/api/race", content=b'{"n": 4}', headers=headers)
    assert "JSON" in problem(response, 415)["detail"]


def test_a_foreign_origin_is_refused(http: httpx.Client, console_server: Server) -> None:
    response = http.post("/api/race", json={"n": 4}, headers={"Origin": "https://evil.example"})
    assert "evil.example" in problem(response, 403)["detail"]
    response = http.post("/api/race", json={"n": 4}, headers={"Origin": "null"})
    problem(response, 403)
    response = http.post("/api/race", json={"n": 4}, headers={"Sec-Fetch-Site": "cross-site"})
    assert "cross-site" in problem(response, 403)["detail"]
    response = http.post("/api/race", json={"n": 4}, headers={"Sec-Fetch-Site": "same-site"})
    problem(response, 403)
    # Nothing ran: the race table was never even created.
    tables = console_server.engine.execute("ListTables", {})["TableNames"]
    assert RACE_TABLE not in tables


def test_same_origin_json_is_accepted(http: httpx.Client) -> None:
    response = post_json(http, "/api/race", {"n": 2})
    assert response.status_code == 200, response.text


def test_pages_carry_a_strict_content_security_policy(http: httpx.Client) -> None:
    for path in ("/", "/api/clock", "/static/console.js"):
        headers = http.get(path).headers
        assert "script-src 'self'" in headers["content-security-policy"]
        assert "frame-ancestors 'none'" in headers["content-security-policy"]
        assert headers["x-content-type-options"] == "nosniff"


def test_get_never_changes_state(http: httpx.Client) -> None:
    problem(http.get("/api/race"), 405)
    problem(http.get("/api/scenarios/replay"), 405)


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (b"{not json", "not JSON"),
        (b"[1, 2]", "JSON object"),
        (b'{"n": 4, "bogus": 1}', "bogus"),
    ],
)
def test_malformed_bodies(http: httpx.Client, body: bytes, detail: str) -> None:
    response = http.post("/api/race", content=body, headers={"Content-Type": "application/json"})
    assert detail in problem(response, 400)["detail"]


def test_a_body_over_the_limit(http: httpx.Client) -> None:
    response = http.post(
        "/api/run",
        content=b'{"operation": "PutItem", "request": "' + b"x" * (2 * 1024 * 1024) + b'"}',
        headers={"Content-Type": "application/json"},
    )
    assert "larger than" in problem(response, 413)["detail"]


# -- running a raw request ---------------------------------------------------------------------


def wire(server: Server, operation: str, body: str) -> httpx.Response:
    """The same request straight to the engine's HTTP endpoint, as an SDK would send it."""
    return httpx.post(
        server.url + "/",
        content=body.encode(),
        headers={
            "X-Amz-Target": f"DynamoDB_20120810.{operation}",
            "Content-Type": "application/x-amz-json-1.0",
        },
    )


@pytest.mark.parametrize(
    ("operation", "body", "code"),
    [
        ("ListTables", "{}", None),
        (
            "GetItem",
            '{"TableName": "no-such-table", "Key": {"pk": {"S": "x"}}}',
            "ResourceNotFoundException",
        ),
        (
            "PutItem",
            '{"TableName": "firstwrite-console-examples", "Item": {"pk": {"S": "a"}',
            "SerializationException",
        ),
        ("PutItem", '{"TableName": "firstwrite-console-examples"}', "ValidationException"),
        ("Frobnicate", "{}", "UnknownOperationException"),
    ],
)
def test_run_answers_exactly_as_the_wire(
    http: httpx.Client, console_server: Server, operation: str, body: str, code: str | None
) -> None:
    response = post_json(http, "/api/run", {"operation": operation, "request": body})
    assert response.status_code == 200, response.text
    answer = response.json()
    direct = wire(console_server, operation, body)
    assert answer["status"] == direct.status_code
    assert answer["body"] == direct.text  # byte for byte
    assert answer["code"] == code
    headers = dict(answer["headers"])
    assert headers["Content-Type"] == "application/x-amz-json-1.0"
    assert int(headers["Content-Length"]) == len(direct.content)
    if code == "SerializationException":
        assert "not valid JSON" in answer["hint"] and "still in the editor" in answer["hint"]


def test_run_a_conditional_put_twice(http: httpx.Client) -> None:
    request = json.dumps(
        {
            "TableName": "firstwrite-console-examples",
            "Item": {"pk": {"S": "twice"}, "n": {"N": "1"}},
            "ConditionExpression": "attribute_not_exists(pk)",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
    )
    first = post_json(http, "/api/run", {"operation": "PutItem", "request": request}).json()
    second = post_json(http, "/api/run", {"operation": "PutItem", "request": request}).json()
    assert first["status"] == 200 and first["body"] == "{}"
    assert second["status"] == 400 and second["code"] == "ConditionalCheckFailedException"
    assert json.loads(second["body"])["Item"] == {"pk": {"S": "twice"}, "n": {"N": "1"}}
    assert "ConditionalCheckFailedException" in second["html"]


def test_run_in_another_region(http: httpx.Client, console_server: Server) -> None:
    create = json.dumps(
        {
            "TableName": "eu-only",
            "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
            "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
            "BillingMode": "PAY_PER_REQUEST",
        }
    )
    answer = post_json(
        http, "/api/run", {"operation": "CreateTable", "request": create, "region": "eu-west-1"}
    ).json()
    assert answer["status"] == 200
    engine = console_server.engine
    assert "eu-only" in engine.execute("ListTables", {}, region="eu-west-1")["TableNames"]
    assert "eu-only" not in engine.execute("ListTables", {})["TableNames"]


@pytest.mark.parametrize(
    ("payload", "detail"),
    [
        ({"request": "{}"}, "operation is required"),
        ({"operation": "Put Item", "request": "{}"}, "operation name"),
        ({"operation": "PutItem", "request": {"TableName": "x"}}, "as text"),
        ({"operation": "PutItem", "request": "{}", "region": "US EAST"}, "region"),
        ({"operation": "PutItem", "request": "{}", "region": 7}, "region"),
    ],
)
def test_run_input_errors(http: httpx.Client, payload: dict[str, Any], detail: str) -> None:
    assert detail in problem(post_json(http, "/api/run", payload), 400)["detail"]


# -- the race --------------------------------------------------------------------------------


def test_race_64_claims(http: httpx.Client, console_server: Server) -> None:
    response = post_json(http, "/api/race", {"n": 64, "key": "race-api-64"})
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["won"] == 1 and result["lost"] == 63 and result["errors"] == 0
    assert result["losers_with_winners_item"] == 63
    assert result["held"] is True
    stored = console_server.engine.execute(
        "GetItem", {"TableName": RACE_TABLE, "Key": {"pk": {"S": "race-api-64"}}}
    )["Item"]
    assert stored["writer"]["S"] == result["winner"]
    # The page shows the latest race without JavaScript.
    page = http.get("/race").text
    assert 'data-outcome="won"' in page and page.count('data-outcome="lost"') == 63


def test_race_on_a_taken_key_has_no_winner(http: httpx.Client) -> None:
    post_json(http, "/api/race", {"n": 2, "key": "taken"})
    result = post_json(http, "/api/race", {"n": 8, "key": "taken"}).json()
    assert result["won"] == 0 and result["lost"] == 8
    assert result["held"] is True  # first-writer-wins: nobody may overwrite the stored winner


@pytest.mark.parametrize(
    ("payload", "detail"),
    [
        ({"n": MAX_N + 1}, f"between 2 and {MAX_N}"),
        ({"n": 10**9}, f"between 2 and {MAX_N}"),
        ({"n": 1}, "between 2"),
        ({"n": "lots"}, "whole number"),
        ({"n": 4.5}, "whole number"),
        ({"n": True}, "whole number"),
        ({}, "whole number"),
        ({"n": 4, "key": 12}, "key must be a string"),
        ({"n": 4, "key": "k" * 2000}, "at most 1024"),
    ],
)
def test_race_input_errors_lose_nothing(
    http: httpx.Client, payload: dict[str, Any], detail: str
) -> None:
    post_json(http, "/api/race", {"n": 3, "key": "kept"})
    assert detail in problem(post_json(http, "/api/race", payload), 400)["detail"]
    # The previous race is still what the page shows.
    assert "kept" in http.get("/race").text


# -- scenarios and seeding -------------------------------------------------------------------


def test_unknown_scenario(http: httpx.Client) -> None:
    body = problem(post_json(http, "/api/scenarios/nope", {}), 404)
    assert "lease-takeover" in body["detail"]  # says which ones exist


def test_reseed_touches_only_the_examples_table(http: httpx.Client, console_server: Server) -> None:
    engine = console_server.engine
    engine.execute(
        "CreateTable",
        {
            "TableName": "mine",
            "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
            "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
            "BillingMode": "PAY_PER_REQUEST",
        },
    )
    engine.execute("PutItem", {"TableName": "mine", "Item": {"pk": {"S": "keep"}}})
    before = engine.execute("Scan", {"TableName": "firstwrite-console-examples"})["Items"]
    response = post_json(http, "/api/examples", {})
    assert response.json() == {"seeded": 7}
    after = engine.execute("Scan", {"TableName": "firstwrite-console-examples"})["Items"]
    assert len(after) == 7
    assert {i["owner"]["S"] for i in after}.isdisjoint({i["owner"]["S"] for i in before})
    assert engine.execute("Scan", {"TableName": "mine"})["Items"] == [{"pk": {"S": "keep"}}]


def test_reseeds_at_once_never_fail(console_server: Server) -> None:
    """Found by the hostile proof (tests/proof/test_hostile_apps.py): two re-seeds at once
    claimed the same example keys and the second failed with the layer's InProgressError, a
    500. One at a time now; one sent meanwhile gets a 409 problem."""
    barrier = threading.Barrier(8)

    def reseed() -> int:
        with httpx.Client(base_url=console_server.console_url, timeout=60) as client:
            barrier.wait()
            response = post_json(client, "/api/examples", {})
        if response.status_code == 409:
            assert response.headers["content-type"] == "application/problem+json"
        return response.status_code

    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(lambda _: reseed(), range(8)))
    assert set(statuses) <= {200, 409} and 200 in statuses, statuses
    examples = console_server.engine.execute("Scan", {"TableName": "firstwrite-console-examples"})
    assert len(examples["Items"]) == 7


def test_clock(http: httpx.Client, console_server: Server) -> None:
    console_server.engine.clock.freeze(1_800_000_000.5)
    assert http.get("/api/clock").json() == {
        "now": 1_800_000_000_500,
        "frozen": True,
        "offset": 0.0,
    }


def test_every_example_runs_on_a_fresh_database(http: httpx.Client, console_server: Server) -> None:
    from firstwrite.console.examples import examples

    bodies = examples(console_server.engine, "us-east-1")
    order = [
        "PutItem",
        "GetItem",
        "UpdateItem",
        "Query",
        "Scan",
        "BatchWriteItem",
        "BatchGetItem",
        "TransactWriteItems",
        "TransactGetItems",
        "DeleteItem",
        "ListTables",
        "DescribeTable",
        "CreateTable",
        "UpdateTable",
        "UpdateTimeToLive",
        "DeleteTable",
        "DescribeTimeToLive",
        "DescribeLimits",
        "DescribeEndpoints",
        "TagResource",
        "ListTagsOfResource",
        "UntagResource",
        "ListStreams",
        "DescribeStream",
        "GetShardIterator",
        "ExecuteStatement",
        "BatchExecuteStatement",
        "ExecuteTransaction",
        "CreateBackup",
        "ListBackups",
        "UpdateContinuousBackups",
        "DescribeContinuousBackups",
        "PutResourcePolicy",
        "GetResourcePolicy",
        "DeleteResourcePolicy",
        "UpdateContributorInsights",
        "DescribeContributorInsights",
        "ListContributorInsights",
        "ExportTableToPointInTime",  # accepted, as DynamoDB does; both then fail (no S3 here)
        "ImportTable",
        "ListExports",
        "ListImports",
    ]
    # These need what another call returned (an iterator, a backup, export or import ARN) or a
    # window that has not opened yet (point-in-time recovery keeps the last 5 minutes out of
    # reach).
    placeholders = [
        "GetRecords",
        "DescribeBackup",
        "DeleteBackup",
        "RestoreTableFromBackup",
        "RestoreTableToPointInTime",
        "DescribeExport",
        "DescribeImport",
    ]
    assert set(order) | set(placeholders) == set(bodies)
    for operation in order:
        answer = post_json(
            http, "/api/run", {"operation": operation, "request": bodies[operation]}
        ).json()
        assert answer["status"] == 200, (operation, answer["body"])
    # Run again, the conditional ones answer with their failed condition, as the text says
    # (DeleteItem removed my-item, so PutItem's second run is the one that fails).
    post_json(http, "/api/run", {"operation": "PutItem", "request": bodies["PutItem"]})
    again = post_json(
        http, "/api/run", {"operation": "PutItem", "request": bodies["PutItem"]}
    ).json()
    assert again["code"] == "ConditionalCheckFailedException"
    again = post_json(
        http,
        "/api/run",
        {"operation": "TransactWriteItems", "request": bodies["TransactWriteItems"]},
    ).json()
    assert again["code"] == "TransactionCanceledException"
    # Their placeholders are DynamoDB's 400s.
    for operation in placeholders:
        placeholder = post_json(
            http, "/api/run", {"operation": operation, "request": bodies[operation]}
        ).json()
        assert placeholder["status"] == 400, (operation, placeholder["body"])


def test_the_console_refuses_on_its_own(
    served: Callable[..., Server], console_engine: Engine
) -> None:
    """Served alone (no engine server in front), the console's own checks still hold."""
    server = served(console_engine, alone=True)
    with httpx.Client(base_url=server.url) as http:
        response = http.post(
            "/api/race", content=b'{"n": 4}', headers={"Content-Type": "text/plain"}
        )
        assert "JSON" in problem(response, 415)["detail"]
        response = http.post("/api/race", json={"n": 4}, headers={"Origin": "http://evil.example"})
        assert "evil.example" in problem(response, 403)["detail"]
        response = http.post("/api/race", json={"n": 4}, headers={"Sec-Fetch-Site": "cross-site"})
        assert "cross-site" in problem(response, 403)["detail"]
        response = http.post(
            "/api/race",
            content=b'{"key": "' + b"k" * (2 * 1024 * 1024) + b'"}',
            headers={"Content-Type": "application/json"},
        )
        assert "larger than" in problem(response, 413)["detail"]

        def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it is read
            yield b'{"key": "'
            for _ in range(40):
                yield b"k" * 65536
            yield b'"}'

        response = http.post(
            "/api/race", content=chunks(), headers={"Content-Type": "application/json"}
        )
        assert "larger than" in problem(response, 413)["detail"]
    assert RACE_TABLE not in console_engine.execute("ListTables", {})["TableNames"]
