"""DynamoDB errors: the type name, HTTP status, namespace and wire form of each.

Every failure the engine reports is a :class:`DynamoDBError`. The HTTP server turns it into
DynamoDB's JSON error body; the in-process clients turn it into the
``botocore.exceptions.ClientError`` that boto3 would raise for the same body.
"""

from __future__ import annotations

from typing import Any

# The message of an item over DynamoDB's 400 KB limit (PutItem, batches, transactions).
ITEM_TOO_LARGE = "Item size has exceeded the maximum allowed size"

_DYNAMODB = "com.amazonaws.dynamodb.v20120810#"
_VALIDATE = "com.amazon.coral.validate#"
_SERVICE = "com.amazon.coral.service#"
_AVAILABILITY = "com.amazon.coral.availability#"

# code -> (namespace, HTTP status, key of the message member in the body)
_SHAPES: dict[str, tuple[str, int, str]] = {
    "ValidationException": (_VALIDATE, 400, "message"),
    "SerializationException": (_SERVICE, 400, "Message"),
    "UnknownOperationException": (_SERVICE, 400, "message"),
    "MissingAuthenticationTokenException": (_SERVICE, 400, "message"),
    "IncompleteSignatureException": (_SERVICE, 400, "message"),
    "InvalidSignatureException": (_SERVICE, 400, "message"),
    "UnrecognizedClientException": (_SERVICE, 400, "message"),
    "AccessDeniedException": (_SERVICE, 400, "message"),
    "ThrottlingException": (_AVAILABILITY, 400, "message"),
    "ConditionalCheckFailedException": (_DYNAMODB, 400, "message"),
    "ResourceNotFoundException": (_DYNAMODB, 400, "message"),
    "ResourceInUseException": (_DYNAMODB, 400, "message"),
    "LimitExceededException": (_DYNAMODB, 400, "message"),
    "ItemCollectionSizeLimitExceededException": (_DYNAMODB, 400, "message"),
    "ProvisionedThroughputExceededException": (_DYNAMODB, 400, "message"),
    "RequestLimitExceeded": (_DYNAMODB, 400, "message"),
    "TransactionConflictException": (_DYNAMODB, 400, "message"),
    "TransactionCanceledException": (_DYNAMODB, 400, "Message"),
    "TransactionInProgressException": (_DYNAMODB, 400, "Message"),
    "IdempotentParameterMismatchException": (_DYNAMODB, 400, "Message"),
    "ExpiredIteratorException": (_DYNAMODB, 400, "message"),
    "TrimmedDataAccessException": (_DYNAMODB, 400, "message"),
    "ReplicatedWriteConflictException": (_DYNAMODB, 409, "message"),
    "TableNotFoundException": (_DYNAMODB, 400, "message"),
    "TableAlreadyExistsException": (_DYNAMODB, 400, "message"),
    "TableInUseException": (_DYNAMODB, 400, "message"),
    "BackupNotFoundException": (_DYNAMODB, 400, "message"),
    "BackupInUseException": (_DYNAMODB, 400, "message"),
    "ContinuousBackupsUnavailableException": (_DYNAMODB, 400, "message"),
    "PointInTimeRecoveryUnavailableException": (_DYNAMODB, 400, "message"),
    "InvalidRestoreTimeException": (_DYNAMODB, 400, "message"),
    "PolicyNotFoundException": (_DYNAMODB, 400, "message"),
    "ExportNotFoundException": (_DYNAMODB, 400, "message"),
    "ExportConflictException": (_DYNAMODB, 400, "message"),
    "InvalidExportTimeException": (_DYNAMODB, 400, "message"),
    "ImportNotFoundException": (_DYNAMODB, 400, "message"),
    "ImportConflictException": (_DYNAMODB, 400, "message"),
    "InternalServerError": (_DYNAMODB, 500, "message"),
    "ServiceUnavailable": (_DYNAMODB, 503, "message"),
}


# Sent without a message member when they have none (an unknown target; a body that cannot be
# read as the operation's input).
_BARE = frozenset({"UnknownOperationException", "SerializationException"})


