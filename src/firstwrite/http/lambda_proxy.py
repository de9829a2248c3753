"""Proxy responses of the Lambda HTTP handlers, one form per event shape.

:func:`~firstwrite.idempotency.decorators.idempotent_handler` behind API Gateway (REST v1 and
HTTP API v2), an Application Load Balancer or a Lambda Function URL answers an error of the
layer the way the middleware does (:func:`.problems.answer_for`: the same problem, status and
``Retry-After``), as a proxy response the event's source accepts: :func:`shape_of` tells the
shapes apart, :func:`problem_response` builds the answer and :func:`mark_replayed` adds
``Idempotent-Replayed: true`` to a replayed response. An ALB target group with multi-value
headers on gets (and must answer with) ``multiValueHeaders`` only.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Mapping
from http import HTTPStatus
from typing import Any

from .problems import render_error

__all__ = [
    "REPLAYED_HEADER",
    "Invocation",
    "Shape",
    "mark_replayed",
    "problem_response",
    "shape_of",
]

log = logging.getLogger("firstwrite.idempotency")

REPLAYED_HEADER = "Idempotent-Replayed"


class Shape(enum.Enum):
    """The event shapes of Lambda's HTTP sources."""

    REST = "API Gateway REST API (payload 1.0)"
    HTTP_API = "API Gateway HTTP API (payload 2.0)"
    FUNCTION_URL = "Lambda Function URL"
    ALB = "Application Load Balancer"
    ALB_MULTI = "Application Load Balancer, multi-value headers"


def shape_of(event: object) -> Shape | None:
    """The shape of an HTTP event, or ``None`` for any other event (SQS, a direct call...)."""
    if not isinstance(event, Mapping):
        return None
    context = event.get("requestContext")
    if not isinstance(context, Mapping):
        return None
    if "elb" in context:
        return Shape.ALB_MULTI if "multiValueHeaders" in event else Shape.ALB
    if event.get("version") == "2.0" and isinstance(context.get("http"), Mapping):
        domain = str(context.get("domainName", ""))
        return Shape.FUNCTION_URL if ".lambda-url." in domain else Shape.HTTP_API
    if "httpMethod" in event:
        return Shape.REST
    return None


def _response(
    shape: Shape, status: int, headers: list[tuple[str, str]], body: str
) -> dict[str, Any]:
    response: dict[str, Any] = {"statusCode": status}
    if shape is Shape.ALB or shape is Shape.ALB_MULTI:
        response["statusDescription"] = f"{status} {HTTPStatus(status).phrase}"
    if shape is Shape.ALB_MULTI:
        multi: dict[str, list[str]] = {}
        for name, value in headers:
            multi.setdefault(name, []).append(value)
        response["multiValueHeaders"] = multi
    else:
        response["headers"] = dict(headers)
    response["body"] = body
    response["isBase64Encoded"] = False
    return response


def problem_response(
    event: object, error: BaseException, header: str = "Idempotency-Key"
) -> dict[str, Any] | None:
    """The proxy response answering ``error`` for ``event``'s source, or ``None`` when the
    event is not an HTTP event or the error is not the layer's (let it propagate)."""
    shape = shape_of(event)
    if shape is None:
        return None
    rendered = render_error(error, header)
    if rendered is None:
        return None
    status, raw_headers, body = rendered
    headers = [
        (_title(name.decode("latin-1")), value.decode("latin-1"))
        for name, value in raw_headers
        if name != b"content-length"  # the source sets it
    ]
    return _response(shape, status, headers, body.decode("utf-8"))


def mark_replayed(event: object, response: Any) -> Any:
    """``response`` (a proxy response dict, replayed) with ``Idempotent-Replayed: true`` in the
    header form ``event``'s source reads; anything else is returned unchanged."""
    shape = shape_of(event)
    if shape is None or not isinstance(response, Mapping) or "statusCode" not in response:
        return response
    marked = dict(response)
    if shape is Shape.ALB_MULTI:
        multi = dict(marked.get("multiValueHeaders") or {})
        multi[REPLAYED_HEADER] = ["true"]
        marked["multiValueHeaders"] = multi
    else:
        headers = dict(marked.get("headers") or {})
        headers[REPLAYED_HEADER] = "true"
        marked["headers"] = headers
    return marked


def _title(name: str) -> str:
    return "-".join(part.capitalize() for part in name.split("-"))


_NOT_RETURNED = object()


class Invocation:
    """One invocation of an ``idempotent_handler``: whether the function ran and what it
    returned (so a replay is told from a first answer, and a completion that failed after the
    function returned still answers with its response)."""

    __slots__ = ("context", "event", "fn", "returned")

    def __init__(self, fn: Callable[..., Any], event: Any, context: Any) -> None:
        self.fn = fn
        self.event = event
        self.context = context
        self.returned: Any = _NOT_RETURNED

    def call(self) -> Any:
        self.returned = self.fn(self.event, self.context)
        return self.returned

    async def acall(self) -> Any:
        self.returned = await self.fn(self.event, self.context)
        return self.returned

    def replied(self, result: Any) -> Any:
        """``result``, marked as a replay when the function did not run (HTTP events only)."""
        if self.returned is not _NOT_RETURNED:
            return result
        return mark_replayed(self.event, result)

    def answer(self, error: BaseException, answers: bool, header: str) -> Any:
        """The proxy response to ``error`` (re-raised when ``answers`` is off, or for an event
        that is not an HTTP request)."""
        if not answers:
            raise error
        if self.returned is not _NOT_RETURNED and shape_of(self.event) is not None:
            log.error("the response of %s was not stored: %s", self.fn.__qualname__, error)
            return self.returned
        response = problem_response(self.event, error, header)
        if response is None:
            raise error
        if response["statusCode"] >= 500:
            log.error("idempotency layer error answered %s", response["statusCode"], exc_info=error)
        return response
