"""Every error the idempotency layer defines has an HTTP answer, never a 500 nor an exception.

The classes are found by introspection (every subclass of ``IdempotencyError`` in
``firstwrite.idempotency.errors``), so a new one without an answer fails here. Each is raised
by the guard (a guard whose ``claim`` and ``run`` raise it: the layer's real errors in every
state are hard to stage one by one; the regressions below stage the two that escaped for real)
and sent through the ASGI middleware, the WSGI middleware and ``idempotent_handler`` behind
each Lambda HTTP event shape. Then the regressions, on the engine: a late retry with
``refuse_late_retries=True`` is a 410 (it was a bare 500 after the 201), and a Lambda retry
while the first invocation runs is a 409 proxy response with ``Retry-After`` (it raised).
"""

from __future__ import annotations

import copy
import inspect
import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from http_support import asgi_request, wsgi_request
from tests.event_samples import http_event

from firstwrite.engine import Engine, local_client
from firstwrite.http import HttpConfig, IdempotencyMiddleware, Route, WSGIIdempotencyMiddleware
from firstwrite.http.lambda_proxy import Shape, shape_of
from firstwrite.http.problems import PROBLEM_CONTENT_TYPE, answer_for
from firstwrite.idempotency import Idempotency, IdempotencyConfig, errors, idempotent_handler

_REASON = {"Code": "ConditionalCheckFailed", "Message": "no"}
_NOT_FOUND = {"Error": {"Code": "ResourceNotFoundException", "Message": "no table"}}

# One instance per class: a class missing here fails test_every_class_is_covered.
SAMPLES: dict[type[errors.IdempotencyError], Callable[[], errors.IdempotencyError]] = {
    errors.IdempotencyError: lambda: errors.IdempotencyError("x"),
    errors.ConfigurationError: lambda: errors.ConfigurationError("bad"),
    errors.MissingKeyError: lambda: errors.MissingKeyError("no key"),
    errors.InProgressError: lambda: errors.InProgressError("k", 2.5),
    errors.DeadlineExceededError: lambda: errors.DeadlineExceededError(
        "k", retry_after=2.0, budget=2.0, elapsed=2.0, operation="PutItem", dynamo_error_code="X"
    ),
    errors.ClockSkewError: lambda: errors.ClockSkewError(
        "k", "this clock is +40s off", offset=40.0, uncertainty=0.5, bound=30.0, retry_after=2.0
    ),
    errors.PayloadMismatchError: lambda: errors.PayloadMismatchError("k", "a", "b"),
    errors.LostClaimError: lambda: errors.LostClaimError("k", "me", "you", "PENDING"),
    errors.CompletionNotRecordedError: lambda: errors.CompletionNotRecordedError(
        "k", {"statusCode": 201}, None, tried_for=1.0, lease_expires_at=0.0, reason="down"
    ),
    errors.LateRetryError: lambda: errors.LateRetryError(
        "k", age=99.0, status="COMPLETED", removed=False
    ),
    errors.ReplayedFailureError: lambda: errors.ReplayedFailureError("k", "ValueError", "no"),
    errors.RecoveryRequiredError: lambda: errors.RecoveryRequiredError("k", ()),
    errors.RecoveryFailedError: lambda: errors.RecoveryFailedError("k", "declined"),
    errors.SerializationError: lambda: errors.SerializationError("bad bytes"),
    errors.ResultTooLargeError: lambda: errors.ResultTooLargeError("k", 500_000, 400_000),
    errors.TableNotFoundError: lambda: errors.TableNotFoundError(["t"], _NOT_FOUND, "PutItem"),
    errors.BusinessConditionFailedError: lambda: errors.BusinessConditionFailedError(
        "k", {0: _REASON}
    ),
    errors.TransactionCancelledError: lambda: errors.TransactionCancelledError("k", [_REASON]),
    errors.TransactionConflictError: lambda: errors.TransactionConflictError("k", []),
    errors.TransactionValidationError: lambda: errors.TransactionValidationError("k", []),
    errors.ItemCollectionSizeLimitError: lambda: errors.ItemCollectionSizeLimitError("k", []),
    errors.TooManyTransactItemsError: lambda: errors.TooManyTransactItemsError(
        "k", 120, 100, operation="claim_with"
    ),
    errors.ResultStoreError: lambda: errors.ResultStoreError("store down"),
    errors.ResultStoreConflictError: lambda: errors.ResultStoreConflictError("s3://b/k"),
    errors.ResultIntegrityError: lambda: errors.ResultIntegrityError("s3://b/k", 10, 11),
    errors.ResultDecryptionError: lambda: errors.ResultDecryptionError("wrong key"),
}


