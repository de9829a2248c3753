"""DynamoDB clients built for the layer: their own retries and timeouts fit the time budget.

:func:`dynamodb_client` is ``boto3.client("dynamodb", ...)`` with a configuration the layer
accounts for: one attempt per call (the layer's :class:`~.config.RetryPolicy` does the
retrying, and stops at the call's budget), and connect and read timeouts that let one attempt
that hangs end within the budget. The local engine's client (:mod:`.local`) is built the same
way. A client you build yourself works too: the layer keeps botocore's retries inside the budget
(see ``docs/patterns.md``, Time budget); only its timeouts are yours to choose.

boto3 is imported when a client is built, not when this module is: loading the layer loads no
SDK, and the SDK's configuration class is taken from a client (``type(client.meta.config)``), so
the layer names no botocore module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .config import IdempotencyConfig

__all__ = ["dynamodb_client", "sdk_settings"]

CONNECT_SHARE = 0.25
"""The share of the budget one attempt may spend connecting."""
READ_SHARE = 0.5
"""The share of the budget one attempt may spend waiting for its answer."""


def sdk_settings(budget: float | None) -> dict[str, Any]:
    """The SDK configuration (``Config(**settings)``) of a client built for ``budget``: a single
    attempt per call, and timeouts that end a hung attempt within the budget."""
    settings: dict[str, Any] = {"retries": {"total_max_attempts": 1}}
    if budget is not None:
        settings["connect_timeout"] = budget * CONNECT_SHARE
        settings["read_timeout"] = budget * READ_SHARE
    return settings


def configured(build: Callable[..., Any], budget: float | None, **client_kwargs: Any) -> Any:
    """``build(**client_kwargs, config=...)`` with :func:`sdk_settings` merged over the
    ``config`` given (if any); the configuration class is read off a first client."""
    given = client_kwargs.pop("config", None)
    if given is not None:
        return build(**client_kwargs, config=given.merge(type(given)(**sdk_settings(budget))))
    config_class = type(build(**client_kwargs).meta.config)
    return build(**client_kwargs, config=config_class(**sdk_settings(budget)))


def dynamodb_client(config: IdempotencyConfig | None = None, **client_kwargs: Any) -> Any:
    """A boto3 DynamoDB client for a guard with ``config`` (its ``budget``): the arguments of
    ``boto3.client("dynamodb", ...)`` (``region_name``, ``endpoint_url``, ``config``...), with
    :func:`sdk_settings` taking precedence in ``config``."""
    import boto3

    budget = (config or IdempotencyConfig()).budget
    return configured(lambda **kw: boto3.client("dynamodb", **kw), budget, **client_kwargs)
