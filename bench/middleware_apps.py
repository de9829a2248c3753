"""The apps and contenders of the middleware benchmark (:mod:`.middleware`): one trivial FastAPI
handler, bare or behind each library's Idempotency-Key handling, driven in process through ASGI
(scope, receive, send; no sockets), and the bounds: firstwrite's own DynamoDB calls made with no
middleware code around them. An app factory is a coroutine run on the driver's event loop (an
aiobotocore client belongs to the loop that opened it), with an exit stack for what it opens.
"""

import asyncio
import contextlib
import contextvars
import copy
import json
import time
import uuid
import warnings
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from botocore import xform_name

from ._calls import Recorded
from ._common import Contender
from .idempotency_libraries import AsyncTable, Shared

# The sync guard's Idempotency in worker threads, and the async guard on an aiobotocore client.
OURS = "firstwrite, sync guard"
OURS_ASYNC = "firstwrite, async guard"
POWERTOOLS = "Powertools glue"
IDEMKIT = "idemkit"
BARE = "bare app"
IN_THREADS = "sync guard's calls alone"  # the bound of OURS: its calls, in worker threads
ON_LOOP = "async guard's calls alone"  # the bound of OURS_ASYNC: its calls, on the loop
CLIENT = "client-1"

AppFactory = Callable[[Shared, contextlib.AsyncExitStack], Awaitable[Any]]
# One recorded DynamoDB call to make again: (bound method, parameters, whether it failed its
# condition, the key attribute to make fresh per request or None).
Step = tuple[Callable[..., Any], dict[str, Any], bool, str | None]


def body_of(order_id: str) -> bytes:
    return json.dumps(
        {"order_id": order_id, "amount": 1000, "currency": "EUR", "card": "tok_visa"}
    ).encode()


def _handler_result(order: dict[str, Any]) -> dict[str, Any]:
    return {"order_id": order["order_id"], "status": "created", "amount": order["amount"]}


# -- the apps -------------------------------------------------------------------------------------


async def bare_app(_shared: Shared, _stack: contextlib.AsyncExitStack) -> Any:
    from fastapi import FastAPI

    app = FastAPI()

    @app.post("/orders", status_code=201)
    async def create(order: dict[str, Any]) -> dict[str, Any]:
        return _handler_result(order)

    return app


async def _guarded(shared: Shared, stack: contextlib.AsyncExitStack, guard: Any) -> Any:
    from firstwrite.http import HttpConfig, IdempotencyMiddleware

    app = await bare_app(shared, stack)
    app.add_middleware(
        IdempotencyMiddleware,
        guard=guard,
        config=HttpConfig(principal=lambda request: request.header("x-client")),
    )
    return app


def _table_name() -> str:
    return f"firstwrite-{uuid.uuid4().hex[:8]}"


async def firstwrite_app(shared: Shared, stack: contextlib.AsyncExitStack) -> Any:
    """The synchronous ``Idempotency`` guard on the shared client: the middleware runs each of
    its calls in a worker thread, as it must for a blocking client."""
    from firstwrite.idempotency import Idempotency, IdempotencyConfig

    guard = Idempotency(IdempotencyConfig(table_name=_table_name()), client=shared.client)
    guard.ensure_table()
    return await _guarded(shared, stack, guard)


async def aio_client(shared: Shared, stack: contextlib.AsyncExitStack) -> Any:
    """An aiobotocore client bound in process to the shared engine, its calls counted."""
    from firstwrite.engine.binding.aio import local_aio_client

    client = await stack.enter_async_context(local_aio_client(shared.engine))
    shared.counter.attach(client)
    return client


async def firstwrite_async_app(
    shared: Shared, stack: contextlib.AsyncExitStack, client: Any = None
) -> Any:
    """``AsyncIdempotency`` on an aiobotocore client, as docs/http.md sets up an ASGI app."""
    from firstwrite.idempotency import AsyncIdempotency, IdempotencyConfig

    if client is None:
        client = await aio_client(shared, stack)
    guard = AsyncIdempotency(IdempotencyConfig(table_name=_table_name()), client=client)
    await guard.ensure_table()
    return await _guarded(shared, stack, guard)


