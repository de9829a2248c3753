"""``ClientError`` made exactly as botocore makes it, with its text formatted once.

``ClientError.__init__`` formats its message from the code, the message and the operation on
every call; a DirectClient's errors never carry retry information, so :class:`ErrorMaker`
formats each (code, message, operation) once and builds the exception around that text. The
shortcut is checked against botocore's own constructor at import and turned off if it differs.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

__all__ = ["ErrorMaker"]

_CLIENT_ERROR_INIT = ClientError.__init__


def _error_text(code: str, message: str, operation_name: str) -> str:
    """The text ``ClientError.__init__`` gives a response without retry information."""
    template: str = ClientError.MSG_TEMPLATE
    return template.format(
        error_code=code, error_message=message, operation_name=operation_name, retry_info=""
    )


def _preformatted(
    cls: type[ClientError], response: dict[str, Any], operation_name: str, text: str
) -> ClientError:
    """``cls(response, operation_name)`` given the text its ``__init__`` would format."""
    error: ClientError = Exception.__new__(cls)
    Exception.__init__(error, text)
    error.response = response
    error.operation_name = operation_name
    return error


def _preformatting_holds() -> bool:
    """Whether :func:`_preformatted` makes what this botocore's ClientError makes (checked once
    at import, so a botocore that changes ClientError turns the shortcut off, not wrong)."""
    response: dict[str, Any] = {
        "Error": {"Message": "m", "Code": "C"},
        "ResponseMetadata": {"RequestId": "r", "HTTPStatusCode": 400, "RetryAttempts": 0},
    }
    made = ClientError(response, "Op")
    fast = _preformatted(ClientError, response, "Op", _error_text("C", "m", "Op"))
    return bool(made.args == fast.args and vars(made) == vars(fast) and str(made) == str(fast))


PREFORMATTED = _preformatting_holds()


class ErrorMaker:
    """``cls(response, operation_name)``, its text formatted once per (code, message,
    operation): at most 1,024 texts kept, of messages up to 256 characters."""

    def __init__(self) -> None:
        self._texts: dict[tuple[str, str, str], str] = {}

    def __call__(
        self,
        cls: type[ClientError],
        response: dict[str, Any],
        operation_name: str,
        code: str,
        message: str,
    ) -> ClientError:
        if cls.__init__ is not _CLIENT_ERROR_INIT or not PREFORMATTED:
            return cls(response, operation_name)
        key = (code, message, operation_name)
        text = self._texts.get(key)
        if text is None:
            text = _error_text(code, message, operation_name)
            if len(self._texts) < 1024 and len(message) <= 256:
                self._texts[key] = text
        return _preformatted(cls, response, operation_name, text)
