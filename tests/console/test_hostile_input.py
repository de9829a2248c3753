"""Whatever is sent to the console, the answer is a page or a 4xx saying why: never a 5xx."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from typing import Any
from urllib.parse import quote

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from firstwrite.console.diagrams import svg
from firstwrite.console.race import MAX_N, MIN_N, RACE_TABLE
from hypothesis_budget import examples

from .conftest import Server, post_json

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
# Anything but a valid N (a valid one would start a real race of up to 128 threads).
BAD_N = JSON.filter(
    lambda n: not (isinstance(n, int) and not isinstance(n, bool) and MIN_N <= n <= MAX_N)
)
HOSTILE = settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


def no_5xx(response: httpx.Response) -> None:
    assert response.status_code < 500, (response.status_code, response.text[:500])


@HOSTILE
@given(operation=st.text(max_size=30), request=st.text(max_size=200), region=JSON)
def test_run(http: httpx.Client, operation: str, request: str, region: Any) -> None:
    response = post_json(
        http, "/api/run", {"operation": operation, "request": request, "region": region}
    )
    no_5xx(response)
    if response.status_code == 200:  # the engine's own answer, whatever it is
        assert response.json()["status"] in (200, 400)


@HOSTILE
@given(
    operation=st.sampled_from(["PutItem", "GetItem", "Query", "TransactWriteItems", "CreateTable"]),
    request=JSON,
)
def test_run_json_shapes(http: httpx.Client, operation: str, request: Any) -> None:
    response = post_json(http, "/api/run", {"operation": operation, "request": json.dumps(request)})
    no_5xx(response)
    assert response.json()["status"] == 400 or response.json()["status"] == 200


@HOSTILE
@given(body=JSON, raw=st.binary(max_size=64))
def test_race_and_scenarios(http: httpx.Client, body: Any, raw: bytes) -> None:
    if isinstance(body, dict) and "n" in body:
        body["n"] = 0  # never a real race
    no_5xx(post_json(http, "/api/race", body))
    no_5xx(http.post("/api/race", content=raw, headers={"Content-Type": "application/json"}))
    no_5xx(post_json(http, "/api/examples", body if body != {} else [1]))
    no_5xx(post_json(http, "/api/scenarios/" + quote("x" + str(body)[:20], safe=""), {}))


@HOSTILE
@given(n=BAD_N, key=JSON)
def test_race_inputs(http: httpx.Client, n: Any, key: Any) -> None:
    response = post_json(http, "/api/race", {"n": n, "key": key})
    assert response.status_code == 400, response.text


@HOSTILE
@given(
    name=st.text(min_size=1, max_size=40), after=st.text(max_size=40), region=st.text(max_size=40)
)
def test_pages(
    http: httpx.Client, console_server: Server, name: str, after: str, region: str
) -> None:
    response = http.get(
        "/tables/" + quote(name, safe=""), params={"after": after, "region": region}
    )
    no_5xx(response)
    no_5xx(http.get("/tables", params={"region": region}))
    no_5xx(http.get("/run", params={"operation": name}))
    no_5xx(http.get("/login", params={"next": name}))


def test_non_finite_numbers(http: httpx.Client) -> None:
    for raw in (
        b'{"n": Infinity}',
        b'{"n": NaN}',
        b'{"n": 1e999}',
        b'{"n": -0}',
        b'{"n": 1' + b"0" * 400 + b"}",
    ):
        response = http.post("/api/race", content=raw, headers={"Content-Type": "application/json"})
        assert response.status_code == 400, (raw, response.text)
        assert "n must be" in response.json()["detail"]


def _diagram(html: str) -> ET.Element:
    """The page's one diagram, parsed as XML: it must be well-formed, script-free SVG."""
    found = re.findall(r"<svg\b.*?</svg>", html, re.S)
    assert len(found) == 1, html[:500]
    root = ET.fromstring(found[0])
    names = {node.tag.rpartition("}")[2] for node in root.iter()}
    assert not names & {"script", "foreignObject", "a", "image", "use"}, names
    assert not any(a.lower().startswith("on") for node in root.iter() for a in node.attrib)
    return root


@settings(
    max_examples=examples(12),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(key=st.text(min_size=1, max_size=60), writer=st.text(max_size=60))
def test_race_diagrams_draw_any_key_and_stored_item(
    http: httpx.Client, console_server: Server, key: str, writer: str
) -> None:
    """The timeline draws the key (user input) and the item stored before the race (anything
    a client wrote) as text, whatever they hold."""
    first = post_json(http, "/api/race", {"n": 2, "key": key})
    assert first.status_code == 200, first.text
    _diagram(first.json()["html"])
    console_server.engine.execute(
        "PutItem", {"TableName": RACE_TABLE, "Item": {"pk": {"S": key}, "writer": {"S": writer}}}
    )
    again = post_json(http, "/api/race", {"n": 2, "key": key})
    assert again.status_code == 200, again.text
    root = _diagram(again.json()["html"])
    page = http.get("/race")
    assert page.status_code == 200
    _diagram(page.text)
    # Drawn as text, cleaned of what XML cannot hold (a parser reads a CR as a line feed).
    words = " ".join(node.text or "" for node in root.iter())
    assert svg.clean(f"{writer}'s item", 60).replace("\r", "\n") in words
