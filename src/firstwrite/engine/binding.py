"""Bind real boto3/botocore clients to an in-process engine: no sockets, the whole SDK stack.

``bind(client, engine)`` hooks botocore's ``before-send`` event: the request is built, validated,
serialised and signed by botocore exactly as for AWS, then answered by
``engine.execute(..., wire=True)`` with an ``AWSResponse`` carrying DynamoDB's JSON body and
headers. botocore's own parsers, retry handlers, CRC32 check and exception classes do the rest,
so application code sees precisely what it would see against DynamoDB over HTTP.

Use :class:`~firstwrite.engine.client.DirectClient` when per-call overhead matters more than
exercising the SDK.
"""

from __future__ import annotations

import os
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

from .client import CONTENT_TYPE, exceptions_factory, new_request_id
from .server import wire_call

if TYPE_CHECKING:
    from .api import Engine

__all__ = ["bind", "dummy_session", "local_client", "local_resource", "unbind"]

_HANDLER_ID = "firstwrite-engine-binding"
DUMMY_ACCESS_KEY = "AKIDFIRSTWRITELOCAL"
DUMMY_SECRET_KEY = "firstwrite-local-secret"


class _Raw:
    """The ``raw`` object botocore reads an ``AWSResponse`` body from."""

    __slots__ = ("_body",)

    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_kwargs: Any) -> Iterator[bytes]:
        yield self._body


class _Responder:
    """The ``before-send`` handler: one per bound client."""

    def __init__(self, engine: Engine, region: str) -> None:
        self.engine = engine
        self.region = region

    def __call__(self, request: AWSPreparedRequest, **_kwargs: Any) -> AWSResponse:
        target = request.headers.get("X-Amz-Target")
        if isinstance(target, bytes):
            target = target.decode("ascii", "replace")
        body = request.body
        if body is not None and not isinstance(body, (bytes, str)):
            body = body.read()  # a file-like body (never for JSON protocols, but harmless)
        status, payload = wire_call(self.engine, target, body, self.region)
        headers = {
            "x-amzn-RequestId": new_request_id(),
            "Content-Type": CONTENT_TYPE,
            "Content-Length": str(len(payload)),
            "x-amz-crc32": str(zlib.crc32(payload)),
        }
        return AWSResponse(request.url, status, headers, _Raw(payload))


def bind(client: Any, engine: Engine) -> Any:
    """Answer every request of boto3 ``client`` with ``engine``; returns the client.

    The engine region is the client's region. Works for ``dynamodb`` and ``dynamodbstreams``
    clients (dispatch is on the ``X-Amz-Target`` prefix). Binding again replaces the engine.
    The client still signs requests, so it needs credentials (any will do: see
    :func:`local_client`).
    """
    region = client.meta.region_name or engine.default_region
    events = client.meta.events
    events.unregister("before-send", unique_id=_HANDLER_ID)
    events.register_first("before-send", _Responder(engine, region), unique_id=_HANDLER_ID)
    return client


def unbind(client: Any) -> Any:
    """Undo :func:`bind`: the client talks to its endpoint again."""
    client.meta.events.unregister("before-send", unique_id=_HANDLER_ID)
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