class DynamoDBError(Exception):
    """An error DynamoDB would return: ``code`` is the part of ``__type`` after ``#``.

    ``extra`` holds the modeled members that travel with some errors: ``Item`` on a failed
    condition, ``CancellationReasons`` on a cancelled transaction, ``ThrottlingReasons``.
    """

    def __init__(self, code: str, message: str = "", **extra: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.extra = extra

    @property
    def status(self) -> int:
        return _SHAPES.get(self.code, (_DYNAMODB, 400, "message"))[1]

    def wire_body(self) -> dict[str, Any]:
        """The JSON body DynamoDB sends for this error (``__type``, message, members)."""
        namespace, _status, message_key = _SHAPES.get(self.code, (_DYNAMODB, 400, "message"))
        body: dict[str, Any] = {"__type": namespace + self.code}
        if self.message or self.code not in _BARE:
            body[message_key] = self.message
        body.update(self.extra)
        return body

    def __repr__(self) -> str:
        return f"DynamoDBError({self.code!r}, {self.message!r})"


def validation(message: str) -> DynamoDBError:
    return DynamoDBError("ValidationException", message)


def invalid_parameters(detail: str) -> DynamoDBError:
    """The common ``One or more parameter values were invalid: ...`` ValidationException."""
    return validation("One or more parameter values were invalid: " + detail)


def serialization(message: str) -> DynamoDBError:
    return DynamoDBError("SerializationException", message)


def internal_error() -> DynamoDBError:
    """DynamoDB's 500 for a request the engine could not complete (nothing was written)."""
    return DynamoDBError("InternalServerError", "DynamoDB could not process your request.")


def resource_not_found(message: str = "Requested resource not found") -> DynamoDBError:
    return DynamoDBError("ResourceNotFoundException", message)


def conditional_check_failed(item: dict[str, Any] | None = None) -> DynamoDBError:
    extra = {"Item": item} if item is not None else {}
    return DynamoDBError(
        "ConditionalCheckFailedException", "The conditional request failed", **extra
    )


MAX_CONSTRAINT_ERRORS = 10  # AWS lists at most ten (dynalite's checkValidations)


def constraint_errors(errors: list[str]) -> DynamoDBError:
    """AWS's ``N validation error(s) detected: a; b`` message for request-shape constraints:
    the first ten, in request-member order."""
    errors = errors[:MAX_CONSTRAINT_ERRORS]
    count = len(errors)
    noun = "error" if count == 1 else "errors"
    return validation(f"{count} validation {noun} detected: " + "; ".join(errors))


def constraint(
    value: Any, member: str, rule: str, *, shown: str | None = None, valueless: bool = False
) -> str:
    """One entry of a :func:`constraint_errors` list, worded as AWS words it (``shown``: the
    value as already rendered, for values Java prints by their model shape; ``valueless``:
    ``Value at '<member>' ...``, as DynamoDB's newer checks word it, without the value)."""
    if valueless:
        return f"Value at '{member}' failed to satisfy constraint: {rule}"
    if shown is None:
        shown = "null" if value is None else _java_str(value)
        if value is None:
            return f"Value null at '{member}' failed to satisfy constraint: {rule}"
    return f"Value '{shown}' at '{member}' failed to satisfy constraint: {rule}"


def java_str(value: Any) -> str:
    """``value`` as Java's toString prints it in AWS messages (lists ``[a, b]``, maps
    ``{k=v}``, ``null``)."""
    return _java_str(value)


class _Rendered(str):
    """Text already rendered, on :func:`_java_str`'s work stack (request strings are plain str)."""


def _java_str(value: Any) -> str:
    # AWS prints request values with Java's toString: lists as [a, b], maps as {k=v}, null as
    # null. Iterative: a request value may nest hundreds of levels deep.
    out: list[str] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, _Rendered):
            out.append(item)
        elif item is None:
            out.append("null")
        elif isinstance(item, bool):
            out.append("true" if item else "false")
        elif isinstance(item, list):
            parts: list[Any] = [_Rendered("[")]
            for index, element in enumerate(item):
                if index:
                    parts.append(_Rendered(", "))
                parts.append(element)
            parts.append(_Rendered("]"))
            stack.extend(reversed(parts))
        elif isinstance(item, dict):
            parts = [_Rendered("{")]
            for index, (key, element) in enumerate(item.items()):
                parts.append(_Rendered(f"{', ' if index else ''}{key}="))
                parts.append(element)
            parts.append(_Rendered("}"))
            stack.extend(reversed(parts))
        else:
            out.append(str(item))
    return "".join(out)