def _defined() -> set[type[errors.IdempotencyError]]:
    return {
        cls
        for _, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, errors.IdempotencyError) and cls.__module__ == errors.__name__
    }


def test_every_class_is_covered() -> None:
    assert _defined() == set(SAMPLES), "add the new error class to SAMPLES (and answer it)"
    assert len(SAMPLES) >= 20


class Raising(Idempotency):
    """A real guard whose ``claim`` and ``run`` raise the error given (the thing under test is
    what the HTTP side does with it)."""

    error: BaseException

    def claim(self, *args: Any, **kwargs: Any) -> Any:
        raise self.error

    def run(self, *args: Any, **kwargs: Any) -> Any:
        raise self.error


@pytest.fixture(scope="module")
def raising() -> Raising:
    return Raising(IdempotencyConfig(table_name="answers"), client=local_client(Engine()))


ERRORS = sorted(SAMPLES, key=lambda cls: cls.__name__)


def _check(status: int, headers: dict[str, str], body: bytes, error: BaseException) -> None:
    answer = answer_for(error)
    assert answer is not None
    assert 400 <= status < 500 or status == 503, (type(error).__name__, status)
    assert status == answer.problem.status
    assert headers["content-type"] == PROBLEM_CONTENT_TYPE
    document = json.loads(body)
    assert document["type"] == answer.problem.type_uri and document["status"] == status
    if status in (409, 503) and answer.retry_after is not None:
        assert int(headers["retry-after"]) >= 1


async def _app(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 201, "headers": []})
    await send({"type": "http.response.body", "body": b"{}"})


def asgi_post(app: Any, key: str, body: bytes = b"{}") -> tuple[int, dict[str, str], bytes]:
    """POST /pay through an ASGI app, with ``Idempotency-Key: key``."""
    return asgi_request(app, "/pay", key, body=body)[:3]


def _wsgi_app(environ: Any, start_response: Any) -> list[bytes]:
    start_response("201 Created", [("Content-Type", "application/json")])
    return [b"{}"]


def wsgi_post(app: Any, key: str, body: bytes = b"{}") -> tuple[int, dict[str, str], bytes]:
    return wsgi_request(app, "/pay", key, body=body)[:3]


@pytest.mark.parametrize("cls", ERRORS, ids=lambda cls: cls.__name__)
def test_asgi_answers(cls: type[errors.IdempotencyError], raising: Raising) -> None:
    raising.error = SAMPLES[cls]()
    app = IdempotencyMiddleware(_app, guard=raising, config=HttpConfig())
    _check(*asgi_post(app, "k-1"), raising.error)


@pytest.mark.parametrize("cls", ERRORS, ids=lambda cls: cls.__name__)
def test_wsgi_answers(cls: type[errors.IdempotencyError], raising: Raising) -> None:
    raising.error = SAMPLES[cls]()
    app = WSGIIdempotencyMiddleware(_wsgi_app, guard=raising, config=HttpConfig())
    _check(*wsgi_post(app, "k-1"), raising.error)


def _alb_multi() -> dict[str, Any]:
    event = http_event("alb", {"order": 1})
    event["multiValueHeaders"] = {n: [v] for n, v in event.pop("headers").items()}
    return event


