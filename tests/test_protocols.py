"""One declaration per protocol: the guard's ``claim`` is declared where the protocols are and
where the two guards implement them, nowhere else.

Code built on a guard (the HTTP middleware, the event consumers, the decorators, the router)
types against :class:`firstwrite.idempotency.Guard` / ``AsyncGuard`` (the consumers' protocol
extends them) and calls the guard through the steps of ``firstwrite.idempotency.steps``; a
wrapper or a protocol that declared ``claim`` again would be a second copy of its contract to
keep in step.

A guard's claim is recognised by its signature: a function named ``claim`` or ``claim_with``
whose ``scope`` is keyword-only (the state machine's own transition of the same name takes its
arguments positionally, and is driven by the guards, not declared for callers).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from firstwrite.events import Consumer, EventGuard
from firstwrite.events.aio import AsyncConsumer
from firstwrite.events.guard import AsyncEventGuard
from firstwrite.idempotency import (
    AsyncGuard,
    AsyncIdempotency,
    Guard,
    Idempotency,
    IdempotencyConfig,
)
from firstwrite.idempotency.aio import ThreadedClient

SRC = Path(__file__).resolve().parents[1] / "src" / "firstwrite"
DECLARED_IN = {
    "idempotency/protocols.py": 4,  # claim and claim_with, Guard and AsyncGuard
    "idempotency/guard.py": 2,
    "idempotency/aio.py": 2,
}


def _claim_declarations(path: Path) -> list[str]:
    """The guard-claim signatures ``path`` declares, as ``name:line``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if node.name in ("claim", "claim_with") and any(
            arg.arg == "scope" for arg in node.args.kwonlyargs
        ):
            found.append(f"{node.name}:{node.lineno}")
    return found


def test_the_claim_signature_is_declared_only_by_the_protocols_and_the_two_guards() -> None:
    declared = {
        path.relative_to(SRC).as_posix(): found
        for path in sorted(SRC.rglob("*.py"))
        if (found := _claim_declarations(path))
    }
    assert {k: len(v) for k, v in declared.items()} == DECLARED_IN, declared


def test_the_finder_sees_a_wrapper_that_redeclares_claim(tmp_path: Path) -> None:
    wrapper = tmp_path / "wrapper.py"
    wrapper.write_text(
        "class Threaded:\n"
        "    async def claim(self, key, payload=None, *, scope=None, lease=None):\n"
        "        ...\n"
        "def claim(key, payload, scope, lease):\n"  # positional: a transition, not a guard
        "    ...\n"
    )
    assert _claim_declarations(wrapper) == ["claim:2"]


@pytest.fixture
def guards(tmp_path: Path) -> Iterator[tuple[Idempotency, AsyncIdempotency]]:
    from firstwrite.engine import Engine, local_client

    engine = Engine(str(tmp_path / "protocols.db"))
    client = local_client(engine)
    config = IdempotencyConfig(table_name="protocols")
    yield (
        Idempotency(config, client=client),
        AsyncIdempotency(config, client=ThreadedClient(client)),
    )
    engine.close()


def test_the_guards_are_their_protocols_and_the_event_protocols_extend_them(
    guards: tuple[Idempotency, AsyncIdempotency],
) -> None:
    sync, asyncio_guard = guards
    assert isinstance(sync, Guard) and isinstance(sync, EventGuard)
    assert isinstance(asyncio_guard, AsyncGuard) and isinstance(asyncio_guard, AsyncEventGuard)
    assert Guard in EventGuard.__mro__ and AsyncGuard in AsyncEventGuard.__mro__
    # what a consumer adds to the layer's protocol: the metrics sink, nothing else
    for protocol in (EventGuard, AsyncEventGuard):
        assert {name for name in vars(protocol) if not name.startswith("_")} == {"metrics"}
    assert not isinstance(lambda: sync, Guard)  # a factory is no guard


def test_the_consumers_check_the_kind_of_guard_on_is_async(
    guards: tuple[Idempotency, AsyncIdempotency],
) -> None:
    sync, asyncio_guard = guards
    consumer: Consumer[dict[str, str]] = Consumer(asyncio_guard, key=lambda r: r["id"])
    with pytest.raises(TypeError, match="asyncio guard"):
        consumer.process({"id": "a"}, lambda r: None)
    with pytest.raises(TypeError, match="synchronous guard"):
        AsyncConsumer(Consumer(sync, key=lambda r: r["id"]))
