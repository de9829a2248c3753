"""Bind real boto3/botocore clients to an in-process engine: no sockets, botocore's own code.

``bind(client, engine)`` answers each call at botocore's ``before-call`` event, once botocore
has done the whole client half of the call exactly as for AWS (parameter hooks, validation,
endpoint resolution, JSON serialisation; :mod:`.validate`, :mod:`.serialize`).
The engine answers the serialised body through ``wire_call``, the HTTP server's code path, and
the answer becomes the response, or the modeled error ``_make_api_call`` raises, exactly as the
client's own parser would make it (:mod:`.parse`). ``after-call`` hooks run as usual.

The quick path leaves out botocore's HTTP half (signing, the ``request-created`` and
``before-send`` hooks, the CRC32 check, the retry handler), which does nothing useful on a
loopback engine. Only answers botocore never retries take it; any other answer (a throttle, a
500, an unknown error code) is handed to ``before-send`` for the first attempt and botocore's
retry handler decides, as against AWS; every retry is a fresh engine call.
``bind(client, engine, full_stack=True)`` sends every call through the full path.

The quick path is one generator (:func:`quick_steps`), driven by :class:`Responder` with plain
calls and by :mod:`.aio` with ``await``. For the least per-call overhead, use
:class:`~firstwrite.engine.direct.client.DirectClient`. Details: docs/engine.md.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import boto3
import botocore.session
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.model import OperationModel

from ..wire import wire_call
from .parse import wire_answer
from .steps import (
    Answered,
    Call,
    Emit,
    Parse,
    ResponderBase,
    body_of,
    configure_dummy,
    install,
    is_async_client,
    parser_of,
    quick_steps,
    respond,
    response_headers,
    target_of,
    unbind,
)

if TYPE_CHECKING:
    from ..api import Engine

__all__ = ["bind", "dummy_client", "dummy_session", "local_client", "local_resource", "unbind"]


class Responder(ResponderBase):
    """One bound client's handlers: ``before-call`` (the quick path) and ``before-send``."""

    def before_call(
        self, model: OperationModel, params: dict[str, Any], request_signer: Any, **_kwargs: Any
    ) -> Answered | None:
        self.keep(None)
        engine = self.current_engine()
        if engine is None:
            return None
        steps = quick_steps(
            engine, self.region, model, params, request_signer, respond, self._shortcut
        )
        try:
            step = next(steps)
            while True:
                if type(step) is Call:
                    answer: Any = wire_answer(
                        step.engine, step.target, step.body, step.region, step.request
                    )
                elif type(step) is Emit:
                    answer = self._emit(step.event, **step.kwargs)
                else:
                    assert type(step) is Parse
                    answer = self._parser.parse(step.response, step.shape)
                step = steps.send(answer)
        except StopIteration as stop:
            return self.finish(stop.value)

    def before_send(self, request: AWSPreparedRequest, **_kwargs: Any) -> AWSResponse | None:
        body = body_of(request)
        kept = self.take_kept(body)
        if kept is not None:
            return kept  # the first attempt of a call the quick path handed over
        engine = self.current_engine()
        if engine is None:
            return None
        status, payload = wire_call(engine, target_of(request), body, self.region)
        return respond(
            request.url, status, payload, response_headers(payload, engine.clock.http_date())
        )


def bind(client: Any, engine: Engine, *, full_stack: bool = False) -> Any:
    """Answer every request of boto3 ``client`` with ``engine``; returns the client.

    The engine region is the client's region. Works for ``dynamodb`` and ``dynamodbstreams``
    clients (dispatch is on the ``X-Amz-Target`` prefix), and for aiobotocore clients too
    (see :mod:`.aio`). Binding again replaces the engine.
    ``full_stack=True`` sends every call through botocore's HTTP half too (signing,
    ``before-send`` hooks, the retry handler on every answer); by default only answers
    botocore might retry do (see the module docs). Either way the client needs credentials,
    as any boto3 client does (any will do: see :func:`local_client`).
    """
    region = client.meta.region_name or engine.default_region
    if is_async_client(client):
        from .aio import AioResponder

        kind: type[ResponderBase] = AioResponder
    else:
        kind = Responder
    responder = kind(engine, region, parser_of(client), client.meta.events.emit)
    return install(client, responder, full_stack=full_stack)


