"""The function decorator (key from an argument or selected fields) and the Lambda form."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from firstwrite.idempotency.config import IdempotencyConfig
from firstwrite.idempotency.decorators import idempotent, idempotent_handler
from firstwrite.idempotency.errors import MissingKeyError, PayloadMismatchError
from firstwrite.idempotency.guard import Idempotency
from firstwrite.idempotency.keys import key_from

from .conftest import TABLE, Backend


@dataclass
class Receipt:
    order_id: str
    amount: int


def test_key_from_argument_and_typed_replay(guard: Idempotency) -> None:
    runs: list[str] = []

    @idempotent(guard, key_arg="order_id")
    def charge(order_id: str, amount: int) -> Receipt:
        runs.append(order_id)
        return Receipt(order_id, amount)

    assert charge("o1", 10) == Receipt("o1", 10)
    replay = charge(order_id="o1", amount=10)
    assert replay == Receipt("o1", 10) and isinstance(replay, Receipt)
    with pytest.raises(PayloadMismatchError):
        charge("o1", 11)
    with pytest.raises(MissingKeyError):
        charge("", 1)
    assert runs == ["o1"]


def test_key_from_jmespath_fields(guard: Idempotency) -> None:
    runs: list[int] = []

    @idempotent(guard, key="[customer, cart.id]", payload="cart", exclude=("session",))
    def checkout(customer: str, cart: dict[str, Any], session: object = None) -> int:
        runs.append(1)
        return len(runs)

    assert checkout("ann", {"id": 1, "items": [1]}, session=object()) == 1
    assert checkout("ann", {"id": 1, "items": [1]}, session=object()) == 1
    assert checkout("bob", {"id": 1, "items": [1]}) == 2
    with pytest.raises(PayloadMismatchError):
        checkout("ann", {"id": 1, "items": [2]})
    with pytest.raises(MissingKeyError):
        checkout(None, {"items": []})  # type: ignore[arg-type]


class _Text(str):
    """A str subclass: the decorator's plain-path shortcut leaves it to key_from."""


@pytest.mark.parametrize("value", ["o-1", "ü#1", 7, 7.0, {"b": 1, "a": None}, _Text("o-2")])
def test_a_plain_key_path_gives_the_key_key_from_gives(guard: Idempotency, value: Any) -> None:
    @idempotent(guard, key="order.id")
    def charge(order: dict[str, Any]) -> int:
        return 1

    order = {"id": value, "amount": 5}
    assert charge(order) == 1
    expected = key_from({"order": order}, "order.id")
    assert guard.get(expected) is not None


def test_a_plain_key_path_refuses_empty_and_missing_keys(guard: Idempotency) -> None:
    @idempotent(guard, key="order.id")
    def charge(order: Any) -> int:
        return 1

    for order in ({"id": ""}, {"amount": 5}, {"id": None}, {"id": [None, ""]}, "not a dict"):
        with pytest.raises(MissingKeyError):
            charge(order)


def test_an_invalid_key_expression_raises_when_called() -> None:
    @idempotent(None, key="order.[")  # decorating is fine; jmespath refuses it at the call
    def charge(order: Any) -> int:
        return 1

    with pytest.raises(ValueError):
        charge({"id": "x"})


def test_key_from_callable(guard: Idempotency) -> None:
    @idempotent(guard, key=lambda args: args["request"]["id"], payload=False)
    def handle(request: dict[str, Any]) -> str:
        return str(request["n"])

    assert handle({"id": "r1", "n": 1}) == "1"
    assert handle({"id": "r1", "n": 2}) == "1"  # no payload check: same key, same answer


def test_guard_factory_is_resolved_lazily(backend: Backend, table: str) -> None:
    made: list[Idempotency] = []

    def factory() -> Idempotency:
        made.append(backend.guard())
        return made[-1]

    @idempotent(factory, key_arg="k")
    def f(k: str) -> str:
        return k

    assert made == []
    assert f("x") == "x" and f("x") == "x"
    assert len(made) == 1


class LambdaContext:
    def __init__(self, remaining_ms: int) -> None:
        self.remaining_ms = remaining_ms

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


def test_lambda_handler_form(backend: Backend, table: str) -> None:
    guard = backend.guard(IdempotencyConfig(table_name=TABLE, lease=300))
    runs: list[int] = []

    @idempotent_handler(guard, key='headers."Idempotency-Key"', payload="body")
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        runs.append(1)
        return {"statusCode": 201, "body": event["body"]}

    event = {"headers": {"Idempotency-Key": "abc"}, "body": '{"amount": 5}'}
    assert handler(event, LambdaContext(30_000))["statusCode"] == 201
    again = {**event, "requestContext": {"requestId": "another"}}  # other fields may differ
    assert handler(again, LambdaContext(30_000)) == {"statusCode": 201, "body": event["body"]}
    assert runs == [1]
    with pytest.raises(MissingKeyError):
        handler({"headers": {}, "body": ""}, LambdaContext(30_000))


def test_lambda_lease_is_capped_by_remaining_time(backend: Backend, table: str) -> None:
    guard = backend.guard(IdempotencyConfig(table_name=TABLE, lease=300))

    @idempotent_handler(guard, key="id")
    def slow(event: dict[str, Any], context: Any) -> str:
        record = guard.get(event["id"])
        assert record is not None and record.lease_expires_at is not None
        lease_s = record.lease_expires_at / 1000 - backend.now()
        return f"{lease_s:.0f}"

    assert slow({"id": "l1"}, LambdaContext(10_000)) == "9"
