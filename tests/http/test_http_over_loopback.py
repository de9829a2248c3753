"""The middleware through real apps on real servers over loopback HTTP: Starlette (async guard)
and FastAPI (sync guard, run in worker threads) in uvicorn, Flask in werkzeug's threaded server.

Each scenario runs against all three; each request carries a fresh ``id`` so the recorder can
say how often its handler really ran.
"""

from __future__ import annotations

import concurrent.futures
import json
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from http_apps import (
    REQUEST_LIMIT,
    STORED_LIMIT,
    Recorder,
    fastapi_app,
    flask_app,
    scenario_config,
    starlette_app,
)
from http_support import guards, serve_asgi, serve_wsgi

from firstwrite.http import Problem

PROBLEM_JSON = "application/problem+json"


@dataclass
class Served:
    name: str
    url: str
    recorder: Recorder

    def client(self, who: str | None = "alice") -> httpx.Client:
        headers = {} if who is None else {"x-client": who}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)


@pytest.fixture(scope="module", params=["starlette", "fastapi", "flask"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    from firstwrite.engine import Engine, local_client

    with Engine(tmp_path_factory.mktemp("http") / "served.db") as engine:
        sync_guard, async_guard = guards(local_client(engine), "http-scenarios")
        recorder = Recorder()
        config = scenario_config()
        name = request.param
        if name == "starlette":
            server = serve_asgi(starlette_app(recorder, async_guard, config))
        elif name == "fastapi":
            server = serve_asgi(fastapi_app(recorder, sync_guard, config))
        else:
            server = serve_wsgi(flask_app(recorder, sync_guard, config))
        with server as url:
            yield Served(name, url, recorder)
        for gate in list(recorder.gates.values()):
            gate.set()


def new_id() -> str:
    return uuid.uuid4().hex


def key_headers(key: str, **more: str) -> dict[str, str]:
    return {"Idempotency-Key": key, **more}


def problem(response: httpx.Response, expected: Problem) -> dict[str, Any]:
    """The problem+json document of ``response``, checked against ``expected``."""
    assert response.status_code == expected.status, response.text
    assert response.headers["content-type"] == PROBLEM_JSON
    document = json.loads(response.content)
    assert document["type"] == expected.type_uri
    assert document["status"] == expected.status
    assert document["title"] == expected.title
    assert document["detail"]
    assert int(response.headers["content-length"]) == len(response.content)
    return document


# -- replay --------------------------------------------------------------------------------------


def test_a_retry_gets_the_first_response_byte_for_byte(served: Served) -> None:
    rid, key = new_id(), new_id()
    with served.client() as client:
        first = client.post(f"/orders?id={rid}", json={"amount": 10}, headers=key_headers(key))
        again = client.post(f"/orders?id={rid}", json={"amount": 10}, headers=key_headers(key))
    assert first.status_code == 201
    assert "idempotent-replayed" not in first.headers
    assert again.status_code == 201
    assert again.reason_phrase == first.reason_phrase  # Flask's "CREATED" is kept
    assert again.content == first.content  # byte for byte
    assert again.headers["idempotent-replayed"] == "true"
    assert again.headers["location"] == first.headers["location"]
    assert again.headers["content-type"] == first.headers["content-type"]
    assert again.headers["x-trace"] == first.headers["x-trace"]  # allow-listed: the first's value
    assert "set-cookie" in first.headers and "set-cookie" not in again.headers
    assert "x-secret" in first.headers and "x-secret" not in again.headers
    assert served.recorder.runs[rid] == 1


def test_quoted_and_bare_keys_are_the_same_key(served: Served) -> None:
    rid, key = new_id(), new_id()
    with served.client() as client:
        quoted = client.post(f"/orders?id={rid}", json={}, headers=key_headers(f'"{key}"'))
        bare = client.post(f"/orders?id={rid}", json={}, headers=key_headers(key))
        with_parameter = client.post(
            f"/orders?id={rid}", json={}, headers=key_headers(f'"{key}";v=1')
        )
    assert quoted.status_code == 201 and "idempotent-replayed" not in quoted.headers
    assert bare.headers["idempotent-replayed"] == "true" and bare.content == quoted.content
    assert with_parameter.headers["idempotent-replayed"] == "true"
    assert served.recorder.runs[rid] == 1


def test_an_escaped_quote_in_a_key_is_unescaped(served: Served) -> None:
    rid, key = new_id(), new_id()
    with served.client() as client:
        escaped = client.post(f"/orders?id={rid}", json={}, headers=key_headers(f'"{key}\\"x"'))
        # the bare form of the same key cannot carry a quote, so replay through the quoted form
        again = client.post(f"/orders?id={rid}", json={}, headers=key_headers(f'"{key}\\"x"'))
        other = client.post(f"/orders?id={rid}", json={}, headers=key_headers(f"{key}x"))
    assert escaped.status_code == 201 and again.headers["idempotent-replayed"] == "true"
    assert "idempotent-replayed" not in other.headers  # a different key: ran again
    assert served.recorder.runs[rid] == 2


def test_the_header_name_is_case_insensitive(served: Served) -> None:
    rid, key = new_id(), new_id()
    with served.client() as client:
        client.post(f"/orders?id={rid}", json={}, headers={"IDEMPOTENCY-KEY": key})
        again = client.post(f"/orders?id={rid}", json={}, headers={"idempotency-key": key})
    assert again.headers["idempotent-replayed"] == "true"
    assert served.recorder.runs[rid] == 1


# -- 422, 400, 401, 413 ----------------------------------------------------------------------------


def test_a_key_reused_with_another_body_or_query_is_422(served: Served) -> None:
    rid, key = new_id(), new_id()
    with served.client() as client:
        first = client.post(f"/orders?id={rid}", json={"amount": 10}, headers=key_headers(key))
        other_body = client.post(f"/orders?id={rid}", json={"amount": 11}, headers=key_headers(key))
        other_query = client.post(
            f"/orders?id={rid}&x=1", json={"amount": 10}, headers=key_headers(key)
        )
    assert first.status_code == 201
    problem(other_body, Problem.KEY_REUSED)
    problem(other_query, Problem.KEY_REUSED)
    assert served.recorder.runs[rid] == 1


def test_a_route_that_requires_the_key_answers_400_without_it(served: Served) -> None:
    rid = new_id()
    with served.client() as client:
        missing = client.post(f"/required?id={rid}", json={})
        present = client.post(f"/required?id={rid}", json={}, headers=key_headers(new_id()))
    document = problem(missing, Problem.KEY_MISSING)
    assert "Idempotency-Key" in document["detail"]
    assert present.status_code == 201
    assert served.recorder.runs[rid] == 1  # the refused request never reached the handler


def test_without_the_key_an_optional_route_runs_unguarded(served: Served) -> None:
    rid = new_id()
    with served.client() as client:
        one = client.post(f"/orders?id={rid}", json={})
        two = client.post(f"/orders?id={rid}", json={})
    assert one.status_code == two.status_code == 201
    assert "idempotent-replayed" not in two.headers
    assert served.recorder.runs[rid] == 2


@pytest.mark.parametrize(
    "value",
    [
        "two words",
        '"unterminated',
        '"bad \\x escape"',
        "k1, k2",
        '"caf\\u00e9"x',
        "back\\slash",
        "x" * 256,
        '"' + "x" * 256 + '"',
    ],
)
def test_a_malformed_key_is_400(served: Served, value: str) -> None:
    rid = new_id()
    with served.client() as client:
        response = client.post(f"/orders?id={rid}", json={}, headers=key_headers(value))
    problem(response, Problem.KEY_INVALID)
    assert served.recorder.runs[rid] == 0


def test_an_empty_key_is_400(served: Served) -> None:
    with served.client() as client:
        bare = client.post(f"/orders?id={new_id()}", json={}, headers=key_headers(""))
        quoted = client.post(f"/orders?id={new_id()}", json={}, headers=key_headers('""'))
    problem(bare, Problem.KEY_INVALID)
    problem(quoted, Problem.KEY_INVALID)


def test_two_key_headers_are_400(served: Served) -> None:
    rid = new_id()
    with served.client() as client:
        response = client.post(
            f"/orders?id={rid}",
            json={},
            headers=[("Idempotency-Key", "a1"), ("Idempotency-Key", "b2")],
        )
    problem(response, Problem.KEY_INVALID)
    assert served.recorder.runs[rid] == 0


def test_a_key_at_the_length_limit_is_accepted(served: Served) -> None:
    rid = new_id()
    key = new_id() + "k" * (255 - 32)
    with served.client() as client:
        first = client.post(f"/orders?id={rid}", json={}, headers=key_headers(key))
        again = client.post(f"/orders?id={rid}", json={}, headers=key_headers(f'"{key}"'))
    assert first.status_code == 201 and again.headers["idempotent-replayed"] == "true"


def test_an_unidentified_caller_is_401(served: Served) -> None:
    rid = new_id()
    with served.client(who=None) as client:
        response = client.post(f"/orders?id={rid}", json={}, headers=key_headers(new_id()))
    problem(response, Problem.PRINCIPAL_REQUIRED)
    assert served.recorder.runs[rid] == 0


def test_a_request_body_over_the_limit_is_413(served: Served) -> None:
    rid = new_id()
    body = b"x" * (REQUEST_LIMIT + 1)
    with served.client() as client:
        declared = client.post(f"/orders?id={rid}", content=body, headers=key_headers(new_id()))

        def chunked() -> Iterator[bytes]:  # no Content-Length: the limit counts what arrives
            for i in range(0, len(body), 1000):
                yield body[i : i + 1000]

        streamed = client.post(
            f"/orders?id={rid}", content=chunked(), headers=key_headers(new_id())
        )
        at_limit = client.post(
            f"/orders?id={rid}",
            content=b'"' + b"x" * (REQUEST_LIMIT - 2) + b'"',
            headers=key_headers(new_id()),
        )
    assert problem(declared, Problem.REQUEST_TOO_LARGE)["limit"] == REQUEST_LIMIT
    problem(streamed, Problem.REQUEST_TOO_LARGE)
    assert at_limit.status_code == 201
    assert served.recorder.runs[rid] == 1


# -- principal scoping --------------------------------------------------------------------------


def test_one_client_cannot_replay_another_clients_key(served: Served) -> None:
    rid_a, rid_b, key = new_id(), new_id(), new_id()
    with served.client("alice") as alice, served.client("bob") as bob:
        a1 = alice.post(f"/orders?id={rid_a}", json={"to": "alice"}, headers=key_headers(key))
        b1 = bob.post(f"/orders?id={rid_b}", json={"to": "alice"}, headers=key_headers(key))
        b2 = bob.post(f"/orders?id={rid_b}", json={"to": "alice"}, headers=key_headers(key))
        a2 = alice.post(f"/orders?id={rid_a}", json={"to": "alice"}, headers=key_headers(key))
    assert "idempotent-replayed" not in b1.headers  # bob's request ran: not alice's response
    assert b1.content != a1.content
    assert b2.content == b1.content and b2.headers["idempotent-replayed"] == "true"
    assert a2.content == a1.content and a2.headers["idempotent-replayed"] == "true"
    assert served.recorder.runs[rid_a] == served.recorder.runs[rid_b] == 1


def test_the_same_key_on_another_path_is_another_record(served: Served) -> None:
    rid, key = new_id(), new_id()
    with served.client() as client:
        order = client.post(f"/orders?id={rid}", json={}, headers=key_headers(key))
        other = client.post(f"/required?id={rid}", json={}, headers=key_headers(key))
    assert order.status_code == other.status_code == 201
    assert "idempotent-replayed" not in other.headers
    assert served.recorder.runs[rid] == 2


# -- in progress, concurrency -------------------------------------------------------------------


def test_a_retry_while_the_first_runs_is_409_with_retry_after(served: Served) -> None:
    rid, key, gate = new_id(), new_id(), new_id()
    url = f"/slow?id={rid}&gate={gate}"
    with served.client() as client, concurrent.futures.ThreadPoolExecutor(1) as pool:
        first = pool.submit(client.post, url, json={}, headers=key_headers(key))
        assert served.recorder.arrived(gate).wait(30)
        busy = client.post(url, json={}, headers=key_headers(key))
        served.recorder.gate(gate).set()
        done = first.result(30)
        after = client.post(url, json={}, headers=key_headers(key))
    document = problem(busy, Problem.IN_PROGRESS)
    # Not the whole 60 s lease: about as long as the handler usually takes (at least 1 s).
    assert busy.headers["retry-after"].isdigit()
    assert 1 <= int(busy.headers["retry-after"]) < 60
    assert document["retry_after"] == int(busy.headers["retry-after"])
    assert done.status_code == 201
    assert after.content == done.content and after.headers["idempotent-replayed"] == "true"
    assert served.recorder.runs[rid] == 1


def _race(served: Served, path: str, n: int) -> list[httpx.Response]:
    """``n`` concurrent clients send the same request with the same key at once."""
    key = new_id()
    barrier = threading.Barrier(n)

    def send(_: int) -> httpx.Response:
        with served.client() as client:
            barrier.wait(30)
            return client.post(path, json={"same": True}, headers=key_headers(key))

    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        return list(pool.map(send, range(n)))


def test_concurrent_duplicates_run_the_handler_once(served: Served) -> None:
    rid, gate = new_id(), new_id()
    served.recorder.gate(gate).set()  # open: the race is on the claim itself
    responses = _race(served, f"/slow?id={rid}&gate={gate}", 8)
    assert served.recorder.runs[rid] == 1
    statuses = sorted(r.status_code for r in responses)
    winners = [r for r in responses if r.status_code == 201]
    assert winners and set(statuses) <= {201, 409}
    assert len({r.content for r in winners}) == 1  # every 201 is the one response (or its replay)
    assert sum("idempotent-replayed" not in r.headers for r in winners) == 1
    for busy in (r for r in responses if r.status_code == 409):
        problem(busy, Problem.IN_PROGRESS)


def test_with_a_bounded_wait_concurrent_duplicates_all_get_the_response(served: Served) -> None:
    rid, gate = new_id(), new_id()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        racing = pool.submit(_race, served, f"/waiting?id={rid}&gate={gate}", 6)
        assert served.recorder.arrived(gate).wait(30)
        served.recorder.gate(gate).set()
        responses = racing.result(60)
    assert served.recorder.runs[rid] == 1
    assert [r.status_code for r in responses] == [201] * 6
    assert len({r.content for r in responses}) == 1
    assert sum(r.headers.get("idempotent-replayed") == "true" for r in responses) == 5


# -- what is stored -------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [400, 402, 404, 409, 422, 200, 202, 204])
def test_2xx_and_4xx_are_stored_and_replayed(served: Served, status: int) -> None:
    rid, key = new_id(), new_id()
    with served.client() as client:
        first = client.post(
            f"/status?id={rid}&codes={status},201", json={}, headers=key_headers(key)
        )
        again = client.post(
            f"/status?id={rid}&codes={status},201", json={}, headers=key_headers(key)
        )
    assert first.status_code == again.status_code == status
    assert again.content == first.content and again.headers["idempotent-replayed"] == "true"
    assert served.recorder.runs[rid] == 1


@pytest.mark.parametrize("status", [500, 502, 503, 401, 403, 429, 301, 307])
def test_5xx_3xx_401_403_429_release_the_key(served: Served, status: int) -> None:
    rid, key = new_id(), new_id()
    with served.client() as client:
        first = client.post(
            f"/status?id={rid}&codes={status},201",
            json={},
            headers=key_headers(key),
            follow_redirects=False,
        )
        retry = client.post(
            f"/status?id={rid}&codes={status},201", json={}, headers=key_headers(key)
        )
        replay = client.post(
            f"/status?id={rid}&codes={status},201", json={}, headers=key_headers(key)
        )
    assert first.status_code == status
    assert retry.status_code == 201 and "idempotent-replayed" not in retry.headers  # ran again
    assert replay.headers["idempotent-replayed"] == "true" and replay.content == retry.content
    assert served.recorder.runs[rid] == 2


def test_an_exception_in_the_handler_releases_the_key(served: Served) -> None:
    rid, key = new_id(), new_id()
    # One connection each: uvicorn closes a connection whose app raised.
    with served.client() as client:
        failed = client.post(f"/boom?id={rid}&times=1", json={}, headers=key_headers(key))
    with served.client() as client:
        retry = client.post(f"/boom?id={rid}&times=1", json={}, headers=key_headers(key))
    assert failed.status_code == 500
    assert retry.status_code == 201
    assert served.recorder.runs[rid] == 2


def test_a_response_over_the_limit_passes_through_unstored_and_is_not_run_again(
    served: Served,
) -> None:
    rid, key = new_id(), new_id()
    size = STORED_LIMIT + 1
    with served.client() as client:
        first = client.post(f"/big?id={rid}&size={size}", json={}, headers=key_headers(key))
        again = client.post(f"/big?id={rid}&size={size}", json={}, headers=key_headers(key))
        fits = client.post(
            f"/big?id={rid}&size={STORED_LIMIT}", json={}, headers=key_headers(new_id())
        )
    assert first.status_code == 200 and first.content == b"x" * size
    assert first.headers["idempotency-replay-unavailable"] == "size-exceeded"
    document = problem(again, Problem.RESPONSE_NOT_STORED)
    assert document["original_status"] == 200
    assert "retry-after" not in again.headers  # final: waiting will not change it
    assert "idempotency-replay-unavailable" not in fits.headers
    assert served.recorder.runs[rid] == 2  # the first (once) and the one that fits


def test_a_short_streamed_response_is_stored_whole(served: Served) -> None:
    rid, key = new_id(), new_id()
    with served.client() as client:
        first = client.post(f"/stream?id={rid}&chunks=5", json={}, headers=key_headers(key))
        again = client.post(f"/stream?id={rid}&chunks=5", json={}, headers=key_headers(key))
    assert first.content == b"".join(f"chunk-{i:05d}\n".encode() for i in range(5))
    assert again.content == first.content and again.headers["idempotent-replayed"] == "true"
    assert served.recorder.runs[rid] == 1


def test_a_long_stream_passes_through_and_says_so(served: Served) -> None:
    rid, key = new_id(), new_id()
    chunks = STORED_LIMIT // 10  # 13 bytes each: over the limit
    with served.client() as client:
        first = client.post(f"/stream?id={rid}&chunks={chunks}", json={}, headers=key_headers(key))
        again = client.post(f"/stream?id={rid}&chunks={chunks}", json={}, headers=key_headers(key))
    assert first.content == b"".join(f"chunk-{i:05d}\n".encode() for i in range(chunks))
    assert first.headers["idempotency-replay-unavailable"] == "size-exceeded"
    problem(again, Problem.RESPONSE_NOT_STORED)
    assert served.recorder.runs[rid] == 1


def test_an_event_stream_passes_through_at_once(served: Served) -> None:
    rid, key = new_id(), new_id()
    with served.client() as client:
        first = client.post(f"/events?id={rid}", json={}, headers=key_headers(key))
        again = client.post(f"/events?id={rid}", json={}, headers=key_headers(key))
    assert first.content == b"data: one\n\ndata: two\n\n"
    assert first.headers["idempotency-replay-unavailable"] == "streaming"
    problem(again, Problem.RESPONSE_NOT_STORED)


# -- which requests --------------------------------------------------------------------------------


def test_get_and_excluded_routes_are_left_alone(served: Served) -> None:
    rid, key = new_id(), new_id()
    with served.client() as client:
        for _ in range(2):
            assert client.get(f"/orders?id={rid}", headers=key_headers(key)).status_code == 200
            excluded = client.post(f"/excluded?id={rid}", json={}, headers=key_headers(key))
            assert excluded.status_code == 201 and "idempotent-replayed" not in excluded.headers
    assert served.recorder.runs[rid] == 4


def test_a_fields_fingerprint_ignores_the_other_fields(served: Served) -> None:
    rid, key = new_id(), new_id()
    with served.client() as client:
        first = client.post(
            f"/charge?id={rid}",
            json={"amount": 5, "currency": "EUR", "note": "a"},
            headers=key_headers(key),
        )
        reordered = client.post(
            f"/charge?id={rid}",
            content=b'{"note": "b", "currency": "EUR", "amount": 5}',
            headers=key_headers(key, **{"content-type": "application/json"}),
        )
        changed = client.post(
            f"/charge?id={rid}",
            json={"amount": 6, "currency": "EUR", "note": "a"},
            headers=key_headers(key),
        )
    assert first.status_code == 201
    assert reordered.headers["idempotent-replayed"] == "true" and reordered.content == first.content
    problem(changed, Problem.KEY_REUSED)
    assert served.recorder.runs[rid] == 1
