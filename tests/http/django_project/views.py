"""The test project's views: each POST records its side effect under the body's ``id`` (GET
``/effects/<id>`` counts them) and sleeps ``delay`` seconds, so that twins race."""

from __future__ import annotations

import asyncio
import collections
import json
import os
import threading
import time
import uuid
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from rest_framework.decorators import api_view
from rest_framework.response import Response
from rest_framework.views import APIView

from firstwrite.http import reconciled_response
from firstwrite.http.django import idempotency
from firstwrite.http.django import idempotent as _idempotent

_effects: collections.Counter[str] = collections.Counter()
_lock = threading.Lock()


def idempotent(*args: Any, **kwargs: Any) -> Any:
    if os.environ.get("FIRSTWRITE_DJANGO_UNGUARDED") == "1":
        return (lambda view: view) if not args else args[0]
    return _idempotent(*args, **kwargs)


_charged: set[str] = set()  # the provider's ledger: references charged


def charge(request: HttpRequest) -> HttpResponse:
    """Marks a recovery point, charges (one effect), then fails as a provider timeout would:
    Django answers 500, the middleware releases the key, its marks stay."""
    from firstwrite.idempotency import recovery_point

    document = json.loads(request.body)
    reference = f"django-{document['id']}"
    if os.environ.get("FIRSTWRITE_DJANGO_UNGUARDED") != "1":
        recovery_point("charge", reference)
    _record(document)
    _charged.add(reference)
    raise TimeoutError(f"the provider did not answer for {reference}")


def reconcile(interrupted: Any) -> Any:
    """``RECONCILE``: the charge looked up by the mark's reference."""
    from firstwrite.idempotency import NotDone

    reference = interrupted.last.reference
    if reference in _charged:
        body = json.dumps({"reference": reference, "reconciled": True}).encode()
        return reconciled_response(201, body, [("content-type", "application/json")])
    return NotDone()


def tenant(request: HttpRequest) -> str | None:
    return request.headers.get("X-Tenant")


def _record(document: dict[str, Any]) -> int:
    with _lock:
        _effects[document["id"]] += 1
        count = sum(_effects.values())
    time.sleep(float(document.get("delay", 0)))
    return count


def create_order(request: HttpRequest) -> HttpResponse:
    document = json.loads(request.body)
    serial = _record(document)
    return JsonResponse({"serial": serial, **document}, status=201)


async def create_order_async(request: HttpRequest) -> HttpResponse:
    document = json.loads(request.body)
    with _lock:
        _effects[document["id"]] += 1
        serial = sum(_effects.values())
    await asyncio.sleep(float(document.get("delay", 0)))
    return JsonResponse({"serial": serial, **document}, status=201)


@idempotent(require_key=True, wait=0)
def decorated(request: HttpRequest) -> HttpResponse:
    document = json.loads(request.body)
    return JsonResponse({"serial": _record(document)}, status=202)


@idempotent(require_key=True)
async def decorated_async(request: HttpRequest) -> HttpResponse:
    document = json.loads(request.body)
    with _lock:
        _effects[document["id"]] += 1
    await asyncio.sleep(float(document.get("delay", 0)))
    return JsonResponse({"id": document["id"], "async": True}, status=201)


@idempotent(require_key=True, transactional=True)
def transfer(request: HttpRequest) -> HttpResponse:
    """The key claimed with the view's own write (one TransactWriteItems)."""
    document = json.loads(request.body)
    write = {"Put": {"TableName": "django-tests", "Item": {"pk": {"S": f"t#{uuid.uuid4()}"}}}}
    context = idempotency(request)
    if context is not None and context.claim_with([write]) is None:
        return HttpResponse()  # the key was taken: the middleware answers instead
    return JsonResponse({"serial": _record(document)}, status=201)


def stream(request: HttpRequest) -> StreamingHttpResponse:
    document = json.loads(request.body)
    _record(document)
    return StreamingHttpResponse(iter([b"one,", b"two"]), content_type="text/csv")


def big(request: HttpRequest) -> HttpResponse:
    document = json.loads(request.body)
    _record(document)
    return HttpResponse(b"x" * 10_000, content_type="text/plain")


@idempotent(require_key=True)
@api_view(["POST"])
def drf_function(request: Any) -> Response:
    serial = _record(request.data)
    return Response({"serial": serial, "via": "api_view"}, status=201)


class DrfOrders(APIView):
    @idempotent(require_key=True)
    def post(self, request: Any) -> Response:
        serial = _record(request.data)
        return Response({"serial": serial, "via": "APIView"}, status=201)


def stored_guard() -> Any:
    """The guard of ``FIRSTWRITE_DJANGO_RESULTS`` runs: results over 64 KB in that folder."""
    from firstwrite.idempotency import Idempotency, IdempotencyConfig
    from firstwrite.idempotency.result_store import DirectoryResultStore

    store = DirectoryResultStore(os.environ["FIRSTWRITE_DJANGO_RESULTS"])
    return Idempotency(IdempotencyConfig(table_name="django-tests", result_store=store))


def export_body(ident: str) -> bytes:
    """3 MB made from ``ident``: the export view's body (the test makes it too)."""
    import hashlib

    return b"".join(hashlib.sha256(f"{ident}:{i}".encode()).digest() for i in range(98_304))


def export(request: HttpRequest) -> HttpResponse:
    document = json.loads(request.body)
    _record(document)
    return HttpResponse(export_body(document["id"]), content_type="text/csv")


def effects(request: HttpRequest, ident: str) -> HttpResponse:
    with _lock:
        return JsonResponse({"count": _effects[ident]})
