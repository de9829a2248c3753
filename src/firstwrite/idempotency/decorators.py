"""Decorators: make a function (sync or async) or a Lambda handler idempotent.

>>> @idempotent(guard, key_arg="order_id")
... def charge(order_id: str, amount: int) -> Receipt: ...

>>> @idempotent(guard, key="[customer, cart.id]")       # JMESPath over the arguments
... async def checkout(customer: str, cart: dict) -> dict: ...

>>> @idempotent_handler(guard, key='headers."Idempotency-Key"', payload="body")
... def handler(event, context): ...

The key is either an argument's value (``key_arg``) or the fingerprint of selected fields
(``key``: a JMESPath expression or a callable over the arguments dict; over an HTTP event,
``body.x`` reads the decoded body: :mod:`.bodies`). The mismatch check fingerprints
``payload`` (default: every argument). A call without a key raises
:class:`~.errors.MissingKeyError` or, with ``on_missing_key="run-unguarded"``, runs unguarded;
with ``config.disabled`` every call runs directly; replays pass through ``config.on_replay``.
The return annotation, when it names a dataclass or pydantic model (or a container of them),
is what a replay is rebuilt into.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import time
import typing
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar

from . import serialization
from .aio import AsyncIdempotency
from .errors import IdempotencyError, MissingKeyError
from .guard import UNSET, Idempotency
from .keys import Selector, key_from, key_path, select, walk
from .recovery import AnyHook, reconciling_with
from .steps import working

F = TypeVar("F", bound=Callable[..., Any])
A = TypeVar("A")
_log = logging.getLogger("firstwrite.idempotency")

AnyIdempotency = Idempotency | AsyncIdempotency
GuardArgument = AnyIdempotency | Callable[[], AnyIdempotency] | None
"""What the decorators take: a guard, a zero-argument factory of one (called at the first
call), or ``None`` for the local default. Told apart by type: a guard is an instance of one of
the two guard classes (they have ``run``, which the decorators call); anything else callable is
a factory."""


class _Binding:
    """What the decorator computes once per decorated function."""

    def __init__(
        self,
        fn: Callable[..., Any],
        guard: GuardArgument,
        key_arg: str | None,
        key: Selector | None,
        payload: Selector | bool | None,
        exclude: Sequence[str],
        scope: str | Callable[[dict[str, Any]], str] | None,
    ) -> None:
        if (key_arg is None) == (key is None):
            raise ValueError("give exactly one of key_arg= or key=")
        self.fn = fn
        self.signature = inspect.signature(fn)
        if key_arg is not None and key_arg not in self.signature.parameters:
            raise ValueError(f"{fn.__qualname__} has no argument {key_arg!r}")
        self._guard = guard
        self._plain = _plain_parameters(self.signature)
        self.key_arg = key_arg
        self.key = key
        self.payload = payload
        self.exclude = frozenset(exclude)
        self.scope = scope
        self._result_type: Any = UNSET
        self._resolved: AnyIdempotency | None = None
        # Worked out once, not per call: whether any parameter is excluded, and the field path
        # of a plain ``key`` expression (``order.id``), whose string value is the key itself.
        self._keeps_all = self.exclude.isdisjoint(self.signature.parameters)
        self._key_path = _plain_path(key)

    @property
    def guard(self) -> AnyIdempotency:
        """The guard, resolved at the first call (a factory called, or the local default)."""
        resolved = self._resolved
        if resolved is None:
            g = self._guard
            if g is None:
                resolved = Idempotency()  # no configuration: the local engine file
            elif isinstance(g, (Idempotency, AsyncIdempotency)):
                resolved = g
            else:
                resolved = g()
            self._resolved = resolved
        return resolved

    @property
    def result_type(self) -> Any:
        if self._result_type is UNSET:
            try:
                hint = typing.get_type_hints(self.fn).get("return")
            except Exception:  # unresolvable forward references: replay plain JSON
                hint = None
            # None for a type decoded JSON already is (dict[str, Any]...): no check per replay
            native = hint in (None, type(None), Any) or serialization.json_native(hint)
            self._result_type = None if native else hint
        return self._result_type

    def arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        if self._plain is not None:
            fast = _bind_plain(self._plain, args, kwargs)
            if fast is not None:
                if self._keeps_all:
                    return fast
                return {k: v for k, v in fast.items() if k not in self.exclude}
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return {k: v for k, v in bound.arguments.items() if k not in self.exclude}

    def identify_call(self, call: tuple[tuple[Any, ...], dict[str, Any]]) -> _Identity:
        """:meth:`identify` of a call's ``(args, kwargs)``."""
        return self.identify(self.arguments(*call))

    def identify(self, arguments: dict[str, Any]) -> tuple[str, Any, str | None]:
        if self.key_arg is not None:
            value = arguments.get(self.key_arg)
            if value is None or value == "":
                raise MissingKeyError(f"argument {self.key_arg!r} is empty")
            key = value if isinstance(value, str) else str(value)
        else:
            path = self._key_path
            found = None if path is None else walk(arguments, path)
            if type(found) is str and found:  # what key_from gives, without its general path
                key = found
            else:
                key = key_from(arguments, self.key, self.guard.config.hash_function)
        if self.payload is False:
            payload: Any = UNSET
        elif self.payload is None or self.payload is True:
            payload = arguments
        else:
            payload = select(arguments, self.payload)
        scope = self.scope(arguments) if callable(self.scope) else self.scope
        return key, payload, scope


