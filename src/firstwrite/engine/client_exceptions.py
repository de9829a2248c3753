"""The exception classes boto3 clients of the engine raise: one botocore factory per process.

Every :class:`~.direct.DirectClient` and every client made by :func:`~.binding.local_client`
(or its aiobotocore twin) takes its ``ClientError`` subclasses from :func:`exceptions_factory`,
so ``except client.exceptions.ConditionalCheckFailedException`` catches what any of them raises.
Beside the front door, so neither way in imports the other for it.
"""

from __future__ import annotations

from botocore.errorfactory import ClientExceptionsFactory

__all__ = ["exceptions_factory"]

_EXCEPTIONS_FACTORY = ClientExceptionsFactory()


def exceptions_factory() -> ClientExceptionsFactory:
    """The process's one factory of client exception classes (they are cached per service)."""
    return _EXCEPTIONS_FACTORY