def follow(client: Any, engine: Callable[[], Engine | None]) -> Any:
    """Answer every request of ``client`` (boto3 or aiobotocore) with the engine ``engine()``
    returns at the time of the call, or let the call go to its endpoint when it returns
    ``None``; returns the client. The engine region is the client's (``us-east-1`` when it has
    none). For a redirect that outlives any one engine (``firstwrite.testing.mock_dynamodb``);
    otherwise :func:`bind` is the same with one engine."""
    region = client.meta.region_name or "us-east-1"
    if is_async_client(client):
        from .aio import AioResponder

        base: type[ResponderBase] = AioResponder
    else:
        base = Responder
    responder = _following(base, engine)(None, region, parser_of(client), client.meta.events.emit)
    return install(client, responder)


_FOLLOWING: dict[tuple[type[ResponderBase], Callable[[], Engine | None]], type[ResponderBase]] = {}


def _following(
    base: type[ResponderBase], source: Callable[[], Engine | None]
) -> type[ResponderBase]:
    """``base`` answering with ``source()``'s engine instead of a fixed one (one class per
    base and source)."""
    kind = _FOLLOWING.get((base, source))
    if kind is None:

        def current_engine(_self: object) -> Engine | None:
            return source()

        name = f"Redirected{base.__name__}"
        kind = _FOLLOWING[base, source] = type(name, (base,), {"current_engine": current_engine})
    return kind


def dummy_session(region: str = "us-east-1") -> botocore.session.Session:
    """A botocore session that never reads the machine's AWS setup.

    Every configuration variable is botocore's built-in default (no environment variables, no
    config or credential files, no profile), ``defaults_mode`` is ``legacy`` (``auto`` would
    query IMDS), configured endpoint URLs are ignored, and the credentials are static dummies
    (no credential chain, no IMDS). Its clients share the exception classes of
    :class:`~firstwrite.engine.direct.client.DirectClient`, and every dummy session shares one
    botocore data loader (:func:`~.steps.shared_loader`), so a client does not re-parse
    botocore's model files; handlers, credentials and region stay each session's own.
    """
    session = botocore.session.Session()
    configure_dummy(session, region)
    return session


_SESSIONS_LOCK = threading.Lock()
_SESSIONS: dict[str, boto3.session.Session] = {}


def dummy_client(
    service_name: str = "dynamodb", region: str = "us-east-1", **client_kwargs: Any
) -> Any:
    """A boto3 client of a :func:`dummy_session`, not bound to any engine (pass
    ``endpoint_url`` to reach a server, or :func:`bind` it).

    Its session is one per region, made once per process (a new session registers botocore's
    hundreds of handlers again, most of what a client then costs); each client still has its
    own copy of those handlers, so :func:`bind` and other per-client hooks stay its own.
    ``client_kwargs`` go to ``boto3.session.Session.client``. Safe from any thread.
    """
    with _SESSIONS_LOCK:  # botocore does not promise that one session makes clients at once
        return _shared_session(region).client(service_name, region_name=region, **client_kwargs)


def _shared_session(region: str) -> boto3.session.Session:
    """The process's boto3 session over a dummy session of ``region`` (call with the lock)."""
    session = _SESSIONS.get(region)
    if session is None:
        session = _SESSIONS[region] = boto3.session.Session(botocore_session=dummy_session(region))
    return session


def local_client(
    engine: Engine | None = None,
    region: str = "us-east-1",
    service_name: str = "dynamodb",
    **client_kwargs: Any,
) -> Any:
    """A real boto3 client answered in-process by ``engine`` (a new in-memory one if omitted).

    ``client_kwargs`` go to ``boto3.session.Session.client`` (e.g. ``config=Config(...)``);
    botocore's defaults apply otherwise, retries included, exactly as against AWS.
    Works on a machine with no AWS configuration at all. Safe from any thread.
    """
    if engine is None:
        from ..api import Engine

        engine = Engine()
    return bind(dummy_client(service_name, region, **client_kwargs), engine)


def local_resource(
    engine: Engine | None = None,
    region: str = "us-east-1",
    **resource_kwargs: Any,
) -> Any:
    """``boto3.resource("dynamodb")`` whose ``meta.client`` is bound to ``engine``."""
    if engine is None:
        from ..api import Engine

        engine = Engine()
    with _SESSIONS_LOCK:
        resource = _shared_session(region).resource(
            "dynamodb", region_name=region, **resource_kwargs
        )
    bind(resource.meta.client, engine)
    return resource