def _plain_path(key: Selector | None) -> tuple[str, ...] | None:
    """``key``'s field path when it is a plain JMESPath path; an invalid expression is left
    to raise where it always has, at the first call."""
    if not isinstance(key, str):
        return None
    try:
        return key_path(key)
    except ValueError:  # jmespath's ParseError
        return None


_EMPTY = inspect.Parameter.empty
_PLAIN_KINDS = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)

# (name, default, may be passed by position) per parameter, in signature order
_Plain = tuple[tuple[str, Any, bool], ...]


def _plain_parameters(signature: inspect.Signature) -> _Plain | None:
    """The parameters, when none is positional-only or variadic (``*args``, ``**kw``)."""
    params = signature.parameters.values()
    if any(p.kind not in _PLAIN_KINDS for p in params):
        return None
    return tuple(
        (p.name, p.default, p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in params
    )


def _bind_plain(
    params: _Plain, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, Any] | None:
    """What ``signature.bind`` + ``apply_defaults`` give for a well-formed call, without
    building a BoundArguments; ``None`` for anything else (inspect then binds, or raises)."""
    if len(args) > len(params):
        return None
    out: dict[str, Any] = {}
    used = 0
    for i, (name, default, positional) in enumerate(params):
        if i < len(args):
            if not positional or name in kwargs:
                return None
            out[name] = args[i]
        elif name in kwargs:
            out[name] = kwargs[name]
            used += 1
        elif default is not _EMPTY:
            out[name] = default
        else:
            return None  # missing: let inspect raise its TypeError
    return out if used == len(kwargs) else None


def idempotent(
    guard: GuardArgument = None,
    *,
    key_arg: str | None = None,
    key: Selector | None = None,
    payload: Selector | bool | None = None,
    exclude: Sequence[str] = ("self", "cls"),
    scope: str | Callable[[dict[str, Any]], str] | None = None,
    lease: float | None = None,
    budget: float | None = None,
    reconcile: AnyHook | None = None,
) -> Callable[[F], F]:
    """Make a sync or async function run once per key; duplicates get its stored result.

    ``guard`` is an :class:`Idempotency` (or :class:`~.aio.AsyncIdempotency` for coroutine
    functions; a sync guard also works there, driven from a thread), a factory of one, or
    ``None`` for the local default. ``exclude`` names arguments kept out of the fingerprint
    (sessions, loggers). ``budget`` is the time budget of each call, the function included
    (default: the guard's ``config.budget``). ``reconcile`` decides for a call whose earlier
    run marked recovery points and died (:mod:`.recovery`; default: the guard's hook)."""

    def decorate(fn: F) -> F:
        binding = _Binding(fn, guard, key_arg, key, payload, exclude, scope)
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                g = binding.guard
                found = _keyed(g, binding.identify_call, (args, kwargs), fn)
                if found is None:
                    return await fn(*args, **kwargs)
                k, p, s = found
                call = functools.partial(fn, *args, **kwargs)
                with reconciling_with(reconcile):
                    if isinstance(g, Idempotency):
                        return await _sync_guard_async_fn(
                            g, k, call, p, s, binding.result_type, lease, budget
                        )
                    return await g.run(
                        k,
                        call,
                        p,
                        scope=s,
                        result_type=binding.result_type,
                        lease=lease,
                        budget=budget,
                    )

            async_wrapper.__wrapped_idempotency__ = binding  # type: ignore[attr-defined]
            return typing.cast(F, async_wrapper)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            g = binding.guard
            found = _keyed(g, binding.identify_call, (args, kwargs), fn)
            if found is None:
                return fn(*args, **kwargs)
            k, p, s = found
            call = functools.partial(fn, *args, **kwargs)
            with reconciling_with(reconcile):
                return g.run(
                    k, call, p, scope=s, result_type=binding.result_type, lease=lease, budget=budget
                )

        wrapper.__wrapped_idempotency__ = binding  # type: ignore[attr-defined]
        return typing.cast(F, wrapper)

    return decorate


async def _sync_guard_async_fn(
    guard: Idempotency,
    key: str,
    fn: Callable[[], Any],
    payload: Any,
    scope: str | None,
    result_type: Any,
    lease: float | None,
    budget: float | None,
) -> Any:
    """``guard.run`` for a coroutine function, each call of the guard in a worker thread; one
    budget (``budget``, else the guard's) for the claim, the function and the completion."""
    from .guard import Replay

    started = time.monotonic()
    whole = guard.config.budget if budget is None else budget
    deadline = guard._deadline(whole)

    def left() -> float | None:
        return None if whole is None else whole - (time.monotonic() - started)

    claim = functools.partial(guard.claim, key, payload, scope=scope, lease=lease, budget=left())
    outcome = await asyncio.to_thread(claim)
    if isinstance(outcome, Replay):
        return outcome.answer(result_type, guard.config.on_replay)
    await asyncio.to_thread(guard._check_left, outcome, deadline)  # budget spent: never run fn
    try:
        with working(outcome, guard):
            result = await fn()
    except BaseException as exc:
        await asyncio.to_thread(guard._fail_quietly, outcome, exc)
        raise
    await asyncio.to_thread(functools.partial(guard.complete, outcome, result, budget=left()))
    return result


_Identity = tuple[str, Any, str | None]  # key, payload, scope


def _keyed(
    guard: AnyIdempotency, identify: Callable[[A], _Identity], argument: A, fn: Callable[..., Any]
) -> _Identity | None:
    """``identify(argument)``, or ``None`` when the call runs directly: the guard is disabled,
    or there is no key and ``on_missing_key`` says to run unguarded."""
    if guard.config.disabled:
        return None
    try:
        return identify(argument)
    except MissingKeyError as missing:
        if not _unguarded(guard, missing, fn):
            raise
        return None


def _unguarded(guard: AnyIdempotency, missing: MissingKeyError, fn: Callable[..., Any]) -> bool:
    """Whether a call without a key runs unguarded (``config.on_missing_key``); if so, the
    warning is logged and ``firstwrite_unguarded_runs_total`` counted."""
    if guard.config.on_missing_key != "run-unguarded":
        return False
    _log.warning("%s runs unguarded: %s", getattr(fn, "__qualname__", fn), missing)
    metrics = guard.metrics
    if metrics.enabled:
        metrics.count("firstwrite_unguarded_runs_total", reason="missing_key")
    return True


def idempotent_handler(
    guard: GuardArgument = None,
    *,
    key: Selector,
    payload: Selector | bool | None = None,
    scope: str | Callable[[dict[str, Any]], str] | None = None,
    lease_margin: float = 1.0,
    on_error: Literal["answer", "raise"] = "answer",
    header: str = "Idempotency-Key",
    reconcile: AnyHook | None = None,
) -> Callable[[F], F]:
    """The AWS Lambda form: ``handler(event, context)``, key and payload selected from the
    event (JMESPath or callable; ``payload`` defaults to the whole event).

    The lease is capped at the invocation's remaining time (``context.get_remaining_time_in_
    millis()``) minus ``lease_margin``: when Lambda kills a timed-out invocation, its claim is
    free for the retry right away instead of blocking it for a full lease. The same remaining
    time minus ``lease_margin`` is the call's time budget: the store's retries stop before
    Lambda would kill the invocation (:class:`~.errors.DeadlineExceededError`). Without a
    context that says, the guard's ``config.budget`` applies.

    Behind API Gateway (v1, v2), an ALB or a Function URL (:mod:`firstwrite.http.lambda_proxy`
    tells the event shapes apart), an error of the layer is answered with the proxy response
    the middleware would send (409 + ``Retry-After`` in progress, 410 late retry, 422 mismatch,
    400 no key, 503 + ``Retry-After`` budget spent...), and a replayed proxy response carries
    ``Idempotent-Replayed: true``; ``on_error="raise"`` raises the errors instead (and marks no
    replay). ``header`` names the key header in the problems' details. Other events (SQS, a
    direct call) get the errors raised, as before. A completion that fails after the function
    returned gives the function's response (logged; a retry after the lease may run it again),
    as the middleware does. ``reconcile``: as for :func:`idempotent`."""
    if on_error not in ("answer", "raise"):
        raise ValueError(f"on_error must be 'answer' or 'raise', not {on_error!r}")

    def decorate(fn: F) -> F:
        binding = _Binding(lambda event, context=None: None, guard, None, key, None, (), scope)

        def identify(event: Any) -> tuple[str, Any, str | None]:
            k = key_from(event, key, binding.guard.config.hash_function)
            if payload is False:
                p: Any = UNSET
            elif payload is None or payload is True:
                p = event
            else:
                p = select(event, payload)
            s = scope(event) if callable(scope) else scope
            return k, p, s

        def lease_for(context: Any) -> float | None:
            remaining = getattr(context, "get_remaining_time_in_millis", None)
            if not callable(remaining):
                return None
            seconds = float(remaining()) / 1000 - lease_margin
            return max(1.0, min(float(binding.guard.config.lease), seconds))

        def budget_for(context: Any) -> float | None:
            remaining = getattr(context, "get_remaining_time_in_millis", None)
            if not callable(remaining):
                return None
            return max(0.0, float(remaining()) / 1000 - lease_margin)

        hints_fn = fn

        def result_type() -> Any:
            try:
                hint = typing.get_type_hints(hints_fn).get("return")
            except Exception:
                return None
            return None if hint in (None, type(None), Any) else hint

        answers = on_error == "answer"

        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def async_handler(event: Any, context: Any = None) -> Any:
                run = _invocation(fn, event, context)
                try:
                    g = binding.guard
                    found = _keyed(g, identify, event, fn)
                    if found is None:
                        return await fn(event, context)
                    k, p, s = found
                    with reconciling_with(reconcile):
                        if isinstance(g, Idempotency):
                            result = await _sync_guard_async_fn(
                                g,
                                k,
                                run.acall,
                                p,
                                s,
                                result_type(),
                                lease_for(context),
                                budget_for(context),
                            )
                        else:
                            result = await g.run(
                                k,
                                run.acall,
                                p,
                                scope=s,
                                result_type=result_type(),
                                lease=lease_for(context),
                                budget=budget_for(context),
                            )
                except IdempotencyError as error:
                    return run.answer(error, answers, header)
                return run.replied(result)

            return typing.cast(F, async_handler)

        @functools.wraps(fn)
        def handler(event: Any, context: Any = None) -> Any:
            run = _invocation(fn, event, context)
            try:
                g = binding.guard
                found = _keyed(g, identify, event, fn)
                if found is None:
                    return fn(event, context)
                k, p, s = found
                with reconciling_with(reconcile):
                    result = g.run(
                        k,
                        run.call,
                        p,
                        scope=s,
                        result_type=result_type(),
                        lease=lease_for(context),
                        budget=budget_for(context),
                    )
            except IdempotencyError as error:
                return run.answer(error, answers, header)
            return run.replied(result)

        return typing.cast(F, handler)

    return decorate


def _invocation(fn: Callable[..., Any], event: Any, context: Any) -> Any:
    """:class:`firstwrite.http.lambda_proxy.Invocation` of ``fn`` for one event."""
    from firstwrite.http import lambda_proxy  # deferred: the HTTP package imports this one

    return lambda_proxy.Invocation(fn, event, context)
