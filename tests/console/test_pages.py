"""The console's pages over real HTTP, without a browser: what they show, and how they fail."""

from __future__ import annotations

import html
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from firstwrite.console import create_console
from firstwrite.console.seed import EXAMPLES, EXAMPLES_TABLE
from firstwrite.engine import Engine
from firstwrite.idempotency import MemoryMetrics, Record, Status

from .conftest import LONG_KEY, Server, post_json, store_http_replies

PAGES = {
    "/": "The firstwrite console",
    "/tables": "Tables in us-east-1",
    f"/tables/{EXAMPLES_TABLE}": EXAMPLES_TABLE,
    "/run": "Run an operation",
    "/race": "Race N claims",
    "/scenarios": "Scenarios",
    "/scenarios/lease-takeover": "Lease expiry and takeover",
    "/scenarios/ttl-race": "The TTL race",
    "/scenarios/throttling": "Throttling under burst",
    "/scenarios/transaction-cancelled": "A transaction cancelled",
    "/scenarios/stale-replica": "A stale replica",
    "/scenarios/replay": "Replay",
    "/scenarios/hot-partition": "A hot partition",
    "/scenarios/redelivered-batch": "A redelivered batch",
    "/scenarios/worker-killed-after-charge": "A worker killed after the charge",
    "/scenarios/regions-both-claimed": "Two regions both said yes",
    "/metrics": "Metrics",
    "/login": "Sign in to the engine",
}


@pytest.mark.parametrize(("path", "heading"), PAGES.items())
def test_every_page(http: httpx.Client, path: str, heading: str) -> None:
    response = http.get(path)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert heading in response.text
    # Links and assets point under the mount point.
    assert 'href="/console/static/console.css"' in response.text
    assert 'href="/console/static/diagram.css"' in response.text  # the diagrams' schemes


def test_the_overview_promises_the_pictures(http: httpx.Client) -> None:
    """The race's and the scenarios' cards say what their picture shows."""
    page = http.get("/").text
    cards = dict(
        re.findall(
            r'<li><h3><a href="/console/(race|scenarios)">.*?<p class="promise">(.*?)</p></li>',
            page,
            re.S,
        )
    )
    assert "timeline" in cards["race"] and "winner" in cards["race"]
    assert "sequence diagram" in cards["scenarios"]


def test_seeded_records_in_every_state(console_server: Server) -> None:
    items = console_server.engine.execute("Scan", {"TableName": EXAMPLES_TABLE})["Items"]
    records = [Record.from_item(item) for item in items]
    states = Counter(
        (r.status, r.retryable if r.status is Status.FAILED else None) for r in records
    )
    assert states == {
        (Status.PENDING, None): 2,
        (Status.COMPLETED, None): 3,
        (Status.FAILED, True): 1,
        (Status.FAILED, False): 1,
    }
    assert len(records) == len(EXAMPLES)
    assert any(isinstance(r.result, bytes) for r in records)  # the compressed one
    # Only the examples table was created.
    assert console_server.engine.execute("ListTables", {})["TableNames"] == [EXAMPLES_TABLE]


def test_seeding_happens_only_on_a_fresh_database(tmp_path: Path) -> None:
    with Engine(tmp_path / "db") as engine:
        create_console(engine)
        first = engine.execute("Scan", {"TableName": EXAMPLES_TABLE})["Items"]
        engine.execute("DeleteItem", {"TableName": EXAMPLES_TABLE, "Key": {"pk": first[0]["pk"]}})
        create_console(engine)  # a restart on the same database: not fresh
        again = engine.execute("Scan", {"TableName": EXAMPLES_TABLE})["Items"]
        assert len(again) == len(first) - 1
        create_console(engine, seed=False)
    with Engine(tmp_path / "other") as engine:
        create_console(engine, seed=False)
        assert engine.execute("ListTables", {})["TableNames"] == []


def test_the_examples_table_page_decodes_records(http: httpx.Client) -> None:
    page = http.get(f"/tables/{EXAMPLES_TABLE}").text
    for state in ("PENDING", "COMPLETED", "FAILED (retryable)", "FAILED (final)"):
        assert f'data-state="{state}"' in page
    assert "CardDeclined: insufficient funds" in page
    assert "ch_3MtwBw" in page
    assert "compressed" in page  # the binary result, decoded
    assert "ENABLED on <code>expires_at</code>" in page  # TTL
    assert "NEW_AND_OLD_IMAGES" in page  # the stream
    assert re.search(r'class="countdown"[^>]*data-at="\d+"', page)


def test_a_stored_http_reply_is_decoded_in_the_table_view(
    http: httpx.Client, console_engine: Engine
) -> None:
    table = store_http_replies(console_engine)
    page = html.unescape(http.get(f"/tables/{table}").text)
    assert page.count("HTTP 201 Created, application/json, 53 B body: {") == 2
    assert "bytes: 7b22" not in page and "7b2276" not in page  # no hex of the stored reply
    assert "content-type: application/json\nlocation: /charges/1\nbody: 53 B\n{" in page
    assert LONG_KEY in page