EVENTS: dict[Shape, Callable[[], dict[str, Any]]] = {
    Shape.REST: lambda: http_event("api_gateway_v1", {"order": 1}),
    Shape.HTTP_API: lambda: http_event("api_gateway_v2", {"order": 1}),
    Shape.FUNCTION_URL: lambda: http_event("function_url", {"order": 1}),
    Shape.ALB: lambda: http_event("alb", {"order": 1}),
    Shape.ALB_MULTI: _alb_multi,
}


def _proxy_parts(response: Any, shape: Shape) -> tuple[int, dict[str, str], bytes]:
    assert set(response) >= {"statusCode", "body", "isBase64Encoded"}
    if shape is Shape.ALB_MULTI:
        assert "headers" not in response  # multi-value headers on: only multiValueHeaders
        headers = {n.lower(): v[-1] for n, v in response["multiValueHeaders"].items()}
    else:
        assert "multiValueHeaders" not in response
        headers = {n.lower(): v for n, v in response["headers"].items()}
    if shape in (Shape.ALB, Shape.ALB_MULTI):
        assert response["statusDescription"].startswith(str(response["statusCode"]) + " ")
    return response["statusCode"], headers, response["body"].encode()


def test_each_sample_event_has_its_shape() -> None:
    assert {shape: shape_of(make()) for shape, make in EVENTS.items()} == {s: s for s in EVENTS}
    assert shape_of({"Records": []}) is None


@pytest.mark.parametrize("shape", list(EVENTS), ids=lambda s: s.name)
@pytest.mark.parametrize("cls", ERRORS, ids=lambda cls: cls.__name__)
def test_lambda_answers(cls: type[errors.IdempotencyError], shape: Shape, raising: Raising) -> None:
    raising.error = SAMPLES[cls]()

    @idempotent_handler(raising, key="requestContext.requestId || path || rawPath")
    def handler(event: Any, context: Any) -> Any:
        raise AssertionError("the guard raises before running the function")

    _check(*_proxy_parts(handler(EVENTS[shape](), None), shape), raising.error)


def test_lambda_can_raise_instead(raising: Raising) -> None:
    raising.error = SAMPLES[errors.InProgressError]()

    @idempotent_handler(raising, key="path", on_error="raise")
    def handler(event: Any, context: Any) -> Any:
        return {"statusCode": 201}

    with pytest.raises(errors.InProgressError):
        handler(EVENTS[Shape.REST](), None)
    with pytest.raises(ValueError, match="on_error"):
        idempotent_handler(raising, key="path", on_error="ignore")  # type: ignore[arg-type]


def test_a_non_http_event_still_raises(raising: Raising) -> None:
    raising.error = SAMPLES[errors.InProgressError]()

    @idempotent_handler(raising, key="id")
    def handler(event: Any, context: Any) -> Any:
        return "done"

    with pytest.raises(errors.InProgressError):
        handler({"id": "a"}, None)


# --- regressions, on the engine -------------------------------------------------------------


def _late_guard(engine: Engine) -> Idempotency:
    engine.clock.freeze(1_800_000_000.0)
    config = IdempotencyConfig(
        table_name="late", retention=3600, client_retry_ceiling=60, refuse_late_retries=True
    )
    guard = Idempotency(config, client=local_client(engine), clock=engine.clock.now)
    guard.ensure_table()
    return guard


@pytest.mark.parametrize("server", ["asgi", "wsgi"])
def test_a_late_retry_is_410_not_500(server: str) -> None:
    engine = Engine()
    guard = _late_guard(engine)
    if server == "asgi":
        app: Any = IdempotencyMiddleware(_app, guard=guard, config=HttpConfig())
        post = asgi_post
    else:
        app = WSGIIdempotencyMiddleware(_wsgi_app, guard=guard, config=HttpConfig())
        post = wsgi_post
    assert post(app, "late-1")[0] == 201
    status, headers, _ = post(app, "late-1")
    assert status == 201 and headers["idempotent-replayed"] == "true"
    engine.clock.advance(3600 + 10)  # past retention; the record is still in the table
    status, headers, body = post(app, "late-1")
    assert status == 410 and headers["content-type"] == PROBLEM_CONTENT_TYPE
    assert json.loads(body)["type"] == "urn:firstwrite:problem:idempotency-key-expired"


