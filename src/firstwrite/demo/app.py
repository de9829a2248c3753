"""The payments API: a Starlette app behind the Idempotency-Key middleware.

* ``POST /payments`` (``Idempotency-Key`` required): ``{"account", "amount", "currency",
  "description"?}``. Debits the account and records the payment *and* claims the key in one
  ``TransactWriteItems``. 201 with the payment; a retry gets the same 201 replayed. Answers that
  are the request's own fault (400 invalid, 404 no such account, 402 insufficient funds) are
  stored and replayed too; 503 "processor unavailable" (``acct_flaky``'s first attempt at
  every payment) is not, so the same request may be retried with the same key.
  A body past :data:`MAX_PAYMENT_BODY` is refused (413 problem+json) as it arrives, never
  buffered whole, whether it declares its length or is chunked.
* ``GET /payments/{id}``, ``GET /accounts/{id}``, ``GET /``: reads.

The caller is identified by its ``Authorization`` header (hashed; ``anonymous`` without one):
one caller's keys never replay another's payments.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount
from starlette.routing import Route as Path

from firstwrite.http import HttpConfig, HttpRequest, IdempotencyMiddleware, Route, idempotency
from firstwrite.idempotency import BusinessConditionFailedError, TransactionConflictError

from .bank import DEBIT, RECORD, SEED, Bank, new_payment

PROBLEM = "application/problem+json"
MAX_AMOUNT = 1_000_000_000
# A payment is four short fields; the middleware (which reads the body to fingerprint it) and
# the handler both stop reading past this.
MAX_PAYMENT_BODY = 64 * 1024
_CURRENCY = re.compile(r"[A-Z]{3}")


ANONYMOUS = "anonymous"  # the principal of a request without credentials


def principal(request: HttpRequest) -> str:
    """The caller: a digest of its credentials (never the credentials themselves, which would
    end up in the idempotency table), or ``anonymous``."""
    credentials = request.header("authorization")
    if not credentials:
        return ANONYMOUS
    return "client-" + hashlib.sha256(credentials.encode("utf-8")).hexdigest()[:16]


def payment_id(scope: str, key: str) -> str:
    """A payment's id follows from its caller, route and key: a retry that takes over a crashed
    attempt writes the same id, and the Put's condition refuses a second charge."""
    return "pay_" + hashlib.sha256(f"{scope}\n{key}".encode()).hexdigest()[:24]


def problem(status: int, kind: str, title: str, detail: str, **extra: Any) -> Response:
    document = {
        "type": f"urn:firstwrite:demo:{kind}",
        "title": title,
        "status": status,
        "detail": detail,
        **extra,
    }
    headers = {"retry-after": "1"} if status == 503 else None
    return JSONResponse(document, status_code=status, media_type=PROBLEM, headers=headers)


def _validate(body: Any) -> tuple[str, int, str, str] | str:
    """``(account, amount, currency, description)`` or what is wrong with the request."""
    if not isinstance(body, dict):
        return "the body must be a JSON object"
    account, amount = body.get("account"), body.get("amount")
    currency, description = body.get("currency", "EUR"), body.get("description", "")
    if not isinstance(account, str) or not account:
        return "'account' must be an account id, e.g. \"acct_alice\""
    if isinstance(amount, bool) or not isinstance(amount, int) or not 0 < amount <= MAX_AMOUNT:
        return f"'amount' must be an integer of minor units, 1 to {MAX_AMOUNT} (1250 = 12.50)"
    if not isinstance(currency, str) or not _CURRENCY.fullmatch(currency):
        return "'currency' must be a three-letter ISO 4217 code, e.g. \"EUR\""
    if not isinstance(description, str) or len(description) > 500:
        return "'description' must be a string of at most 500 characters"
    extra = sorted(set(body) - {"account", "amount", "currency", "description"})
    if extra:
        return f"unknown field(s): {', '.join(extra)}"
    return account, amount, currency, description