def make_table(engine: Engine, name: str, count: int) -> None:
    engine.execute(
        "CreateTable",
        {
            "TableName": name,
            "KeySchema": [
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            "AttributeDefinitions": [
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "N"},
            ],
            "BillingMode": "PAY_PER_REQUEST",
        },
    )
    for i in range(count):
        engine.execute(
            "PutItem",
            {"TableName": name, "Item": {"pk": {"S": f"p{i % 7}"}, "sk": {"N": str(i)}}},
        )


def test_paging_visits_every_item_once(http: httpx.Client, console_server: Server) -> None:
    make_table(console_server.engine, "paged", 60)
    seen: list[str] = []
    path: str | None = "/tables/paged"
    pages = 0
    while path is not None:
        page = http.get(path).text
        pages += 1
        seen += re.findall(r'<code class="key" title="[^"]*">(p\d \| \d+)</code>', page)
        following = re.search(r'rel="next" href="/console([^"]+)"', page)
        path = following.group(1).replace("&amp;", "&") if following else None
    assert pages == 3
    assert sorted(seen) == sorted(f"p{i % 7} | {i}" for i in range(60))
    assert "(partition key, S)" in http.get("/tables/paged").text
    assert "(sort key, N)" in http.get("/tables/paged").text


@pytest.mark.parametrize(
    ("path", "status", "message"),
    [
        (
            "/tables/no-such-table",
            404,
            "There is no table named &#39;no-such-table&#39; in us-east-1",
        ),
        ("/tables/x", 404, "There is no table named"),
        ("/tables/paged?after=!!!", 400, "page token is not valid"),
        ("/tables/paged?after=eyJwayI6IDF9", 400, "page token"),
        ("/tables?region=NOT%20A%20REGION", 400, "is not a region name"),
        ("/tables/paged?region=eu-west-1", 404, "in eu-west-1"),
        ("/scenarios/nope", 404, "There is no scenario"),
        ("/nothing-here", 404, "Not Found"),
    ],
)
def test_bad_page_requests(
    http: httpx.Client, console_server: Server, path: str, status: int, message: str
) -> None:
    make_table(console_server.engine, "paged", 3)
    response = http.get(path)
    assert response.status_code == status
    assert response.headers["content-type"].startswith("text/html")
    assert message in response.text


def test_the_login_page_never_redirects_off_site(http: httpx.Client) -> None:
    for target, expected in [
        ("/console/race", "/console/race"),
        ("https://evil.example/", "/console/"),
        ("//evil.example/", "/console/"),
        ("/console/\\evil.example", "/console/"),
        ("/elsewhere", "/console/"),
    ]:
        page = http.get("/login", params={"next": target}).text
        assert f'data-next="{expected}"' in page


def test_tables_in_other_regions(http: httpx.Client, console_server: Server) -> None:
    engine = console_server.engine
    engine.execute(
        "CreateTable",
        {
            "TableName": "global",
            "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
            "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
            "BillingMode": "PAY_PER_REQUEST",
        },
    )
    engine.replication.create_replica("global", "us-east-1", "ap-south-1")
    assert '<option value="ap-south-1">' in http.get("/tables").text
    page = http.get("/tables", params={"region": "ap-south-1"}).text
    assert "Tables in ap-south-1" in page and "global" in page


def test_metrics_page_uses_the_layers_names(
    served: Callable[..., Server], console_engine: Engine
) -> None:
    metrics = MemoryMetrics()
    metrics.count("firstwrite_claims_total", outcome="takeover")
    metrics.observe("firstwrite_operation_seconds", 0.002, operation="PutItem")
    server = served(console_engine, create_console(console_engine, metrics=metrics, seed=False))
    with httpx.Client(base_url=server.console_url) as http:
        page = http.get("/metrics").text
        for name in (
            "firstwrite_claims_total",
            "firstwrite_dynamodb_retries_total",
            "firstwrite_dynamodb_throttles_total",
            "transact_write_cancellations_total",
            "dynamo_ttl_delete_before_retry_total",
        ):
            assert f'data-metric="{name}"' in page
        assert '{outcome="takeover"}' in html.unescape(page)
        assert "1 observation: 2.00 ms" in page
        # The console's own guards count into the metrics it was given.
        post_json(http, "/api/scenarios/replay", {})
    assert metrics.total("firstwrite_claims_total", outcome="replayed_completed") == 1


def test_an_example_for_every_operation_the_engine_serves(console_engine: Engine) -> None:
    import json

    from firstwrite.console.examples import examples
    from firstwrite.engine import operations

    getattr(operations, "load_all", lambda: None)()  # gone once the table is static
    bodies = examples(console_engine, "us-east-1")
    assert set(bodies) == set(operations.DYNAMODB) | set(operations.STREAMS)
    assert all(isinstance(json.loads(body), dict) for body in bodies.values())


def test_served_alone_at_the_root(served: Callable[..., Server], console_engine: Engine) -> None:
    server = served(console_engine, alone=True)
    with httpx.Client(base_url=server.url) as http:
        page = http.get("/race").text
        assert 'href="/static/console.css"' in page and 'href="/tables"' in page
        assert http.get("/static/console.js").status_code == 200
        assert post_json(http, "/api/race", {"n": 3}).json()["won"] == 1
