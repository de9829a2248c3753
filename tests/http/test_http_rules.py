"""The middleware's rules without a server: routes, configuration, scopes, the stored form,
the Retry-After policy."""

from __future__ import annotations

import re

import pytest

from firstwrite.http import (
    HttpConfig,
    HttpRequest,
    Problem,
    RetryAfterContext,
    Route,
    expected_duration,
    layer_retry_after,
)
from firstwrite.http.core import Core, Durations, Plan, decode_response, encode_response
from firstwrite.idempotency import InProgressError, SerializationError


@pytest.mark.parametrize(
    ("pattern", "matches", "misses"),
    [
        ("/payments", ["/payments"], ["/payments/", "/payments/1", "/pay"]),
        ("/payments/{id}", ["/payments/1", "/payments/a-b"], ["/payments", "/payments/1/x"]),
        ("/a/{x}/b/{y}", ["/a/1/b/2"], ["/a/1/b", "/a//b/2"]),
        ("/admin/*", ["/admin", "/admin/", "/admin/a/b"], ["/administrator", "/x/admin"]),
        ("/*", ["/", "/anything/at/all"], []),
        ("/v1.0/pay", ["/v1.0/pay"], ["/v1x0/pay"]),
        (re.compile(r"/orders/\d+"), ["/orders/12"], ["/orders/x", "/orders/12/x"]),
    ],
)
def test_route_patterns(
    pattern: str | re.Pattern[str], matches: list[str], misses: list[str]
) -> None:
    route = Route(pattern)
    assert all(route.matches("POST", path) for path in matches)
    assert not any(route.matches("POST", path) for path in misses)
    assert not route.matches("GET", matches[0])  # POST and PATCH by default


@pytest.mark.parametrize("pattern", ["payments", "/a/*/b", "/a/{id", "/a/x*", "/a/{1x}"])
def test_bad_route_patterns_are_refused(pattern: str) -> None:
    with pytest.raises(ValueError):
        Route(pattern)


def test_bad_route_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="no methods"):
        Route("/a", methods=())
    with pytest.raises(ValueError, match="lease"):
        Route("/a", lease=0)
    with pytest.raises(ValueError, match="wait"):
        Route("/a", wait=-1)
    with pytest.raises(ValueError, match="excluded"):
        Route("/a", exclude=True, require_key=True)


def test_the_first_matching_route_decides_and_the_default_comes_last() -> None:
    config = HttpConfig(
        routes=[
            Route("/payments/{id}/refunds", require_key=True, lease=5),
            Route("/payments/*", exclude=True),
            Route("/orders", methods=["PUT"], wait=3),
        ],
        methods=["POST"],
        lease=30,
    )
    core = Core(config)
    refunds = core.route_for("POST", "/payments/1/refunds")
    assert refunds is not None and refunds.require_key and refunds.lease == 5
    assert core.route_for("POST", "/payments/1") is None  # excluded
    put = core.route_for("PUT", "/orders")
    assert put is not None and put.wait == 3 and put.lease == 30
    post = core.route_for("POST", "/orders")  # /orders matched for PUT only: the default
    assert post is not None and not post.require_key and post.wait is None  # the guard's
    assert core.route_for("PATCH", "/orders") is None  # the default takes POST only here
    assert core.route_for("GET", "/anything") is None


def test_the_configuration_refuses_what_it_must_never_do() -> None:
    with pytest.raises(ValueError, match="never replayed: set-cookie"):
        HttpConfig(replay_headers={"content-type", "Set-Cookie"})
    with pytest.raises(ValueError, match="never replayed: transfer-encoding"):
        HttpConfig(replay_headers={"transfer-encoding"})
    with pytest.raises(ValueError, match="never stored"):
        HttpConfig(store_status={200, 429})
    with pytest.raises(ValueError, match="HTTP statuses"):
        HttpConfig(store_status={200, 700})
    with pytest.raises(ValueError, match="header name"):
        HttpConfig(header="Idempotency Key")
    with pytest.raises(ValueError, match="on_unstored"):
        HttpConfig(on_unstored="drop")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=">= 0"):
        HttpConfig(max_request_body=-1)
    with pytest.raises(ValueError, match="retry_after"):
        HttpConfig(retry_after=-1)


def test_what_is_stored() -> None:
    default = HttpConfig()
    assert [
        s
        for s in (100, 200, 201, 204, 301, 304, 400, 401, 402, 403, 404, 409, 422, 429, 500, 503)
        if default.stores(s)
    ] == [
        200,
        201,
        204,
        400,
        402,
        404,
        409,
        422,
    ]
    only_created = HttpConfig(store_status={201})
    assert only_created.stores(201) and not only_created.stores(200)
    everything = HttpConfig(store_status=lambda status: True)
    assert everything.stores(500) and everything.stores(302)
    assert not any(everything.stores(s) for s in (401, 403, 429))  # whatever the policy says


def _plan(core: Core, principal: str | None, path: str = "/pay") -> Plan:
    request = HttpRequest(
        "POST", path, "", {}, headers={"x-who": principal} if principal is not None else {}
    )
    plan = core.plan(core.route_for("POST", path), "k", request)  # type: ignore[arg-type]
    assert isinstance(plan, Plan), plan
    return plan


