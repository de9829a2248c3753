"""Bind real boto3/botocore clients to an in-process engine: no sockets, botocore's own code.

``bind(client, engine)`` answers each call at botocore's ``before-call`` event. By then botocore
has done the whole client half of a call exactly as for AWS: parameter hooks, validation,
endpoint resolution and JSON serialisation. The engine answers the serialised body
(``wire_call``, the HTTP server's code path), and botocore's own parser, for that client, turns
the answer into the response or into the modeled error that ``_make_api_call`` raises. The
``after-call`` hooks run as usual.

What the quick path leaves out is botocore's HTTP half: signing, the ``request-created`` and
``before-send`` hooks, the CRC32 check and the retry handler. On a loopback engine they do
nothing useful, and skipping them halves the cost of a call. Only answers that botocore
never retries take the quick path. Any other answer (a throttle, a 500, an unknown error code)
is kept for the call's first attempt, and the call goes on through botocore's full path:
``before-send`` returns the kept answer and botocore's retry handler decides, as against AWS.
Every retry is a fresh engine call. ``bind(client, engine, full_stack=True)`` sends every call
through the full path. Use that to test your own ``before-send`` or signing hooks.

The quick path is written once, as a generator of the steps that are coroutines on aiobotocore
(:func:`quick_steps`); :class:`Responder` drives it with plain calls, and
:mod:`.aio_binding` with ``await``, so both kinds of client take the same decisions.

Use :class:`~firstwrite.engine.client.DirectClient` when per-call overhead matters more than
exercising the SDK.
"""

from __future__ import annotations

import contextvars
import inspect
import os
import zlib
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias, cast

import boto3
import botocore.session
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.configprovider import (
    BOTOCORE_DEFAUT_SESSION_VARIABLES,
    ConfigValueStore,
    ConstantProvider,
)
from botocore.model import OperationModel, Shape
from botocore.parsers import create_parser

from .client import CONTENT_TYPE, exceptions_factory, new_request_id
from .server import wire_call

if TYPE_CHECKING:
    from .api import Engine

__all__ = ["bind", "dummy_session", "local_client", "local_resource", "unbind"]

_HANDLER_ID = "firstwrite-engine-binding"
_QUICK_ID = "firstwrite-engine-binding-quick"
DUMMY_ACCESS_KEY = "AKIDFIRSTWRITELOCAL"
DUMMY_SECRET_KEY = "firstwrite-local-secret"


class _Raw:
    """The ``raw`` object botocore reads an ``AWSResponse`` body from."""

    __slots__ = ("_body",)

    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_kwargs: Any) -> Iterator[bytes]:
        yield self._body


# Error codes that no botocore retry mode (legacy, standard, adaptive) retries, and that the
# engine answers with HTTP 400. Only these, and successes, take the quick path. Throttles,
# TransactionConflict, 5xx and any code not listed go through botocore's retry handler.
FINAL_ERRORS = frozenset(
    {
        "ConditionalCheckFailedException",
        "ValidationException",
        "ResourceNotFoundException",
        "ResourceInUseException",
        "TransactionCanceledException",
        "IdempotentParameterMismatchException",
        "ItemCollectionSizeLimitExceededException",
        "SerializationException",
        "UnknownOperationException",
        "ExpiredIteratorException",
        "TrimmedDataAccessException",
        "UnrecognizedClientException",
        "MissingAuthenticationTokenException",
        "InvalidSignatureException",
        "AccessDeniedException",
    }
)


def response_headers(payload: bytes) -> dict[str, str]:
    return {
        "x-amzn-RequestId": new_request_id(),
        "Content-Type": CONTENT_TYPE,
        "Content-Length": str(len(payload)),
        "x-amz-crc32": str(zlib.crc32(payload)),
    }


def _respond(url: str, status: int, payload: bytes) -> AWSResponse:
    return AWSResponse(url, status, response_headers(payload), _Raw(payload))


# -- the quick path, once for sync and async clients ----------------------------------------


@dataclass(slots=True)
class Call:
    """Step: answer one wire request with the engine (``wire_call``'s arguments)."""

    engine: Engine
    target: str | None
    body: bytes | str | None
    region: str


@dataclass(slots=True)
class Emit:
    """Step: emit a botocore event on the client's event emitter."""

    event: str
    kwargs: dict[str, Any]


@dataclass(slots=True)
class Parse:
    """Step: parse a response dict with the client's parser; the step's answer is the dict."""

    response: dict[str, Any]
    shape: Shape | None


@dataclass(slots=True)
class Handover:
    """A call for botocore's full path, with its first answer kept for its ``before-send``."""

    body: bytes | str | None
    http: AWSResponse


