"""Run one raw DynamoDB request, answered exactly as the HTTP server answers it on the wire.

The text in the editor is the request body. It goes, unparsed, to the engine's wire protocol
function (the one the HTTP server and the boto3 binding call), so what comes back is byte for
byte what an SDK would receive: the status, DynamoDB's headers and the JSON body, errors
included (invalid JSON is DynamoDB's ``SerializationException``, an unknown table its
``ResourceNotFoundException``).
"""

from __future__ import annotations

import json
import re
import uuid
import zlib
from dataclasses import dataclass

from firstwrite.engine import Engine
from firstwrite.engine.wire import wire_call

from .examples import STREAMS_OPERATIONS
from .records import pretty

CONTENT_TYPE = "application/x-amz-json-1.0"
MAX_REQUEST_CHARS = 512 * 1024
_OPERATION = re.compile(r"[A-Za-z]{1,64}\Z")


class RunInputError(ValueError):
    """The console request itself is unusable (not the DynamoDB request inside it)."""


@dataclass(frozen=True, slots=True)
class RawAnswer:
    operation: str
    target: str
    region: str
    status: int
    headers: list[tuple[str, str]]
    body: str
    hint: str | None  # a plain-words note for the person at the editor (not part of the answer)

    @property
    def pretty(self) -> str:
        try:
            return pretty(json.loads(self.body))
        except ValueError:
            return self.body

    @property
    def code(self) -> str | None:
        if self.status == 200:
            return None
        try:
            return str(json.loads(self.body).get("__type", "")).rpartition("#")[2] or None
        except (ValueError, AttributeError):
            return None


def target_of(operation: str) -> str:
    prefix = "DynamoDBStreams_20120810" if operation in STREAMS_OPERATIONS else "DynamoDB_20120810"
    return f"{prefix}.{operation}"


def run(engine: Engine, operation: str, body: str, region: str) -> RawAnswer:
    """Send ``body`` as the ``operation`` request in ``region``; never raises for bad bodies."""
    if not _OPERATION.match(operation):
        raise RunInputError("operation must be a DynamoDB operation name such as PutItem")
    if len(body) > MAX_REQUEST_CHARS:
        raise RunInputError(f"the request is over {MAX_REQUEST_CHARS} characters")
    target = target_of(operation)
    data = body.encode("utf-8", "surrogatepass")
    status, payload = wire_call(engine, target, data, region)
    headers = [
        ("Content-Type", CONTENT_TYPE),
        ("Content-Length", str(len(payload))),
        ("x-amzn-RequestId", uuid.uuid4().hex.upper()),
        ("x-amz-crc32", str(zlib.crc32(payload))),
    ]
    text = payload.decode("utf-8", "replace")
    return RawAnswer(operation, target, region, status, headers, text, _hint(body, status, text))


def _hint(body: str, status: int, answer: str) -> str | None:
    if status == 200:
        return None
    if body.strip():
        try:
            json.loads(body)
        except ValueError as exc:
            return (
                f"The request is not valid JSON ({exc}). DynamoDB answers such a body with a bare "
                "SerializationException, as shown. Your text is still in the editor."
            )
    if "UnknownOperationException" in answer:
        return "DynamoDB has no operation of that name (names are case-sensitive)."
    return None