async def powertools_app(shared: Shared, _stack: contextlib.AsyncExitStack) -> Any:
    """What a user writes today: the glue around ``idempotent_function`` (key header, scope,
    status mapping, replay marker, response reconstruction)."""
    from aws_lambda_powertools.utilities.idempotency import (
        DynamoDBPersistenceLayer,
        IdempotencyConfig,
        idempotent_function,
    )
    from aws_lambda_powertools.utilities.idempotency.exceptions import (
        IdempotencyAlreadyInProgressError,
        IdempotencyValidationError,
    )
    from fastapi import Depends, FastAPI, Request
    from fastapi.responses import JSONResponse

    warnings.filterwarnings("ignore", message="Couldn't determine the remaining time")
    table = f"powertools-{uuid.uuid4().hex[:8]}"
    shared.create_table(table, "id", ttl_attribute="expiration")
    replayed: contextvars.ContextVar[bool] = contextvars.ContextVar("replayed", default=False)

    def mark_replay(response: Any, _record: Any) -> Any:
        replayed.set(True)
        return response

    persistence = DynamoDBPersistenceLayer(table_name=table, boto3_client=shared.client)
    config = IdempotencyConfig(
        event_key_jmespath="[client, method, path, key]",
        payload_validation_jmespath="body",
        response_hook=mark_replay,
    )

    @idempotent_function(
        data_keyword_argument="request", persistence_store=persistence, config=config
    )
    def create(request: dict[str, Any]) -> dict[str, Any]:
        return {"status": 201, "body": _handler_result(json.loads(request["body"]))}

    app = FastAPI()

    async def raw_body(request: Request) -> bytes:  # read on the loop, before the thread
        return bytes(await request.body())

    @app.post("/orders")
    def endpoint(request: Request, body: bytes = Depends(raw_body)) -> JSONResponse:
        key = request.headers.get("idempotency-key")
        if key is None:
            return JSONResponse({"error": "Idempotency-Key required"}, 400)
        key = key.strip().removeprefix('"').removesuffix('"')
        data = {
            "client": request.headers.get("x-client"),
            "method": request.method,
            "path": request.url.path,
            "key": key,
            "body": body.decode(),
        }
        try:
            result = create(request=data)
        except IdempotencyAlreadyInProgressError:
            return JSONResponse({"error": "in progress"}, 409, headers={"retry-after": "1"})
        except IdempotencyValidationError:
            return JSONResponse({"error": "key reused with another request"}, 422)
        headers = {"idempotent-replayed": "true"} if replayed.get() else None
        return JSONResponse(result["body"], result["status"], headers=headers)

    return app


async def idemkit_app(shared: Shared, stack: contextlib.AsyncExitStack) -> Any:
    from idemkit import HttpConfig
    from idemkit import IdempotencyMiddleware as IdemkitMiddleware
    from idemkit.backends.dynamodb import PK, DynamoBackend

    table = f"idemkit-{uuid.uuid4().hex[:8]}"
    shared.create_table(table, PK, ttl_attribute="ttl")
    backend = DynamoBackend(table=table, create_table=False)
    backend._table = AsyncTable(shared.bound_resource().Table(table))
    app = await bare_app(shared, stack)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        app.add_middleware(
            IdemkitMiddleware,
            backend=backend,
            config=HttpConfig(
                scope=lambda request: request.headers.get("x-client"),
                wait_timeout_seconds=0.0,  # like the others: answer "in progress" at once
                compat_mode="stripe",  # Idempotent-Replayed, as the others send
            ),
            manage_backend=False,
        )
    return app


# -- driving an ASGI app in process ---------------------------------------------------------------

Answer = tuple[int, dict[bytes, bytes], bytes]


