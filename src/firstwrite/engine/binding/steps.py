"""What the boto3 and aiobotocore bindings share: the quick path's steps and responders' base.

The quick path is written once, as a generator of the steps that are coroutines on aiobotocore
(:func:`quick_steps`); :mod:`.sync` drives it with plain calls and :mod:`.aio` with
``await``, so both kinds of client take the same decisions. This module also installs their
handlers on a client. Neither imports the other's responder from here, so the two modules never
import each other in a circle.
"""

from __future__ import annotations

import contextvars
import inspect
import os
import threading
import zlib
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias, cast

import botocore.session
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.configprovider import (
    BOTOCORE_DEFAUT_SESSION_VARIABLES,
    ConfigValueStore,
    ConstantProvider,
)
from botocore.loaders import Loader
from botocore.model import OperationModel, Shape
from botocore.parsers import create_parser

from ..client_exceptions import exceptions_factory
from ..errors import DynamoDBError
from ..wire import CONTENT_TYPE, MAX_BODY_BYTES, BodyTooLarge, decode_body, new_request_id
from . import request as binding_request
from .parse import Answer, Shortcut
from .serialize import parameters_of
from .validate import QuickValidation

if TYPE_CHECKING:
    from ..api import Engine

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
        # PartiQL (an INSERT of an existing key), backups and point-in-time recovery
        "DuplicateItemException",
        "BackupNotFoundException",
        "BackupInUseException",
        "TableNotFoundException",
        "TableAlreadyExistsException",
        "TableInUseException",
        "InvalidRestoreTimeException",
        "PointInTimeRecoveryUnavailableException",
        "ContinuousBackupsUnavailableException",
    }
)


def response_headers(payload: bytes, date: str) -> dict[str, str]:
    """The headers of an engine answer, as DynamoDB's: ``date`` is the engine clock's
    (:meth:`~firstwrite.engine.clock.Clock.http_date`), which a client reads DynamoDB's time
    from (the idempotency layer's clock-skew estimate)."""
    return {
        "Date": date,
        "x-amzn-RequestId": new_request_id(),
        "Content-Type": CONTENT_TYPE,
        "Content-Length": str(len(payload)),
        "x-amz-crc32": str(zlib.crc32(payload)),
    }


def respond(url: str, status: int, payload: bytes, headers: dict[str, str]) -> AWSResponse:
    """The ``AWSResponse`` of an engine answer (``headers``: its :func:`response_headers`)."""
    return AWSResponse(url, status, headers, _Raw(payload))


def lowered(headers: dict[str, str]) -> dict[str, str]:
    """``lowercase_dict`` of an ``AWSResponse`` made with ``headers`` (its ``HeadersDict``
    keeps their order and spelling)."""
    return {name.lower(): value for name, value in headers.items()}


# -- the quick path, once for sync and async clients ----------------------------------------


