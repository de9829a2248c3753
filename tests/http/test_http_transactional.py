"""Transactional routes: the handler claims the key together with its own DynamoDB writes (one
TransactWriteItems), through Starlette (async) and Flask (sync) on real servers."""

from __future__ import annotations

import concurrent.futures
import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from http_support import guards, serve_asgi, serve_wsgi

from firstwrite.http import (
    HttpConfig,
    IdempotencyMiddleware,
    Problem,
    Route,
    WSGIIdempotencyMiddleware,
    idempotency,
)
from firstwrite.idempotency import BusinessConditionFailedError

ACCOUNTS = "tx-accounts"
CONFIG = HttpConfig(routes=[Route("/debit", transactional=True, require_key=True)])


def _debit(account: str, amount: int) -> dict[str, Any]:
    return {
        "Update": {
            "TableName": ACCOUNTS,
            "Key": {"id": {"S": account}},
            "UpdateExpression": "SET balance = balance - :a",
            "ConditionExpression": "balance >= :a",
            "ExpressionAttributeValues": {":a": {"N": str(amount)}},
        }
    }


def _outcome(body: dict[str, Any], claim: Any) -> tuple[int, dict[str, Any]]:
    if body.get("crash"):  # fails after its writes committed
        return 500, {"error": "crashed after the debit"}
    return 201, {"debited": body["amount"], "fencing_token": claim.fencing_token}


def starlette_app(guard: Any) -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route as Path

    async def debit(request: Request) -> Response:
        body = await request.json()
        try:
            claim = await idempotency(request).claim_with([_debit(body["account"], body["amount"])])
        except BusinessConditionFailedError:
            return JSONResponse({"error": "insufficient funds"}, status_code=402)
        if claim is None:
            return Response(status_code=204)  # discarded: the middleware answers
        status, document = _outcome(body, claim)
        return JSONResponse(document, status_code=status)

    async def plain(request: Request) -> Response:
        await idempotency(request).claim_with([])  # not a transactional route: a bug
        return Response(status_code=201)

    app = Starlette(
        routes=[Path("/debit", debit, methods=["POST"]), Path("/plain", plain, methods=["POST"])]
    )
    app.add_middleware(IdempotencyMiddleware, guard=guard, config=CONFIG)
    return app


def flask_app(guard: Any) -> Any:
    from flask import Flask, Response, jsonify, request

    app = Flask("transactional")

    @app.post("/debit")
    def debit() -> Any:
        body = request.get_json()
        try:
            claim = idempotency(request).claim_with([_debit(body["account"], body["amount"])])
        except BusinessConditionFailedError:
            return jsonify({"error": "insufficient funds"}), 402
        if claim is None:
            return Response(status=204)
        status, document = _outcome(body, claim)
        return jsonify(document), status

    @app.post("/plain")
    def plain() -> Any:
        idempotency(request).claim_with([])
        return Response(status=201)

    app.wsgi_app = WSGIIdempotencyMiddleware(app.wsgi_app, guard=guard, config=CONFIG)  # type: ignore[method-assign]
    return app


class Bank:
    def __init__(self, client: Any) -> None:
        self.client = client
        client.create_table(
            TableName=ACCOUNTS,
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )

    def open(self, balance: int) -> str:
        account = uuid.uuid4().hex
        self.client.put_item(
            TableName=ACCOUNTS, Item={"id": {"S": account}, "balance": {"N": str(balance)}}
        )
        return account

    def balance(self, account: str) -> int:
        item = self.client.get_item(
            TableName=ACCOUNTS, Key={"id": {"S": account}}, ConsistentRead=True
        )["Item"]
        return int(item["balance"]["N"])

    def deposit(self, account: str, amount: int) -> None:
        self.client.update_item(
            TableName=ACCOUNTS,
            Key={"id": {"S": account}},
            UpdateExpression="SET balance = balance + :a",
            ExpressionAttributeValues={":a": {"N": str(amount)}},
        )


