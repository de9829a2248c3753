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

Use :class:`~firstwrite.engine.client.DirectClient` when per-call overhead matters more than
exercising the SDK.
"""

from __future__ import annotations

import os
import threading
import zlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import boto3
import botocore.session
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.configprovider import (
    BOTOCORE_DEFAUT_SESSION_VARIABLES,
    ConfigValueStore,
    ConstantProvider,
)
from botocore.model import OperationModel
from botocore.parsers import create_parser

from .client import exceptions_factory
from .wire import CONTENT_TYPE, new_request_id, wire_call

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


def _headers(payload: bytes) -> dict[str, str]:
    return {
        "x-amzn-RequestId": new_request_id(),
        "Content-Type": CONTENT_TYPE,
        "Content-Length": str(len(payload)),
        "x-amz-crc32": str(zlib.crc32(payload)),
    }


class _Responder:
    """One bound client's handlers: ``before-call`` (the quick path) and ``before-send``."""

    def __init__(self, engine: Engine, region: str, parser: Any, emit: Any) -> None:
        self.engine = engine
        self.region = region
        self._parser = parser
        self._emit = emit
        # The first answer of a call the quick path handed to the full path. It is kept per
        # thread, because botocore runs a call's before-call and before-send on one thread,
        # one after the other.
        self._kept = threading.local()

    def before_call(
        self, model: OperationModel, params: dict[str, Any], request_signer: Any, **_kwargs: Any
    ) -> tuple[AWSResponse, dict[str, Any]] | None:
        kept = self._kept
        kept.answer = None
        if getattr(request_signer, "_credentials", True) is None:
            return None  # no credentials: botocore's signer raises NoCredentialsError
        body = params["body"]
        status, payload = wire_call(
            self.engine, params["headers"].get("X-Amz-Target"), body, self.region
        )
        http = AWSResponse(params["url"], status, _headers(payload), _Raw(payload))
        response = {
            "headers": http.headers,
            "status_code": status,
            "body": payload,
            "context": {"operation_name": model.name},
        }
        customized: dict[str, Any] = {}
        self._emit(
            f"before-parse.{model.service_model.service_id.hyphenize()}.{model.name}",
            operation_model=model,
            response_dict=response,
            customized_response_dict=customized,
        )
        parsed: dict[str, Any] = self._parser.parse(response, model.output_shape)
        if customized:
            parsed.update(customized)
        if status != 200:
            code = parsed.get("Error", {}).get("Code")
            if status != 400 or code not in FINAL_ERRORS:
                kept.answer = (body, http)
                return None  # botocore's full path, retry handler included, takes it from here
            shape = model.service_model.shape_for_error_code(code)
            if shape is not None:  # the error's modeled members (Item, CancellationReasons)
                parsed.update(self._parser.parse(response, shape))
        parsed["ResponseMetadata"]["RetryAttempts"] = 0
        return http, parsed

    def before_send(self, request: AWSPreparedRequest, **_kwargs: Any) -> AWSResponse:
        body = request.body
        if body is not None and not isinstance(body, (bytes, str)):
            body = body.read()  # a file-like body (never for JSON protocols, but harmless)
        answer = getattr(self._kept, "answer", None)
        if answer is not None:
            self._kept.answer = None
            kept_body, http = answer
            if kept_body == body:
                return http  # the first attempt of a call the quick path handed over
        target = request.headers.get("X-Amz-Target")
        if isinstance(target, bytes):
            target = target.decode("ascii", "replace")
        status, payload = wire_call(self.engine, target, body, self.region)
        return AWSResponse(request.url, status, _headers(payload), _Raw(payload))


def _parser_of(client: Any) -> Any:
    """The client's own response parser (botocore's JSON parser if it has none we can see)."""
    parser = getattr(client, "_response_parser", None)
    if parser is None:
        parser = create_parser(client.meta.service_model.resolved_protocol)
    return parser


def bind(client: Any, engine: Engine, *, full_stack: bool = False) -> Any:
    """Answer every request of boto3 ``client`` with ``engine``; returns the client.

    The engine region is the client's region. Works for ``dynamodb`` and ``dynamodbstreams``
    clients (dispatch is on the ``X-Amz-Target`` prefix). Binding again replaces the engine.
    ``full_stack=True`` sends every call through botocore's HTTP half too (signing,
    ``before-send`` hooks, the retry handler on every answer); by default only answers
    botocore might retry do (see the module docs). Either way the client needs credentials,
    as any boto3 client does (any will do: see :func:`local_client`).
    """
    region = client.meta.region_name or engine.default_region
    events = client.meta.events
    unbind(client)
    responder = _Responder(engine, region, _parser_of(client), events.emit)
    events.register_first("before-send", responder.before_send, unique_id=_HANDLER_ID)
    if not full_stack:
        # Last, so that the caller's own before-call hooks (counters, stubs) still run first.
        events.register_last("before-call", responder.before_call, unique_id=_QUICK_ID)
    return client


def unbind(client: Any) -> Any:
    """Undo :func:`bind`: the client talks to its endpoint again."""
    client.meta.events.unregister("before-send", unique_id=_HANDLER_ID)
    client.meta.events.unregister("before-call", unique_id=_QUICK_ID)
    return client


def dummy_session(region: str = "us-east-1") -> botocore.session.Session:
    """A botocore session that never reads the machine's AWS setup.

    Every configuration variable is botocore's built-in default (no environment variables, no
    config or credential files, no profile), ``defaults_mode`` is ``legacy`` (``auto`` would
    query IMDS), configured endpoint URLs are ignored, and the credentials are static dummies
    (no credential chain, no IMDS). Its clients share the exception classes of
    :class:`~firstwrite.engine.client.DirectClient`.
    """
    session = botocore.session.Session()
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