def create_app(
    client: Any, *, guard: Any = None, mounts: Mapping[str, Any] | None = None
) -> Starlette:
    """The payments app over a boto3 DynamoDB client (tables set up by the caller, see
    :meth:`Bank.setup`). ``guard``: the idempotency guard (default: ``Idempotency`` on the same
    client); ``mounts``: more ASGI apps by path prefix (not guarded)."""
    from firstwrite.idempotency import Idempotency

    bank = Bank(client)
    if guard is None:
        guard = Idempotency(client=client)
        guard.ensure_table()

    async def create_payment(request: Request) -> Response:
        context = idempotency(request)
        raw = await _read_capped(request, MAX_PAYMENT_BODY)
        if raw is None:
            return _too_large()
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        checked = _validate(body)
        if isinstance(checked, str):
            return problem(400, "invalid-payment", "Invalid payment", checked)
        account_id, amount, currency, description = checked
        account = await asyncio.to_thread(bank.account, account_id)
        if account is None:
            return problem(
                404, "account-not-found", "No such account", f"no account {account_id!r}"
            )
        if account["currency"] != currency:
            return problem(
                400,
                "currency-mismatch",
                "Currency mismatch",
                f"account {account_id} holds {account['currency']}, not {currency}",
            )
        pid = payment_id(context.scope, context.key)
        if account["flaky"] and await asyncio.to_thread(_processor_fails, bank, pid):
            # Nothing was written: a 5xx releases nothing, and the same request may be retried.
            return problem(
                503,
                "processor-unavailable",
                "Card processor unavailable",
                "the processor did not answer; nothing was charged: retry with the same key",
            )
        payment = new_payment(pid, account_id, amount, currency, description)
        try:
            claim = await context.claim_with(bank.charge_items(payment))
        except BusinessConditionFailedError as failed:
            if RECORD in failed.reasons:  # a crashed attempt already charged it: its payment
                existing = await asyncio.to_thread(bank.payment, pid)
                if existing is not None:
                    return _created(existing)
            if DEBIT in failed.reasons:
                current = await asyncio.to_thread(bank.account, account_id)
                balance = None if current is None else current["balance"]
                return problem(
                    402,
                    "insufficient-funds",
                    "Insufficient funds",
                    f"account {account_id} cannot pay {amount} {currency}",
                    balance=balance,
                )
            raise
        except TransactionConflictError:
            return problem(
                503, "busy", "Try again", "the account is busy; nothing was charged: retry"
            )
        if claim is None:
            return Response(status_code=204)  # a duplicate: the middleware sends the answer
        return _created(payment)

    async def get_payment(request: Request) -> Response:
        found = await asyncio.to_thread(bank.payment, request.path_params["id"])
        if found is None:
            return problem(404, "payment-not-found", "No such payment", "no payment with this id")
        return JSONResponse(found)

    async def get_account(request: Request) -> Response:
        found = await asyncio.to_thread(bank.account, request.path_params["id"])
        if found is None:
            return problem(404, "account-not-found", "No such account", "no account with this id")
        found.pop("flaky")
        return JSONResponse(found)

    async def index(request: Request) -> Response:
        return JSONResponse(
            {
                "service": "firstwrite payments demo",
                "endpoints": {
                    "POST /payments": "Idempotency-Key required; "
                    '{"account": "acct_alice", "amount": 1250, "currency": "EUR"}',
                    "GET /payments/{id}": "a payment",
                    "GET /accounts/{id}": "an account's balance",
                },
                "accounts": [a.id for a in SEED],
            }
        )

    routes: list[BaseRoute] = [
        Path("/", index, methods=["GET"]),
        Path("/payments", create_payment, methods=["POST"]),
        Path("/payments/{id}", get_payment, methods=["GET"]),
        Path("/accounts/{id}", get_account, methods=["GET"]),
    ]
    excluded: list[Route] = []
    for prefix, mounted in (mounts or {}).items():
        prefix = "/" + prefix.strip("/")
        routes.append(Mount(prefix, app=mounted))
        excluded.append(Route(prefix + "/*", methods=_ALL_METHODS, exclude=True))
    app = Starlette(routes=routes, exception_handlers={HTTPException: _http_problem})
    app.add_middleware(
        IdempotencyMiddleware,
        guard=guard,
        config=HttpConfig(
            routes=[
                *excluded,
                Route("/payments", methods=["POST"], require_key=True, transactional=True),
            ],
            principal=principal,
            max_request_body=MAX_PAYMENT_BODY,
        ),
    )
    return app


async def _http_problem(request: Request, exc: Exception) -> Response:
    """Starlette's own answers (no such route, a method the route does not take) as
    problem+json, like every other answer of the demo; a 405 keeps its ``Allow``."""
    assert isinstance(exc, HTTPException)
    status = exc.status_code
    kinds = {404: ("not-found", "Not found"), 405: ("method-not-allowed", "Method not allowed")}
    kind, title = kinds.get(status, ("http-error", HTTPStatus(status).phrase))
    detail = f"{request.method} {request.url.path}: {exc.detail}"
    response = problem(status, kind, title, detail)
    response.headers.update(exc.headers or {})
    return response


def _processor_fails(bank: Bank, pid: str) -> bool:
    """The simulated card processor: it fails the first attempt at every payment. A payment
    already made (this request is a duplicate) is not sent to it again."""
    if bank.payment(pid) is not None:
        return False
    return bank.processor_attempt(pid) == 1


async def _read_capped(request: Request, limit: int) -> bytes | None:
    """The body, read as it arrives; ``None`` once it passes ``limit`` bytes (the rest unread)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large() -> Response:
    return problem(
        413,
        "payment-too-large",
        "Payment request too large",
        f"a payment's body is at most {MAX_PAYMENT_BODY} bytes",
    )


_ALL_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def _created(payment: dict[str, Any]) -> Response:
    return JSONResponse(
        payment, status_code=201, headers={"location": f"/payments/{payment['id']}"}
    )