Step: TypeAlias = Call | Emit | Parse
Answered: TypeAlias = tuple[AWSResponse, dict[str, Any]]


def quick_steps(
    engine: Engine,
    region: str,
    model: OperationModel,
    params: dict[str, Any],
    request_signer: Any,
    respond: Callable[[str, int, bytes], AWSResponse],
) -> Generator[Step, Any, Answered | Handover | None]:
    """The quick path of one call, as the steps a driver performs (each step's result is sent
    back in). Returns the ``before-call`` answer, or a :data:`Handover` for botocore's full
    path, or ``None`` when the full path must run without one (no credentials)."""
    if getattr(request_signer, "_credentials", True) is None:
        return None  # no credentials: botocore's signer raises NoCredentialsError
    body = params["body"]
    status, payload = yield Call(engine, params["headers"].get("X-Amz-Target"), body, region)
    http = respond(params["url"], status, payload)
    response = {
        "headers": http.headers,
        "status_code": status,
        "body": payload,
        "context": {"operation_name": model.name},
    }
    customized: dict[str, Any] = {}
    yield Emit(
        f"before-parse.{model.service_model.service_id.hyphenize()}.{model.name}",
        {
            "operation_model": model,
            "response_dict": response,
            "customized_response_dict": customized,
        },
    )
    parsed: dict[str, Any] = yield Parse(response, model.output_shape)
    if customized:
        parsed.update(customized)
    if status != 200:
        code = parsed.get("Error", {}).get("Code")
        if status != 400 or code not in FINAL_ERRORS:
            # botocore's full path, retry handler included, takes it from here
            return Handover(body, http)
        shape = model.service_model.shape_for_error_code(code)
        if shape is not None:  # the error's modeled members (Item, CancellationReasons)
            parsed.update((yield Parse(response, shape)))
    parsed["ResponseMetadata"]["RetryAttempts"] = 0
    return http, parsed


# The first answer of a call the quick path handed to the full path, with the responder that
# kept it. botocore runs a call's before-call and before-send one after the other in one thread
# (aiobotocore: one task), so a context variable holds it for exactly that call.
_KEPT: contextvars.ContextVar[tuple[ResponderBase, Handover] | None] = contextvars.ContextVar(
    "firstwrite_binding_kept", default=None
)


def target_of(request: AWSPreparedRequest) -> str | None:
    target: str | bytes | None = request.headers.get("X-Amz-Target")
    if isinstance(target, bytes):
        return target.decode("ascii", "replace")
    return target


def body_of(request: AWSPreparedRequest) -> bytes | str | None:
    body: Any = request.body
    if body is not None and not isinstance(body, (bytes, str)):
        body = body.read()  # a file-like body (never for JSON protocols, but harmless)
    return cast("bytes | str | None", body)


class ResponderBase:
    """What sync and async responders share: the engine, the region, the kept first answer."""

    def __init__(self, engine: Engine | None, region: str, parser: Any, emit: Any) -> None:
        self.engine = engine
        self.region = region
        self._parser = parser
        self._emit = emit

    def current_engine(self) -> Engine | None:
        """The engine answering this call; ``None`` lets the call go to its endpoint."""
        return self.engine

    def keep(self, handover: Handover | None) -> None:
        """Keep a handed-over call's first answer (``None``: forget any kept one)."""
        if handover is not None or _KEPT.get() is not None:
            _KEPT.set(None if handover is None else (self, handover))

    def take_kept(self, body: bytes | str | None) -> AWSResponse | None:
        """The kept first answer if this call is the one that kept it (same responder, body)."""
        kept = _KEPT.get()
        if kept is None:
            return None
        _KEPT.set(None)
        owner, handover = kept
        return handover.http if owner is self and handover.body == body else None

    def finish(self, result: Answered | Handover | None) -> Answered | None:
        """The ``before-call`` answer for the quick path's result; keeps a handover."""
        if isinstance(result, Handover):
            self.keep(result)
            return None
        return result


class Responder(ResponderBase):
    """One bound client's handlers: ``before-call`` (the quick path) and ``before-send``."""

    def before_call(
        self, model: OperationModel, params: dict[str, Any], request_signer: Any, **_kwargs: Any
    ) -> Answered | None:
        self.keep(None)
        engine = self.current_engine()
        if engine is None:
            return None
        steps = quick_steps(engine, self.region, model, params, request_signer, _respond)
        try:
            step = next(steps)
            while True:
                if type(step) is Call:
                    answer: Any = wire_call(step.engine, step.target, step.body, step.region)
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
        return _respond(request.url, status, payload)