@pytest.fixture(scope="module", params=["starlette", "flask"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Bank]]:
    from firstwrite.engine import Engine, local_client

    with Engine(tmp_path_factory.mktemp("tx") / "tx.db") as engine:
        client = local_client(engine)
        bank = Bank(client)
        sync_guard, async_guard = guards(client, "tx-idempotency")
        if request.param == "starlette":
            server = serve_asgi(starlette_app(async_guard))
        else:
            server = serve_wsgi(flask_app(sync_guard))
        with server as url:
            yield url, bank


def _post(url: str, key: str, body: dict[str, Any], path: str = "/debit") -> httpx.Response:
    with httpx.Client(base_url=url, timeout=30) as client:
        return client.post(path, json=body, headers={"Idempotency-Key": key})


def test_the_debit_and_the_claim_commit_together_once(served: tuple[str, Bank]) -> None:
    url, bank = served
    account, key = bank.open(100), uuid.uuid4().hex
    first = _post(url, key, {"account": account, "amount": 30})
    again = _post(url, key, {"account": account, "amount": 30})
    other = _post(url, key, {"account": account, "amount": 31})
    assert first.status_code == 201 and json.loads(first.content)["debited"] == 30
    assert again.status_code == 201 and again.content == first.content
    assert again.headers["idempotent-replayed"] == "true"
    assert other.status_code == Problem.KEY_REUSED.status
    assert json.loads(other.content)["type"] == Problem.KEY_REUSED.type_uri
    assert bank.balance(account) == 70


def test_a_refused_debit_is_stored_and_replayed(served: tuple[str, Bank]) -> None:
    url, bank = served
    account, key = bank.open(10), uuid.uuid4().hex
    refused = _post(url, key, {"account": account, "amount": 25})
    bank.deposit(account, 100)  # now it would pass: the key's answer is still the refusal
    again = _post(url, key, {"account": account, "amount": 25})
    assert refused.status_code == 402
    assert again.status_code == 402 and again.content == refused.content
    assert again.headers["idempotent-replayed"] == "true"
    assert bank.balance(account) == 110
    fresh = _post(url, uuid.uuid4().hex, {"account": account, "amount": 25})
    assert fresh.status_code == 201 and bank.balance(account) == 85


def test_a_failure_after_the_commit_keeps_the_key(served: tuple[str, Bank]) -> None:
    url, bank = served
    account, key = bank.open(100), uuid.uuid4().hex
    crashed = _post(url, key, {"account": account, "amount": 40, "crash": True})
    retry = _post(url, key, {"account": account, "amount": 40, "crash": True})
    assert crashed.status_code == 500
    # The debit committed with the claim: releasing the key would debit again on the retry.
    assert retry.status_code == Problem.RESPONSE_NOT_STORED.status
    assert json.loads(retry.content)["original_status"] == 500
    assert bank.balance(account) == 60


def test_concurrent_duplicates_debit_once(served: tuple[str, Bank]) -> None:
    url, bank = served
    account, key = bank.open(1000), uuid.uuid4().hex
    barrier = threading.Barrier(8)

    def send(_: int) -> httpx.Response:
        with httpx.Client(base_url=url, timeout=30) as client:
            barrier.wait(30)
            return client.post(
                "/debit", json={"account": account, "amount": 7}, headers={"Idempotency-Key": key}
            )

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        responses = list(pool.map(send, range(8)))
    assert bank.balance(account) == 993
    created = [r for r in responses if r.status_code == 201]
    assert created and all(r.status_code in (201, 409) for r in responses)
    assert len({r.content for r in created}) == 1


def test_claim_with_on_a_route_the_middleware_claimed_is_a_bug(served: tuple[str, Bank]) -> None:
    url, _ = served
    key = uuid.uuid4().hex
    assert _post(url, key, {}, path="/plain").status_code == 500
    # The key was released with the failure: the (fixed) handler could run on a retry.
    assert _post(url, key, {}, path="/plain").status_code == 500
