"""Idempotency-Key for Django: a class for ``settings.MIDDLEWARE`` and a view decorator.

Both are configured by the ``FIRSTWRITE_IDEMPOTENCY`` settings dict (:func:`http_config`
says which keys; each is an :class:`~firstwrite.http.HttpConfig` field in upper case, plus
``GUARD``, ``TABLE`` and ``SCOPE``) and make the same decisions as the ASGI and WSGI
middlewares: the rules are :mod:`.core`'s, the guard calls :mod:`.guarding`'s, the problem
types :mod:`.problems`'. This module moves Django's requests and responses in and out::

    MIDDLEWARE = [..., "django.contrib.auth.middleware.AuthenticationMiddleware",
                  "firstwrite.http.django.IdempotencyMiddleware"]
    FIRSTWRITE_IDEMPOTENCY = {"TABLE": "idempotency", "METHODS": ["POST"], "SCOPE": "user"}

:class:`IdempotencyMiddleware` runs sync or async, as Django's handler does. :func:`idempotent`
guards one view with its own options (``@idempotent(require_key=True, wait=0)``) on a function
view, above ``@api_view``, or on an ``APIView`` method; the middleware leaves such a view to it.
Django REST framework responses are rendered before they are stored, so a replay carries the
bytes the client saw. Django is imported here only (the ``django`` extra).

Size: one concept, the Django adapter whole (settings, middleware, view decorator, responses).
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any, cast

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.http import HttpRequest as DjangoRequest
from django.http import HttpResponse, HttpResponseBase, StreamingHttpResponse
from django.utils.module_loading import import_string

from firstwrite.idempotency import UNSET, Claim, Guard, Idempotency, IdempotencyConfig, recovery
from firstwrite.idempotency import steps as guard_steps

from . import guarding
from .config import HttpConfig
from .context import RequestIdempotency
from .core import (
    UNSTORED_HEADER,
    Core,
    Headers,
    HeldBody,
    Plan,
    Replayed,
    Response,
    refuse_status_only_guard,
)
from .request import HttpRequest
from .routes import INHERIT, Fingerprint, Route
from .streamed_replies import StreamedReply

__all__ = ["SETTING", "IdempotencyMiddleware", "http_config", "idempotency", "idempotent"]

SETTING = "FIRSTWRITE_IDEMPOTENCY"
_MARK = "firstwrite_idempotency"  # the decorator's options, on the view it returns
_CONTEXT = "_firstwrite_idempotency"  # the guarded request's context, on the Django request
_CORE = "_firstwrite_idempotency_rules"  # and the rules it is guarded by
_OWN_KEYS = frozenset({"GUARD", "TABLE", "SCOPE", "RECONCILE"})
_FIELDS = frozenset(HttpConfig.__dataclass_fields__) - {"_key_regex", "principal"}
View = Callable[..., Any]


def http_config(options: Mapping[str, Any]) -> HttpConfig:
    """The :class:`HttpConfig` a ``FIRSTWRITE_IDEMPOTENCY`` dict stands for: each key is a
    field in upper case (``ROUTES``, ``METHODS``, ``REQUIRE_KEY``, ``WAIT``,
    ``MAX_STORED_RESPONSE``...; a ``ROUTES`` entry is a :class:`Route` or a dict of its
    arguments), and ``SCOPE`` is whose keys these are: ``"user"`` (the authenticated user's
    primary key; an anonymous caller gets 401), a callable ``(django_request) -> str | None``
    or its dotted path (a tenant header, an API key). ``ImproperlyConfigured`` for anything
    else, or a value ``HttpConfig`` refuses."""
    unknown = sorted(k for k in options if k.lower() not in _FIELDS and k not in _OWN_KEYS)
    if unknown:
        raise ImproperlyConfigured(f"{SETTING}: unknown keys {', '.join(unknown)}")
    fields = {k.lower(): v for k, v in options.items() if k not in _OWN_KEYS}
    who = _principal(options.get("SCOPE"))
    try:
        if "routes" in fields:
            fields["routes"] = [r if isinstance(r, Route) else Route(**r) for r in fields["routes"]]
        return HttpConfig(**fields, principal=who)
    except (TypeError, ValueError) as bad:
        raise ImproperlyConfigured(f"{SETTING}: {bad}") from bad


def _principal(scope: Any) -> Callable[[HttpRequest], str | None] | None:
    if scope is None:
        return None
    if scope == "user":
        scope = _user
    elif isinstance(scope, str):
        scope = _imported("SCOPE", scope)
    if not callable(scope):
        raise ImproperlyConfigured(f'{SETTING}["SCOPE"] is "user", a callable or its path')
    chosen = cast(Callable[[DjangoRequest], Any], scope)

    def principal(request: HttpRequest) -> str | None:
        who = chosen(cast(_View, request).django)
        return None if who is None else str(who)

    return principal


def _imported(key: str, path: str) -> Any:
    try:
        return import_string(path)
    except ImportError as missing:
        raise ImproperlyConfigured(f'{SETTING}["{key}"]: {missing}') from missing


def _user(request: DjangoRequest) -> str | None:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return None
    return str(user.pk)


def _guard(options: Mapping[str, Any]) -> Guard:
    chosen = options.get("GUARD")
    if chosen is None:
        table = options.get("TABLE")
        return Idempotency(None if table is None else IdempotencyConfig(table_name=table))
    if isinstance(chosen, str):
        chosen = _imported("GUARD", chosen)
    if isinstance(chosen, type) or (callable(chosen) and not hasattr(chosen, "claim")):
        chosen = chosen()
    if getattr(chosen, "is_async", True):
        raise ImproperlyConfigured(f'{SETTING}["GUARD"] must be a synchronous guard (Idempotency)')
    return cast(Guard, chosen)


def _reconcile(options: Mapping[str, Any]) -> recovery.ReconcileHook | None:
    """The ``RECONCILE`` hook: a blocking callable or its dotted path (``None``: the guard's)."""
    chosen = options.get("RECONCILE")
    if isinstance(chosen, str):
        chosen = _imported("RECONCILE", chosen)
    if chosen is not None and not callable(chosen):
        raise ImproperlyConfigured(f'{SETTING}["RECONCILE"] must be a callable or its path')
    return recovery.check_blocking(chosen)  # a coroutine function: ConfigurationError


class _View(HttpRequest):
    """The middleware's view of a Django request (``raw`` is its ``META``); the ``SCOPE``
    callable gets the Django request itself."""

    __slots__ = ("django",)

    def __init__(self, request: DjangoRequest) -> None:
        meta = request.META
        super().__init__(
            request.method or "GET",
            request.path_info,
            meta.get("QUERY_STRING", ""),
            meta,
            request.headers.items(),
        )
        self.django = request


class _Guarding:
    """The settings' guard and rules, and the per-view rules of decorated views."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        self.config = http_config(options)
        self.core = Core(self.config)
        self.guard = _guard(options)
        try:
            refuse_status_only_guard(self.guard.config.replay)
        except ValueError as bad:
            raise ImproperlyConfigured(f"{SETTING}: {bad}") from bad
        self._has_store = self.guard.config.result_store is not None
        self.reconcile = _reconcile(options)
        self._views: dict[object, Core] = {}
        self._lock = threading.Lock()

    def view_core(self, options: dict[str, Any]) -> Core:
        """The rules of a decorated view: the settings' with the view's own route."""
        key = tuple(sorted((k, repr(v)) for k, v in options.items()))
        with self._lock:
            core = self._views.get(key)
            if core is None:
                methods = options.pop("methods", None) or self.config.methods
                options.setdefault("require_key", self.config.require_key)
                route = Route("/*", methods=methods, **options)
                core = self._views[key] = Core(replace(self.config, routes=[route]))
            return core

    def prepare(self, core: Core, request: DjangoRequest) -> Plan | Response | None:
        """The request's plan, an answer to send at once, or ``None`` (run unguarded)."""
        view = _View(request)
        route = core.route_for(view.method, view.path)
        if route is None or self.guard.config.disabled:
            return None
        plan = core.plan(route, request.headers.get(self.config.header), view)
        if not isinstance(plan, Plan):
            return plan
        limit = self.config.max_request_body
        declared = request.META.get("CONTENT_LENGTH") or "0"
        if (declared.isdigit() and int(declared) > limit) or len(request.body) > limit:
            return core.too_large(limit)
        return plan

    def attach(self, core: Core, request: DjangoRequest, plan: Plan) -> RequestIdempotency:
        payload = core.payload(plan, request.body) if core.has_payload(plan) else UNSET
        context = RequestIdempotency(core, plan, payload, self.guard, self.reconcile)
        setattr(request, _CONTEXT, context)
        setattr(request, _CORE, core)
        return context

    def starting(
        self, core: Core, request: DjangoRequest, plan: Plan | Response | None
    ) -> guard_steps.Steps[HttpResponseBase | None]:
        """Claim the key of a request planned by :meth:`prepare`: ``None`` to run the view,
        or the answer to send instead (a replay, a problem)."""
        if plan is None:
            return None
        if not isinstance(plan, Plan):
            return _django_response(plan)
        context = self.attach(core, request, plan)
        if plan.route.transactional:
            return None
        outcome = yield from guarding.claim(core, plan, context.payload)
        if isinstance(outcome, Claim):
            context.claim = outcome
            return None
        _detach(request)  # answered: the answer is not the view's, nothing to store
        return _django_response(outcome)

    def begin(self, core: Core, request: DjangoRequest) -> HttpResponseBase | None:
        """:meth:`starting`, its guard calls made."""
        steps = self.starting(core, request, self.prepare(core, request))
        with recovery.reconciling_with(self.reconcile):
            return guard_steps.drive(steps, self.guard)

    async def abegin(self, core: Core, request: DjangoRequest) -> HttpResponseBase | None:
        """:meth:`starting` for an async view (a ``SCOPE`` callable runs in a thread)."""
        if self.config.principal is not None:
            plan = await sync_to_async(self.prepare)(core, request)
        else:
            plan = self.prepare(core, request)
        with recovery.reconciling_with(self.reconcile):
            return await guard_steps.adrive(self.starting(core, request, plan), self.guard)

    def working(self, request: DjangoRequest) -> AbstractContextManager[None]:
        """Around the view: :func:`~firstwrite.idempotency.recovery_point` marks its claim."""
        context = getattr(request, _CONTEXT, None)
        return guard_steps.working(None if context is None else context.claim, self.guard)

    def finishing(
        self, request: DjangoRequest, response: HttpResponseBase, started: float
    ) -> guard_steps.Steps[HttpResponseBase]:
        """Store the view's response, or release or settle the key (:mod:`.guarding`)."""
        context = getattr(request, _CONTEXT, None)
        if context is None:
            return response
        core: Core = getattr(request, _CORE)
        _detach(request)
        if context.answer is not None:  # claim_with found the key taken
            return _django_response(context.answer)
        status = response.status_code
        if response.streaming or core.streams_media(response.get("Content-Type", "")):
            yield from guarding.settle_unstored(core, context, status, "streaming")
            response[UNSTORED_HEADER.decode()] = "streaming"
            return response
        _render(response)
        # With a result store, a body over the spool threshold is stored from a temporary
        # file (no stored-form copy of it in memory beside Django's own).
        held = HeldBody(core.held_limit(self._has_store), core.spool_over(self._has_store))
        if held.hold(cast(HttpResponse, response).content):
            held.forget()
            yield from guarding.settle_unstored(core, context, status, "size-exceeded")
            response[UNSTORED_HEADER.decode()] = "size-exceeded"
            return response
        headers: Headers = [(n.encode("latin-1"), v.encode("latin-1")) for n, v in response.items()]
        reason = response.reason_phrase
        try:
            answer, extra = yield from guarding.finish(
                core, context, status, headers, held.body(), reason, started
            )
        finally:
            held.forget()
        if answer is not None:
            return _django_response(answer)
        for name, value in extra:
            response[name.decode("latin-1")] = value.decode("latin-1")
        return response


def _detach(request: DjangoRequest) -> None:
    """The request is no longer guarded (answered, or its response handled)."""
    delattr(request, _CONTEXT)
    delattr(request, _CORE)


def _render(response: HttpResponseBase) -> None:
    """A deferred response (a ``TemplateResponse``, a REST framework ``Response``) rendered:
    what is stored is what the client gets."""
    render = getattr(response, "render", None)
    if render is not None and not getattr(response, "is_rendered", True):
        render()


def _django_response(answer: Response | StreamedReply) -> HttpResponseBase:
    """A replay or a problem as a Django response (headers as given, nothing added); a replay
    streamed from a result store as a ``StreamingHttpResponse``."""
    if isinstance(answer, StreamedReply):
        streaming = StreamingHttpResponse(answer.chunks, status=answer.status, reason=answer.reason)
        del streaming["Content-Type"]
        for key, text in answer.headers:
            streaming[key] = text
        if answer.length is not None:
            streaming["Content-Length"] = str(answer.length)
        return streaming
    status, headers, body = answer
    reason = answer.reason if isinstance(answer, Replayed) else None
    response = HttpResponse(body, status=status, reason=reason)
    del response["Content-Type"]
    for name, value in headers:
        response[name.decode("latin-1")] = value.decode("latin-1")
    return response


_shared: _Guarding | None = None
_shared_lock = threading.Lock()


def _guarding() -> _Guarding:
    """The guarding the settings describe, built once (again after ``override_settings``)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = _Guarding(getattr(settings, SETTING, {}))
        return _shared


def _reset(*, setting: str, **_: Any) -> None:
    global _shared
    if setting == SETTING:
        with _shared_lock:
            _shared = None


setting_changed.connect(_reset)


class IdempotencyMiddleware:
    """``"firstwrite.http.django.IdempotencyMiddleware"`` in ``settings.MIDDLEWARE``, after
    the authentication middleware when ``SCOPE`` is ``"user"``. Claims in ``process_view``
    (a replay or a problem answers there; the view does not run) and stores the response on
    its way out, rendered. Sync or async, as the handler around it."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[DjangoRequest], Any]) -> None:
        self.get_response = get_response
        _guarding()  # a mistake in the settings is ImproperlyConfigured at startup
        self._async = iscoroutinefunction(get_response)
        if self._async:
            markcoroutinefunction(self)

    def __call__(self, request: DjangoRequest) -> Any:
        if self._async:
            return self._acall(request)
        started = _now()
        try:
            response = self.get_response(request)
        finally:
            recovery.RUNNING.set(None)  # set by process_view for the view (see there)
        guarding = _guarding()
        return guard_steps.drive(guarding.finishing(request, response, started), guarding.guard)

    async def _acall(self, request: DjangoRequest) -> HttpResponseBase:
        started = _now()
        try:
            get_response = cast(Callable[[DjangoRequest], Awaitable[Any]], self.get_response)
            response = await get_response(request)
        finally:
            recovery.RUNNING.set(None)  # set by process_view for the view (see there)
        guarding = _guarding()
        steps = guarding.finishing(request, response, started)
        return await guard_steps.adrive(steps, guarding.guard)

    def process_view(
        self, request: DjangoRequest, view: View, args: Any, kwargs: Any
    ) -> HttpResponse | None:
        """Claim the key of a guarded request (a decorated view claims its own); the view's
        recovery points mark the claim (``RUNNING``, cleared by ``__call__``)."""
        if _decorated(view, request):
            return None
        guarding = _guarding()  # the settings' (again after override_settings)
        answer = guarding.begin(guarding.core, request)
        context = getattr(request, _CONTEXT, None)
        claim = None if context is None else context.claim
        if answer is None and claim is not None:
            recovery.RUNNING.set((guarding.guard, claim))
        return answer


def _decorated(view: View, request: DjangoRequest) -> bool:
    """A view :func:`idempotent` guards: a function view, or a class-based view (Django's
    or REST framework's) whose handler for this method is decorated."""
    if hasattr(view, _MARK):
        return True
    cls = getattr(view, "view_class", None) or getattr(view, "cls", None)
    handler = getattr(cls, (request.method or "").lower(), None)
    return hasattr(handler, _MARK)


def idempotent(
    view: View | None = None,
    *,
    methods: tuple[str, ...] | None = None,
    require_key: bool | None = None,
    fingerprint: Fingerprint | Any = INHERIT,
    lease: float | None = None,
    wait: float | None = None,
    budget: float | None = None,
    transactional: bool = False,
) -> Any:
    """Guard one view with its own options over the settings' (``None``: the settings'):
    ``@idempotent`` or ``@idempotent(require_key=True, wait=0)`` on a function view (above
    ``@api_view``) or on a class-based view's method (an ``APIView``'s ``post``). The
    options are :class:`Route`'s; the view is guarded for ``methods`` (default: the
    settings' ``METHODS``) whatever its path."""
    options: dict[str, Any] = {"transactional": transactional}
    for name, value in (("lease", lease), ("wait", wait), ("budget", budget)):
        if value is not None:
            options[name] = value
    if methods is not None:
        options["methods"] = tuple(methods)
    if require_key is not None:
        options["require_key"] = require_key
    if fingerprint is not INHERIT:
        options["fingerprint"] = fingerprint

    def decorate(function: View) -> View:
        if iscoroutinefunction(function):

            @functools.wraps(function)
            async def aguarded(*args: Any, **kwargs: Any) -> Any:
                request, owner = _request_of(args)
                guarding = _guarding()
                answer = await guarding.abegin(guarding.view_core(dict(options)), request)
                if answer is not None:
                    return answer
                started = _now()
                with guarding.working(request):
                    done = await function(*args, **kwargs)
                response = _finalized(owner, request, done)
                steps = guarding.finishing(request, response, started)
                return await guard_steps.adrive(steps, guarding.guard)

            setattr(aguarded, _MARK, options)
            return markcoroutinefunction(aguarded)

        @functools.wraps(function)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            request, owner = _request_of(args)
            guarding = _guarding()
            answer = guarding.begin(guarding.view_core(dict(options)), request)
            if answer is not None:
                return answer
            started = _now()
            with guarding.working(request):
                done = function(*args, **kwargs)
            response = _finalized(owner, request, done)
            return guard_steps.drive(guarding.finishing(request, response, started), guarding.guard)

        setattr(guarded, _MARK, options)
        return guarded

    return decorate if view is None else decorate(view)


def _request_of(args: tuple[Any, ...]) -> tuple[DjangoRequest, Any]:
    """The Django request a view was called with, and the class-based view (``self``) when
    the decorated function is its method. A REST framework ``Request`` wraps it."""
    owner, request = (None, args[0]) if args and hasattr(args[0], "META") else (args[0], args[1])
    inner = getattr(request, "_request", request)
    if not isinstance(inner, DjangoRequest):
        raise TypeError(f"@idempotent decorates a view; its arguments hold no request: {args!r}")
    if inner is not request and owner is None:
        raise TypeError("@idempotent goes above @api_view (it must see the rendered response)")
    return inner, owner


def _finalized(owner: Any, request: DjangoRequest, response: HttpResponseBase) -> Any:
    """A REST framework view method's response, given its renderer as ``dispatch`` would
    (it does again, harmlessly) so that it can be rendered and stored."""
    finalize = getattr(owner, "finalize_response", None)
    if finalize is not None and not getattr(response, "is_rendered", True):
        response = finalize(owner.request, response)
    return response


def idempotency(request: DjangoRequest) -> RequestIdempotency | None:
    """The guarded request's context (key, scope, claim, ``claim_with`` on a transactional
    route or view), or ``None`` when the request is not guarded."""
    inner = getattr(request, "_request", request)
    return cast(RequestIdempotency | None, getattr(inner, _CONTEXT, None))


def _now() -> float:
    return time.monotonic()