def parser_of(client: Any, factory: Callable[[str], Any] = create_parser) -> Any:
    """The client's own response parser (``factory``'s for its protocol if we cannot see it)."""
    parser = getattr(client, "_response_parser", None)
    if parser is None:
        parser = factory(client.meta.service_model.resolved_protocol)
    return parser


def install(client: Any, responder: Any, *, full_stack: bool = False) -> Any:
    """Register ``responder``'s handlers on ``client`` in place of any earlier binding."""
    events = client.meta.events
    unbind(client)
    events.register_first("before-send", responder.before_send, unique_id=_HANDLER_ID)
    if not full_stack:
        # Last, so that the caller's own before-call hooks (counters, stubs) still run first.
        events.register_last("before-call", responder.before_call, unique_id=_QUICK_ID)
    return client


def is_async_client(client: Any) -> bool:
    """Whether ``client`` is an aiobotocore client (its calls are coroutines)."""
    return inspect.iscoroutinefunction(getattr(type(client), "_make_api_call", None))


def bind(client: Any, engine: Engine, *, full_stack: bool = False) -> Any:
    """Answer every request of boto3 ``client`` with ``engine``; returns the client.

    The engine region is the client's region. Works for ``dynamodb`` and ``dynamodbstreams``
    clients (dispatch is on the ``X-Amz-Target`` prefix), and for aiobotocore clients too
    (see :mod:`.aio_binding`). Binding again replaces the engine.
    ``full_stack=True`` sends every call through botocore's HTTP half too (signing,
    ``before-send`` hooks, the retry handler on every answer); by default only answers
    botocore might retry do (see the module docs). Either way the client needs credentials,
    as any boto3 client does (any will do: see :func:`local_client`).
    """
    region = client.meta.region_name or engine.default_region
    if is_async_client(client):
        from .aio_binding import AioResponder

        kind: type[ResponderBase] = AioResponder
    else:
        kind = Responder
    responder = kind(engine, region, parser_of(client), client.meta.events.emit)
    return install(client, responder, full_stack=full_stack)


def unbind(client: Any) -> Any:
    """Undo :func:`bind`: the client talks to its endpoint again."""
    client.meta.events.unregister("before-send", unique_id=_HANDLER_ID)
    client.meta.events.unregister("before-call", unique_id=_QUICK_ID)
    return client


def configure_dummy(session: botocore.session.Session, region: str) -> None:
    """Make ``session`` (botocore's or aiobotocore's) one that never reads the machine's AWS
    setup: see :func:`dummy_session`."""
    overrides: dict[str, Any] = {
        "config_file": os.devnull,
        "credentials_file": os.devnull,
        "profile": None,
        "region": region,
        "defaults_mode": "legacy",
        "ignore_configured_endpoint_urls": True,
        "metadata_service_num_attempts": 0,
    }
    mapping = {
        name: ConstantProvider(overrides.get(name, spec[2]))
        for name, spec in BOTOCORE_DEFAUT_SESSION_VARIABLES.items()
    }
    session.register_component("config_store", ConfigValueStore(mapping=mapping))
    session.set_credentials(DUMMY_ACCESS_KEY, DUMMY_SECRET_KEY)
    session._internal_components.register_component("exceptions_factory", exceptions_factory())


def dummy_session(region: str = "us-east-1") -> botocore.session.Session:
    """A botocore session that never reads the machine's AWS setup.

    Every configuration variable is botocore's built-in default (no environment variables, no
    config or credential files, no profile), ``defaults_mode`` is ``legacy`` (``auto`` would
    query IMDS), configured endpoint URLs are ignored, and the credentials are static dummies
    (no credential chain, no IMDS). Its clients share the exception classes of
    :class:`~firstwrite.engine.client.DirectClient`.
    """
    session = botocore.session.Session()
    configure_dummy(session, region)
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
    Works on a machine with no AWS configuration at all.
    """
    if engine is None:
        from .api import Engine

        engine = Engine()
    session = boto3.session.Session(botocore_session=dummy_session(region))
    client = session.client(service_name, region_name=region, **client_kwargs)
    return bind(client, engine)


def local_resource(
    engine: Engine | None = None,
    region: str = "us-east-1",
    **resource_kwargs: Any,
) -> Any:
    """``boto3.resource("dynamodb")`` whose ``meta.client`` is bound to ``engine``."""
    if engine is None:
        from .api import Engine

        engine = Engine()
    session = boto3.session.Session(botocore_session=dummy_session(region))
    resource = session.resource("dynamodb", region_name=region, **resource_kwargs)
    bind(resource.meta.client, engine)
    return resource
