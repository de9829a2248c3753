"""Shared by the security tests: a signer, a mounted app that reports who called it, servers."""

from __future__ import annotations

import datetime
import json
from typing import Any
from unittest import mock

import botocore.auth
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

KEY, SECRET = "AKIDSECURITY", "security-secret-key"
JSON = {"Content-Type": "application/json"}
AMZ_JSON = "application/x-amz-json-1.0"


def sign(
    method: str,
    url: str,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    *,
    key: str = KEY,
    secret: str = SECRET,
    at: datetime.datetime | None = None,
) -> dict[str, str]:
    """The headers of ``method url`` signed as botocore signs for DynamoDB (``at``: when)."""
    request = AWSRequest(method, url, data=body, headers=dict(headers or {}))
    signer = SigV4Auth(Credentials(key, secret), "dynamodb", "us-east-1")
    if at is None:
        signer.add_auth(request)
    else:
        with mock.patch.object(botocore.auth, "get_current_datetime", lambda: at):
            signer.add_auth(request)
    return dict(request.headers.items())


class EchoApp:
    """A mounted app answering who called it (``scope["firstwrite.principal"]``) and how."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        principal = scope.get("firstwrite.principal")
        seen = {
            "method": scope["method"],
            "path": scope["path"],
            "root_path": scope["root_path"],
            "principal": None if principal is None else principal.access_key_id,
            "via": None if principal is None else principal.via,
            "body": body.decode(),
        }
        self.calls.append(seen)
        payload = json.dumps(seen).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": payload})