def test_the_scope_is_principal_method_and_path_and_cannot_be_forged() -> None:
    core = Core(HttpConfig(principal=lambda request: request.header("x-who")))
    assert _plan(core, "alice").scope == "alice POST /pay"
    # A principal cannot pose as another one plus a method and path: it is percent-encoded.
    assert _plan(core, "alice POST /pay").scope != _plan(core, "alice").scope
    assert _plan(core, "a b").scope == "a%20b POST /pay"
    assert _plan(core, "*").scope == "%2A POST /pay"
    assert _plan(core, "bob@example.com").scope == "bob%40example.com POST /pay"
    assert _plan(core, "caf\u00e9").scope == "caf%C3%A9 POST /pay"
    assert _plan(core, "A.b_c~d-9").scope == "A.b_c~d-9 POST /pay"  # unreserved: as it is
    anonymous = Core(HttpConfig())
    assert _plan(anonymous, None).scope == "* POST /pay"  # no principal configured: one namespace
    long_path = "/" + "p" * 600
    hashed = _plan(core, "alice", long_path).scope
    assert hashed.startswith("sha256:") and len(hashed) == 7 + 64
    assert hashed != _plan(core, "bob", long_path).scope


def test_a_principal_that_names_nobody_is_401() -> None:
    core = Core(HttpConfig(principal=lambda request: request.header("x-who")))
    request = HttpRequest("POST", "/pay", "", {}, headers={})
    answer = core.plan(core.route_for("POST", "/pay"), "k", request)  # type: ignore[arg-type]
    assert isinstance(answer, tuple) and answer[0] == Problem.PRINCIPAL_REQUIRED.status


def test_the_stored_form_round_trips_and_detects_corruption() -> None:
    body = bytes(range(256)) + b"\n\nafter newlines"
    raw = encode_response(
        201, [["content-type", "application/octet-stream"], ["etag", '"x"']], body
    )
    # The exact bytes: records stored by any version replay in every other.
    assert raw == (
        b'{"v":1,"s":201,"h":[["content-type","application/octet-stream"],["etag","\\"x\\""]]}\n'
        + body
    )
    assert decode_response(raw) == (
        201,
        [(b"content-type", b"application/octet-stream"), (b"etag", b'"x"')],
        body,
    )
    for corrupt in (b"not json\nbody", b'{"v":1}\nbody', b'{"v":1,"s":200,"h":[]}'):
        with pytest.raises(SerializationError):
            decode_response(corrupt)


def test_a_non_standard_reason_phrase_is_kept_and_a_standard_one_is_not_stored() -> None:
    from firstwrite.shared import http_reply

    flask = encode_response(201, [], b"{}", "CREATED")
    assert flask.startswith(b'{"v":1,"s":201,"h":[],"r":"CREATED"}\n')
    assert http_reply.decode(flask).status_line == "201 CREATED"
    standard = encode_response(201, [], b"{}", "Created")
    assert standard == encode_response(201, [], b"{}")  # the old form, byte for byte
    assert http_reply.decode(standard).status_line == "201 Created"


def test_only_allow_listed_headers_are_stored() -> None:
    core = Core(HttpConfig(replay_headers={"content-type", "x-request-cost"}))
    stored = core.stored_form(
        200,
        [
            (b"Content-Type", b"text/plain"),
            (b"Set-Cookie", b"a=b"),
            (b"X-Request-Cost", b"3"),
            (b"X-Other", b"1"),
        ],
        b"ok",
    )
    assert decode_response(stored) == (
        200,
        [(b"Content-Type", b"text/plain"), (b"X-Request-Cost", b"3")],
        b"ok",
    )


def test_durations_give_the_90th_percentile_of_recent_runs() -> None:
    durations = Durations()
    assert durations.expected("/pay") is None
    for i in range(1, 11):
        durations.observe("/pay", float(i))
    assert durations.expected("/pay") == 10.0
    for _ in range(Durations.WINDOW):  # the window forgets the old runs
        durations.observe("/pay", 0.2)
    assert durations.expected("/pay") == 0.2
    assert durations.expected("/other") is None


def test_retry_after_policies() -> None:
    assert expected_duration(RetryAfterContext("/pay", None, 60.0)) == 1.0
    assert expected_duration(RetryAfterContext("/pay", 4.2, 60.0)) == 4.2
    assert expected_duration(RetryAfterContext("/pay", 90.0, 12.0)) == 12.0  # never past the lease
    assert layer_retry_after(RetryAfterContext("/pay", 4.2, 37.5)) == 37.5


def _retry_after_header(core: Core, lease_left: float) -> str:
    answer = core.answer_error(_plan(core, None), InProgressError("k", lease_left))
    assert answer is not None
    status, headers, _ = answer
    assert status == 409
    return dict(headers)[b"retry-after"].decode()


def test_the_409_retry_after_follows_the_policy() -> None:
    default = Core(HttpConfig())
    assert _retry_after_header(default, 59.2) == "1"  # nothing observed yet: 1 s, not the lease
    default.durations.observe("/*", 2.4)
    assert _retry_after_header(default, 59.2) == "3"  # about the handler's own duration
    assert _retry_after_header(Core(HttpConfig(retry_after=layer_retry_after)), 59.2) == "60"
    assert _retry_after_header(Core(HttpConfig(retry_after=7)), 59.2) == "7"
    assert _retry_after_header(Core(HttpConfig(retry_after=lambda c: 0.0)), 59.2) == "1"
    assert _retry_after_header(Core(HttpConfig(retry_after=lambda c: float("nan"))), 59.2) == "1"
