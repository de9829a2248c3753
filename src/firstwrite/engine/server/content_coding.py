"""Request bodies sent with ``Content-Encoding``, as the HTTP server answers them.

The decoding is the protocol's (:func:`~firstwrite.engine.wire.decode_body`, where what DynamoDB
does with such bodies is written down); this is the HTTP side: a body the engine cannot decode is
a 400 ``SerializationException`` naming what is wrong, one that decodes past the limit the 413
problem of any body over the limit.
"""

from __future__ import annotations

from ..errors import DynamoDBError
from ..wire import BodyTooLarge, decode_body, dumps, response_headers
from .asgi import Message, Scope, header, problem

__all__ = ["decoded_body"]


def decoded_body(
    scope: Scope, body: bytes, limit: int
) -> tuple[bytes, None] | tuple[None, tuple[Message, bytes]]:
    """The HTTP server's part: ``(decoded body, None)``, or ``(None, (start, payload))``, the
    answer refusing it (a 400 SerializationException, or the 413 problem)."""
    codings = header(scope, b"content-encoding")
    if codings is None:
        return body, None
    try:
        return decode_body(body, codings, limit), None
    except BodyTooLarge as refusal:
        status, headers, payload = problem(413, "Payload Too Large", str(refusal))
    except DynamoDBError as error:
        payload = dumps(error.wire_body())
        status, headers = error.status, response_headers(payload)
    return None, ({"type": "http.response.start", "status": status, "headers": headers}, payload)