@pytest.mark.parametrize("shape", list(EVENTS), ids=lambda s: s.name)
def test_lambda_in_progress_is_409_with_retry_after_and_a_replay_is_marked(shape: Shape) -> None:
    """The first invocation holds the key (a real thread); the retry gets a 409 proxy response
    with ``Retry-After``; after the first ends, a retry gets its response, marked replayed."""
    engine = Engine()
    guard = Idempotency(IdempotencyConfig(table_name="lambda-http"), client=local_client(engine))
    guard.ensure_table()
    entered, release = threading.Event(), threading.Event()
    runs: list[int] = []

    @idempotent_handler(guard, key="body", payload="body")
    def handler(event: Any, context: Any) -> Any:
        runs.append(1)
        entered.set()
        assert release.wait(10)
        headers = {"Content-Type": "application/json"}
        response = {"statusCode": 201, "body": "{}", "isBase64Encoded": False}
        if shape in (Shape.ALB, Shape.ALB_MULTI):
            response["statusDescription"] = "201 Created"
        if shape is Shape.ALB_MULTI:
            response["multiValueHeaders"] = {n: [v] for n, v in headers.items()}
        else:
            response["headers"] = headers
        return response

    event = EVENTS[shape]()
    first: list[Any] = []
    worker = threading.Thread(target=lambda: first.append(handler(copy.deepcopy(event), None)))
    worker.start()
    assert entered.wait(10)
    status, headers, body = _proxy_parts(handler(copy.deepcopy(event), None), shape)
    assert status == 409 and int(headers["retry-after"]) >= 1
    assert json.loads(body)["type"] == "urn:firstwrite:problem:request-in-progress"
    release.set()
    worker.join(10)
    assert first[0]["statusCode"] == 201 and "Idempotent-Replayed" not in str(first[0])
    replay = handler(copy.deepcopy(event), None)
    status, headers, _ = _proxy_parts(replay, shape)
    assert status == 201 and headers["idempotent-replayed"] == "true"
    assert runs == [1]


class Slow(Idempotency):
    """A real guard whose claims come back after ``delay`` seconds (an answer at the edge of
    the route's budget)."""

    delay = 0.0

    def claim(self, *args: Any, **kwargs: Any) -> Any:
        outcome = super().claim(*args, **kwargs)
        time.sleep(self.delay)
        return outcome


@pytest.mark.parametrize("server", ["asgi", "wsgi"])
def test_a_claim_back_after_the_route_budget_does_not_run_the_handler(server: str) -> None:
    engine = Engine()
    guard = Slow(IdempotencyConfig(table_name="edge"), client=local_client(engine))
    guard.ensure_table()
    config = HttpConfig(routes=[Route("/pay", budget=0.2)])
    calls: list[int] = []

    async def counted(scope: Any, receive: Any, send: Any) -> None:
        calls.append(1)
        await _app(scope, receive, send)

    def wsgi_counted(environ: Any, start_response: Any) -> list[bytes]:
        calls.append(1)
        return _wsgi_app(environ, start_response)

    if server == "asgi":
        app: Any = IdempotencyMiddleware(counted, guard=guard, config=config)
        post = asgi_post
    else:
        app = WSGIIdempotencyMiddleware(wsgi_counted, guard=guard, config=config)
        post = wsgi_post
    guard.delay = 0.3
    status, headers, body = post(app, "edge-1")
    assert status == 503 and int(headers["retry-after"]) >= 1 and calls == []
    assert json.loads(body)["type"] == "urn:firstwrite:problem:idempotency-store-unavailable"
    guard.delay = 0.0
    assert post(app, "edge-1")[0] == 201 and calls == [1]  # released: the retry runs at once
