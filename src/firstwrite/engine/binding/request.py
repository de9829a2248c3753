"""The quick path's request building: botocore's User-Agent and endpoint parameters, compiled.

Two steps botocore takes before ``before-call`` compute the same thing call after call:

- :class:`CachedUserAgent` keeps each ``User-Agent`` string ``UserAgentString.to_string`` has
  built, keyed on everything it reads (the creator's fields, the client configuration's
  user-agent fields, the feature ids in order); botocore builds every string the first time,
  and always if ``modify_components`` was replaced.
- :class:`CompiledEndpointParams` looks the endpoint ruleset's parameters up in botocore's
  order from a plan made once per operation, still emitting ``before-endpoint-resolution`` for
  the builtins and registering the same feature ids. botocore still resolves the endpoint.

Neither changes what botocore sends or raises: ``tests/engine/binding/test_binding_request.py``
checks, for every operation and random parameters, feature ids and configurations, that the
strings, endpoint parameters and feature ids are botocore's own. Both are installed on the
quick path of synchronous clients only (:func:`install`); :func:`uninstall` puts botocore's
objects back. Details: docs/engine.md, "The quick path's compiled steps".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jmespath
from botocore import useragent
from botocore.context import get_context
from botocore.model import OperationModel
from botocore.regions import EndpointResolverBuiltins, EndpointRulesetResolver
from botocore.useragent import UserAgentString

__all__ = ["CachedUserAgent", "CompiledEndpointParams", "install", "uninstall"]

_MODIFY_COMPONENTS = useragent.modify_components
_MISSING = object()
_MAX_STRINGS = 256  # distinct feature sets are few; a bound keeps a pathological caller finite
_BUILTINS = frozenset(EndpointResolverBuiltins.__members__.values())


def _config_key(config: Any) -> tuple[Any, ...] | None:
    """Every client-configuration field ``UserAgentString.to_string`` reads."""
    if not config:
        return None
    retries = config.retries
    return (
        getattr(config, "_supplied_user_agent", _MISSING),
        config.user_agent,
        bool(retries),
        retries.get("mode") if retries else None,
        config.endpoint_discovery_enabled,
        config.user_agent_appid,
        config.user_agent_extra,
    )


class CachedUserAgent:
    """A client's ``UserAgentString`` whose ``to_string`` keeps what it built (see the
    module docs); every other attribute is the creator's own."""

    def __init__(self, creator: UserAgentString) -> None:
        self.creator = creator
        self._state = dict(vars(creator))
        self._strings: dict[tuple[Any, ...], str] = {}

    @staticmethod
    def wrap(creator: Any) -> Any:
        """``creator`` with its strings kept, if it is botocore's own ``UserAgentString``."""
        if type(creator) is not UserAgentString:
            return creator
        return CachedUserAgent(creator)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.creator, name)

    def to_string(self) -> str:
        creator = self.creator
        if useragent.modify_components is not _MODIFY_COMPONENTS or vars(creator) != self._state:
            built: str = creator.to_string()
            return built
        context = get_context()
        client_features = creator._client_features or set()
        # The order to_string joins them in: the same union of the same sets.
        features = client_features.union(set() if context is None else context.features)
        key = (tuple(features), _config_key(creator._client_config))
        string = self._strings.get(key)
        if string is None:
            string = creator.to_string()
            if len(self._strings) >= _MAX_STRINGS:
                self._strings.clear()
            self._strings[key] = string
        return string


# One ruleset parameter's sources, in botocore's order: (name, static context value, the
# call's member, the operation context's compiled JMESPath, the client context variable,
# the builtin).
_Step = tuple[str, Any, str | None, Any, str | None, str | None]


class CompiledEndpointParams:
    """``EndpointRulesetResolver._get_provider_params`` from a plan per operation (see the
    module docs); installed on the resolver instance, in place of the method."""

    def __init__(self, resolver: EndpointRulesetResolver) -> None:
        self.resolver = resolver
        self._original: Callable[..., dict[str, Any]] = resolver._get_provider_params
        self._plans: dict[str, tuple[OperationModel, list[_Step] | None]] = {}

    @staticmethod
    def wrap(resolver: Any) -> None:
        """Install on ``resolver`` if it is botocore's own synchronous resolver."""
        if type(resolver) is EndpointRulesetResolver and "_get_provider_params" not in vars(
            resolver
        ):
            resolver._get_provider_params = CompiledEndpointParams(resolver)

    @staticmethod
    def unwrap(resolver: Any) -> None:
        if isinstance(vars(resolver).get("_get_provider_params"), CompiledEndpointParams):
            del resolver._get_provider_params

    def _plan(self, model: OperationModel) -> list[_Step] | None:
        kept = self._plans.get(model.name)
        if kept is not None and kept[0] is model:
            return kept[1]
        resolver = self.resolver
        static = resolver._get_static_context_params(model)
        dynamic = resolver._get_dynamic_context_params(model)
        operation = model.operation_context_parameters
        client = resolver._get_client_context_params()
        plan: list[_Step] | None = []
        for name, definition in resolver._param_definitions.items():
            builtin = definition.builtin
            if builtin is not None and builtin not in _BUILTINS:
                plan = None  # botocore raises its own error for it
                break
            assert plan is not None
            path = operation[name]["path"] if name in operation else None
            plan.append(
                (
                    name,
                    static.get(name),
                    dynamic.get(name),
                    None if path is None else jmespath.compile(path),
                    client.get(name),
                    builtin,
                )
            )
        self._plans[model.name] = (model, plan)
        return plan

    def __call__(
        self, operation_model: OperationModel, call_args: Any, request_context: Any
    ) -> dict[str, Any]:
        plan = self._plan(operation_model)
        if plan is None:
            return self._original(operation_model, call_args, request_context)
        resolver = self.resolver
        builtins = resolver._get_customized_builtins(operation_model, call_args, request_context)
        client_context = resolver._client_context
        register = resolver._register_endpoint_feature_ids
        params: dict[str, Any] = {}
        for name, static, member, path, variable, builtin in plan:
            value = static
            if value is None and member is not None:
                value = call_args.get(member)
            if value is None and path is not None:
                value = path.search(call_args)
            if value is None and variable is not None:
                value = client_context.get(variable)
            if value is None and builtin is not None:
                value = builtins.get(builtin)
                if callable(value):
                    value = value()
            if value is not None:
                params[name] = value
                register(name, value)
        return params


def install(client: Any) -> None:
    """Cache the client's User-Agent strings and compile its endpoint parameters."""
    creator = getattr(client, "_user_agent_creator", None)
    if creator is not None:
        client._user_agent_creator = CachedUserAgent.wrap(creator)
    resolver = getattr(client, "_ruleset_resolver", None)
    if resolver is not None:
        CompiledEndpointParams.wrap(resolver)


def uninstall(client: Any) -> None:
    """Undo :func:`install`."""
    creator = getattr(client, "_user_agent_creator", None)
    if isinstance(creator, CachedUserAgent):
        client._user_agent_creator = creator.creator
    resolver = getattr(client, "_ruleset_resolver", None)
    if resolver is not None:
        CompiledEndpointParams.unwrap(resolver)
