"""Bind aiobotocore clients to an in-process engine: the async twin of :mod:`.sync`.

``bind(client, engine)`` works on an aiobotocore client as on a boto3 one (it comes here), and
:func:`local_aio_client` opens one bound to an engine, with no server and no AWS setup::

    async with local_aio_client(engine) as ddb:
        await ddb.put_item(TableName="orders", Item={"pk": {"S": "o-1"}})

The decisions are :mod:`.sync`'s: the same :func:`~.steps.quick_steps` generator answers
at ``before-call``, and hands every answer botocore might retry to aiobotocore's full path,
whose ``before-send`` gets the kept first answer and whose (async) retry handler decides. Only
the driver differs: here the event emitter and the parser are awaited.

An engine call runs inline on the event loop when it cannot block for long (durability
``normal``, no fault injection: tens of microseconds of CPU), and in a worker thread otherwise
(an fsync per commit, or injected latency, would stall every other task on the loop). The HTTP
server makes the same choice for the same reason.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from aiobotocore.awsrequest import AioAWSResponse
from aiobotocore.session import AioSession
from botocore.awsrequest import AWSPreparedRequest
from botocore.model import OperationModel

from .parse import Answer, wire_answer
from .steps import (
    Answered,
    Call,
    Emit,
    Parse,
    ResponderBase,
    body_of,
    configure_dummy,
    install,
    parser_of,
    quick_steps,
    response_headers,
    target_of,
)

if TYPE_CHECKING:
    from ..api import Engine

__all__ = ["AioResponder", "dummy_aio_session", "local_aio_client"]


class _AioRaw:
    """The ``raw`` object aiobotocore reads an ``AioAWSResponse`` body from (awaited)."""

    __slots__ = ("_body",)

    def __init__(self, body: bytes) -> None:
        self._body = body

    async def read(self) -> bytes:
        return self._body


def _respond(url: str, status: int, payload: bytes, headers: dict[str, str]) -> AioAWSResponse:
    return AioAWSResponse(url, status, headers, _AioRaw(payload))


async def _answer(
    engine: Engine, target: str | None, body: Any, region: str, request: Any = None
) -> Answer:
    if engine.durability == "normal" and not engine.hooks.interceptors:
        return wire_answer(engine, target, body, region, request)
    return await asyncio.to_thread(wire_answer, engine, target, body, region, request)


class AioResponder(ResponderBase):
    """One bound aiobotocore client's handlers: async ``before-call`` and ``before-send``."""

    async def before_call(
        self, model: OperationModel, params: dict[str, Any], request_signer: Any, **_kwargs: Any
    ) -> Answered | None:
        self.keep(None)
        engine = self.current_engine()
        if engine is None:
            return None
        steps = quick_steps(
            engine, self.region, model, params, request_signer, _respond, self._shortcut
        )
        try:
            step = next(steps)
            while True:
                if type(step) is Call:
                    answer: Any = await _answer(
                        step.engine, step.target, step.body, step.region, step.request
                    )
                elif type(step) is Emit:
                    answer = await self._emit(step.event, **step.kwargs)
                else:
                    assert type(step) is Parse
                    answer = await self._parser.parse(step.response, step.shape)
                step = steps.send(answer)
        except StopIteration as stop:
            return self.finish(stop.value)

    async def before_send(self, request: AWSPreparedRequest, **_kwargs: Any) -> Any:
        body = body_of(request)
        kept = self.take_kept(body)
        if kept is not None:
            return kept  # the first attempt of a call the quick path handed over
        engine = self.current_engine()
        if engine is None:
            return None
        reply = await _answer(engine, target_of(request), body, self.region)
        headers = response_headers(reply.payload, engine.clock.http_date())
        return _respond(request.url, reply.status, reply.payload, headers)


def dummy_aio_session(region: str = "us-east-1") -> AioSession:
    """An aiobotocore session that never reads the machine's AWS setup (as
    :func:`~.sync.dummy_session`: built-in defaults, static dummy credentials, no IMDS)."""
    session = AioSession()
    configure_dummy(session, region)
    return session


@contextlib.asynccontextmanager
async def local_aio_client(
    engine: Engine | None = None,
    region: str = "us-east-1",
    service_name: str = "dynamodb",
    **client_kwargs: Any,
) -> AsyncIterator[Any]:
    """``async with local_aio_client(engine) as client``: an aiobotocore client answered in
    process by ``engine`` (a new in-memory one, closed on exit, if omitted).

    ``client_kwargs`` go to ``AioSession.create_client`` (e.g. ``config=AioConfig(...)``);
    aiobotocore's defaults apply otherwise, retries included. ``service_name`` may be
    ``dynamodbstreams``. Works on a machine with no AWS configuration at all.
    """
    owned = engine is None
    if engine is None:
        from ..api import Engine

        engine = Engine()
    try:
        session = dummy_aio_session(region)
        async with session.create_client(service_name, region_name=region, **client_kwargs) as c:
            region = c.meta.region_name or engine.default_region
            yield install(c, AioResponder(engine, region, parser_of(c), c.meta.events.emit))
    finally:
        if owned:
            engine.close()
