"""A DynamoDB client's errors, recognised by their shape: the layer imports no botocore.

The layer works over any boto3-style client (boto3, aiobotocore, the local engine's bound
client); what it needs of their errors is said here once.

* A **client error** (DynamoDB answered, with an error) is an exception whose ``response`` is a
  mapping holding an ``Error`` mapping; its code is ``response["Error"]["Code"]``. That is
  botocore's ``ClientError`` and every modeled subclass of it
  (``client.exceptions.ConditionalCheckFailedException``...), and the layer's own
  :class:`~firstwrite.idempotency.errors.TableNotFoundError`.
* An **SDK error** is a client error, or an error the SDK raised without an answer: botocore's
  ``BotoCoreError`` family (a dropped connection, a timeout, a parameter it refused). Those
  carry no response to read, so they are recognised by the qualified names of the classes they
  derive from (``botocore.exceptions.BotoCoreError``...): a name is not an import.
* A **transport error**, retried as transient, is one of botocore's ``ConnectionError`` and
  ``HTTPClientError`` families (the request may or may not have reached DynamoDB), and the
  layer's own :class:`AttemptAbandoned` (an attempt given up at the call's deadline).

Any other exception is not the client's: the layer lets it through untouched.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

__all__ = [
    "AttemptAbandoned",
    "ClientErrorLike",
    "client_error_code",
    "error_code",
    "is_sdk_error",
    "is_transport_error",
    "response_of",
]

_ABANDONED = "firstwrite.idempotency.client_errors.AttemptAbandoned"
_SDK_BASES = frozenset({"botocore.exceptions.BotoCoreError", _ABANDONED})
_TRANSPORT_BASES = frozenset(
    {"botocore.exceptions.ConnectionError", "botocore.exceptions.HTTPClientError", _ABANDONED}
)


class AttemptAbandoned(Exception):
    """An attempt the layer stopped waiting for at the call's deadline, its client's own
    timeouts being longer: a transport error (the request may or may not have reached
    DynamoDB), whose late answer is dropped like a lost one."""


class ClientErrorLike(Protocol):
    """What the layer reads of a client error: the parsed error response."""

    @property
    def response(self) -> Mapping[str, Any]: ...


def response_of(exc: BaseException) -> Mapping[str, Any] | None:
    """The error response of a client error (see the module docstring), else ``None``."""
    response = getattr(exc, "response", None)
    if isinstance(response, Mapping) and isinstance(response.get("Error"), Mapping):
        return response
    return None


def client_error_code(exc: BaseException) -> str | None:
    """A client error's ``Error.Code`` (``""`` when it has none), or ``None`` for any other
    exception."""
    response = response_of(exc)
    if response is None:
        return None
    return str(response["Error"].get("Code", ""))


def error_code(exc: BaseException) -> str:
    """What logs and metrics call an error: a client error's code, else its class name."""
    code = client_error_code(exc)
    return type(exc).__name__ if code is None else code


def _derives_from(exc: BaseException, names: frozenset[str]) -> bool:
    return any(f"{k.__module__}.{k.__qualname__}" in names for k in type(exc).__mro__)


def is_transport_error(exc: BaseException) -> bool:
    """A connection that failed, dropped or timed out before an answer came back."""
    return _derives_from(exc, _TRANSPORT_BASES)


def is_sdk_error(exc: BaseException) -> bool:
    """A client error, or an error of the SDK's own (see the module docstring)."""
    return response_of(exc) is not None or _derives_from(exc, _SDK_BASES)