@dataclass(slots=True)
class Call:
    """Step: answer one wire request with the engine (:func:`.parse.wire_answer`'s
    arguments); the step's answer is its :class:`~.parse.Answer`."""

    engine: Engine
    target: str | None
    body: bytes | str | None
    region: str
    request: dict[str, Any] | None = None  # the body's JSON value, when known already


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
    respond: Callable[[str, int, bytes, dict[str, str]], AWSResponse],
    shortcut: Shortcut | None = None,
) -> Generator[Step, Any, Answered | Handover | None]:
    """The quick path of one call, as the steps a driver performs (each step's result is sent
    back in). Returns the ``before-call`` answer, or a :data:`Handover` for botocore's full
    path, or ``None`` when the full path must run without one (no credentials).

    With a ``shortcut`` (for the client's parser), a parse whose result the shortcut can build
    from the engine's own answer skips the parser (see :mod:`.parse`)."""
    if getattr(request_signer, "_credentials", True) is None:
        return None  # no credentials: botocore's signer raises NoCredentialsError
    body = params["body"]
    target = params["headers"].get("X-Amz-Target")
    reply: Answer = yield Call(engine, target, body, region, parameters_of(body, model))
    status, payload = reply.status, reply.payload
    headers = response_headers(payload, engine.clock.http_date())
    http = respond(params["url"], status, payload, headers)
    response = {
        "headers": http.headers,
        "status_code": status,
        "body": payload,
        "context": {"operation_name": model.name},
    }
    customized: dict[str, Any] = {}
    ran = yield Emit(
        f"before-parse.{model.service_model.service_id.hyphenize()}.{model.name}",
        {
            "operation_model": model,
            "response_dict": response,
            "customized_response_dict": customized,
        },
    )
    # No before-parse handler ran (the emitter answers the list of those that did): the
    # response's headers are still the ones it was made with, already known lowercased.
    known = None if ran else lowered(headers)
    output = model.output_shape
    parsed = None if shortcut is None else shortcut.parse(response, output, reply, known)
    if parsed is None:
        parsed = yield Parse(response, output)
    if customized:
        parsed.update(customized)
    if status != 200:
        code = parsed.get("Error", {}).get("Code")
        if status != 400 or code not in FINAL_ERRORS:
            # botocore's full path, retry handler included, takes it from here
            return Handover(body, http)
        shape = model.service_model.shape_for_error_code(code)
        if shape is not None:  # the error's modeled members (Item, CancellationReasons)
            members = None if shortcut is None else shortcut.parse(response, shape, reply, known)
            if members is None:
                members = yield Parse(response, shape)
            parsed.update(members)
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
    """The request's body as the engine reads it: decompressed when botocore compressed it
    (``requestcompression``, applied after ``before-call``), as the HTTP server does."""
    body: Any = request.body
    if body is not None and not isinstance(body, (bytes, str)):
        body = body.read()  # a file-like body (never for JSON protocols, but harmless)
    coding: bytes | str | None = request.headers.get("Content-Encoding")
    if coding is not None and isinstance(body, bytes):
        if isinstance(coding, str):
            coding = coding.encode("latin-1")
        try:
            body = decode_body(body, coding, MAX_BODY_BYTES)
        except (DynamoDBError, BodyTooLarge):
            pass  # answered as the bytes they are: not JSON
    return cast("bytes | str | None", body)


class ResponderBase:
    """What sync and async responders share: the engine, the region, the kept first answer."""

    def __init__(self, engine: Engine | None, region: str, parser: Any, emit: Any) -> None:
        self.engine = engine
        self.region = region
        self._parser = parser
        self._shortcut = Shortcut.for_parser(parser)
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
        # botocore's validator's verdict, compiled (see .binding_validate); full_stack keeps
        # botocore's own walk, as it keeps every other part of botocore's path.
        client._serializer = QuickValidation.wrap(client._serializer)
        if not is_async_client(client):
            # the User-Agent and endpoint parameters, compiled (see .binding_request)
            binding_request.install(client)
    return client


def is_async_client(client: Any) -> bool:
    """Whether ``client`` is an aiobotocore client (its calls are coroutines)."""
    return inspect.iscoroutinefunction(getattr(type(client), "_make_api_call", None))


def unbind(client: Any) -> Any:
    """Undo :func:`.sync.bind`: the client talks to its endpoint again."""
    client.meta.events.unregister("before-send", unique_id=_HANDLER_ID)
    client.meta.events.unregister("before-call", unique_id=_QUICK_ID)
    serializer = getattr(client, "_serializer", None)
    if isinstance(serializer, QuickValidation):
        client._serializer = serializer.decorated
    binding_request.uninstall(client)
    return client


class _SearchPaths(list[str]):
    """A loader's search paths that keep one copy of each: every ``boto3.Session`` made over a
    botocore session appends boto3's data directory to its loader's paths, which would grow a
    shared loader's list (and the directories it lists on each lookup) without bound."""

    def append(self, path: str) -> None:
        if path not in self:
            super().append(path)

    def extend(self, paths: Iterable[str]) -> None:
        for path in paths:
            self.append(path)


_LOADER_LOCK = threading.Lock()
_loader: Loader | None = None


def shared_loader() -> Loader:
    """The one botocore data loader of every dummy session in this process.

    A new botocore session re-reads and re-parses the service model, endpoints and partitions
    files on its first client, most of that client's cost. The loader holds only that read-only
    data (and caches it), which the clients of one session share in the same way, so the dummy
    sessions share one. Its search paths are botocore's defaults (a dummy session ignores
    ``AWS_DATA_PATH``) plus boto3's, each once.
    """
    global _loader
    with _LOADER_LOCK:
        if _loader is None:
            _loader = Loader(extra_search_paths=_SearchPaths())
        return _loader


def configure_dummy(session: botocore.session.Session, region: str) -> None:
    """Make ``session`` (botocore's or aiobotocore's) one that never reads the machine's AWS
    setup: see :func:`.sync.dummy_session`. It shares :func:`shared_loader`."""
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
    session.register_component("data_loader", shared_loader())