async def asgi_post(app: Any, body: bytes, key: str) -> Answer:
    """One ``POST /orders`` through ``app``: (status, headers, body)."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/orders",
        "raw_path": b"/orders",
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"bench"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"idempotency-key", key.encode()),
            (b"x-client", CLIENT.encode()),
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 80),
    }
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    status, headers, chunks = 0, {}, []

    async def send(message: dict[str, Any]) -> None:
        nonlocal status, headers
        if message["type"] == "http.response.start":
            status, headers = message["status"], dict(message.get("headers", []))
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, receive, send)
    return status, headers, b"".join(chunks)


class Driver:
    """An ASGI app built and called in process on its own event loop: one request, one answer."""

    def __init__(self, shared: Shared, factory: AppFactory) -> None:
        self.loop = asyncio.new_event_loop()
        self.stack = contextlib.AsyncExitStack()
        self.app = self.loop.run_until_complete(factory(shared, self.stack))

    def post(self, body: bytes, key: str, app: Any = None) -> Answer:
        """``app`` (default: this driver's) answers on this driver's loop."""
        return self.loop.run_until_complete(asgi_post(app or self.app, body, key))

    def close(self) -> None:
        self.loop.run_until_complete(self.stack.aclose())
        self.loop.run_until_complete(self.loop.shutdown_default_executor())
        self.loop.close()


class AppScenario(Contender):
    """One app, one scenario; counts DynamoDB calls during timed slices only."""

    def __init__(self, shared: Shared, name: str, factory: AppFactory, scenario: str):
        self.shared = shared
        self.name = name
        self.factory = factory
        self.scenario = scenario
        self.driver: Driver | None = None
        self.requests = 0
        self.calls = 0
        self.cpu = 0.0  # process CPU seconds (all threads) during the timed slices
        self._mark = 0
        self._cpu_mark = 0.0
        self._prefix = uuid.uuid4().hex[:8]
        self._expected = b""

    def setup(self) -> None:
        self.driver = Driver(self.shared, self.factory)
        if self.scenario == "replay":
            key = f"{self._prefix}-dup"
            status, _, body = self.driver.post(body_of(key), key)
            if status != 201:
                raise RuntimeError(f"{self.name}: the first call answered {status}: {body!r}")
            self._expected = body

    def resume(self) -> None:
        self._mark = self.shared.counter.total
        self._cpu_mark = time.process_time()

    def pause(self) -> None:
        self.calls += self.shared.counter.total - self._mark
        self.cpu += time.process_time() - self._cpu_mark

    def op(self, i: int) -> None:
        driver = self.driver
        assert driver is not None
        self.requests += 1
        if self.scenario == "first call":
            key = f"{self._prefix}-{i}"
            status, headers, body = driver.post(body_of(key), key)
            if status != 201 or b"idempotent-replayed" in headers:
                raise AssertionError(f"{self.name}: first call answered {status} {body!r}")
        else:
            key = f"{self._prefix}-dup"
            status, headers, body = driver.post(body_of(key), key)
            # The glue rebuilds the body from Powertools' stored dict (keys re-sorted): equal
            # JSON, not equal bytes. The middlewares replay the bytes.
            same = (
                json.loads(body) == json.loads(self._expected)
                if self.name == POWERTOOLS
                else body == self._expected
            )
            if status != 201 or not same:
                raise AssertionError(f"{self.name} replayed {status} {body!r}")
            if self.name != BARE and headers.get(b"idempotent-replayed") != b"true":
                raise AssertionError(f"{self.name}: a replay without Idempotent-Replayed")

    def teardown(self) -> None:
        if self.driver is not None:
            self.driver.close()

    @property
    def calls_per_request(self) -> float:
        return self.calls / self.requests if self.requests else float("nan")


# -- the bounds: firstwrite's calls with no middleware around them ---------------------------------


class _CallsAlone(AppScenario):
    """The bare app plus the DynamoDB calls that one request of a guarded app made (recorded),
    made again on the same client with none of the middleware around them: the first call
    (the claim, or a replay's read), the bare app's request, then the rest (the completion).
    On *first call* each call gets a fresh key value; a repeated call must end as the recorded
    one did."""

    def __init__(self, shared: Shared, name: str, scenario: str) -> None:
        super().__init__(shared, name, bare_app, scenario)
        self._steps: list[Step] = []
        self._ccf: type[BaseException] = Exception

    def guarded_app(self, driver: Driver) -> tuple[Any, Any]:
        """The guarded app on ``driver``'s loop and the client its calls are recorded on."""
        raise NotImplementedError

    def setup(self) -> None:
        self.driver = driver = Driver(self.shared, bare_app)
        app, client = self.guarded_app(driver)
        key = f"{self._prefix}-rec" if self.scenario == "first call" else f"{self._prefix}-dup"
        if self.scenario == "replay":
            driver.post(body_of(key), key, app)
        recorded = self.record(client, lambda: driver.post(body_of(key), key, app))
        if not recorded:
            raise RuntimeError(f"{self.name}: the app made no DynamoDB call")
        self._ccf = client.exceptions.ConditionalCheckFailedException
        self._steps = [
            (getattr(client, method), params, failed, self._hash_key(params))
            for method, params, failed in recorded
        ]

    def record(self, client: Any, request: Callable[[], Any]) -> list[Recorded]:
        """The DynamoDB calls ``request()`` makes on ``client``."""
        with _recording(client) as recorded:
            request()
        return recorded

    def _hash_key(self, params: dict[str, Any]) -> str | None:
        if self.scenario != "first call":
            return None
        table = self.shared.client.describe_table(TableName=params["TableName"])["Table"]
        return str(next(k["AttributeName"] for k in table["KeySchema"] if k["KeyType"] == "HASH"))

    def op(self, i: int) -> None:
        assert self.driver is not None
        self.requests += 1
        self.driver.loop.run_until_complete(self._request(i))

    async def _request(self, i: int) -> None:
        assert self.driver is not None
        first, *rest = self._steps
        await self.call(first, i)
        key = f"{self._prefix}-{i}"
        status, _, _ = await asgi_post(self.driver.app, body_of(key), key)
        if status != 201:
            raise AssertionError(f"the bare app answered {status}")
        for step in rest:
            await self.call(step, i)

    async def call(self, step: Step, i: int) -> None:
        """Make one recorded call again, as the guard would."""
        raise NotImplementedError

    def _ended(self, step: Step, error: BaseException | None) -> None:
        """Check that a repeated call ended as recorded: failed its condition, or went through."""
        failed = step[2]
        if error is not None and not (failed and isinstance(error, self._ccf)):
            raise error
        if error is None and failed:
            raise AssertionError(f"{self.name}: a repeated call that had failed went through")


class CallsAlone(_CallsAlone):
    """The sync guard's calls on the shared client, each in a worker thread as a middleware
    that never blocks the event loop on a blocking client must make them: what any such
    middleware making exactly those calls costs at least."""

    def __init__(self, shared: Shared, scenario: str) -> None:
        super().__init__(shared, IN_THREADS, scenario)

    def guarded_app(self, driver: Driver) -> tuple[Any, Any]:
        app = driver.loop.run_until_complete(firstwrite_app(self.shared, driver.stack))
        return app, self.shared.client

    def record(self, client: Any, request: Callable[[], Any]) -> list[Recorded]:
        return self.shared.record(request)  # the DirectClient too (it has no botocore events)

    async def call(self, step: Step, i: int) -> None:
        await asyncio.to_thread(self._call, step, i)

    def _call(self, step: Step, i: int) -> None:
        method, params, _failed, fresh = step
        try:
            method(**_fresh(params, fresh, i))
        except Exception as exc:
            self._ended(step, exc)
            return
        self._ended(step, None)


class CallsAloneOnLoop(_CallsAlone):
    """The async guard's calls, awaited on its aiobotocore client on the event loop: what any
    async middleware making exactly those calls costs at least."""

    def __init__(self, shared: Shared, scenario: str) -> None:
        super().__init__(shared, ON_LOOP, scenario)

    def guarded_app(self, driver: Driver) -> tuple[Any, Any]:
        async def build() -> tuple[Any, Any]:
            client = await aio_client(self.shared, driver.stack)
            return await firstwrite_async_app(self.shared, driver.stack, client), client

        return driver.loop.run_until_complete(build())

    async def call(self, step: Step, i: int) -> None:
        method, params, _failed, fresh = step
        try:
            await method(**_fresh(params, fresh, i))
        except Exception as exc:
            self._ended(step, exc)
            return
        self._ended(step, None)


def _fresh(params: dict[str, Any], fresh: str | None, i: int) -> dict[str, Any]:
    """``params`` with the item's hash key ``fresh`` (if any) made unique to request ``i``."""
    if fresh is None:
        return params
    request = dict(params)
    part = "Item" if "Item" in request else "Key"
    attributes = request[part] = dict(request[part])
    attributes[fresh] = {"S": f"{attributes[fresh]['S']}#{i}"}
    return request


@contextlib.contextmanager
def _recording(client: Any) -> Iterator[list[Recorded]]:
    """The DynamoDB calls made on ``client`` (boto3 or aiobotocore) inside the block: (method,
    parameters, whether it failed its condition)."""
    calls: list[Recorded] = []

    def on_params(params: dict[str, Any], model: Any, **_kwargs: Any) -> None:
        calls.append((xform_name(model.name), copy.deepcopy(params), False))

    def on_answer(parsed: dict[str, Any], **_kwargs: Any) -> None:
        failed = parsed.get("Error", {}).get("Code") == "ConditionalCheckFailedException"
        calls[-1] = (calls[-1][0], calls[-1][1], failed)

    events = client.meta.events
    hooks = (("provide-client-params.dynamodb", on_params), ("after-call.dynamodb", on_answer))
    for event, hook in hooks:  # unique ids are per emitter, not per event
        events.register(event, hook, unique_id=f"bench-mw-record-{event}")
    try:
        yield calls
    finally:
        for event, _hook in hooks:
            events.unregister(event, unique_id=f"bench-mw-record-{event}")
