"""AWS Signature Version 4 verification, with DynamoDB's checks and error texts.

The checks of the ``Authorization`` header (its parameters, the date, the credential scope, the
access key) and their wording follow DynamoDB's, as recorded by dynalite. The signature itself
is recomputed by botocore's own signer (:class:`botocore.auth.SigV4Auth`), over exactly the
headers the client says it signed, so the server and the SDKs share one implementation of the
canonical request. The payload line of that canonical request is always the SHA-256 of the body
received, as DynamoDB computes it.
"""

from __future__ import annotations

import calendar
import contextlib
import functools
import hmac
import re
import time
from collections.abc import Callable, Mapping
from email.utils import parsedate_to_datetime
from typing import Any

from ..errors import DynamoDBError

__all__ = ["DEFAULT_REGION", "SigV4Verifier", "access_key_of", "region_from_authorization"]

DEFAULT_REGION = "us-east-1"

_MISSING_TOKEN = "Request is missing Authentication Token"
_BAD_TOKEN = "The security token included in the request is invalid."
_SIGNATURE_MISMATCH = (
    "The request signature we calculated does not match the signature you provided. "
    "Check your AWS Secret Access Key and signing method. "
    "Consult the service documentation for details."
)
_BASIC_DATE = re.compile(r"[0-9]{8}T[0-9]{6}Z\Z")
_SKEW_SECONDS = 15 * 60
# The Authorization header's parameters are separated by commas, white space or both: DynamoDB
# reads "Credential=... SignedHeaders=... Signature=..." (ScyllaDB's test_authorization.py, run
# against DynamoDB, meets its date errors through such a header) and "Credential=...,Signed..."
# (its test_authorization_no_whitespace) alike.
_SEPARATORS = re.compile(r"[,\s]+")
_CREDENTIAL = re.compile(r"Credential=([^,\s]*)")


def _credential(header: bytes | str | None) -> list[str]:
    """The ``/``-separated parts of a SigV4 ``Authorization`` header's Credential (key, date,
    region, service, ``aws4_request``), unverified; empty without one."""
    if header is None:
        return []
    text = header.decode("latin-1") if isinstance(header, bytes) else header
    found = _CREDENTIAL.search(text)
    return [] if found is None else found[1].split("/")


def region_from_authorization(header: bytes | str | None) -> str:
    """The region of a SigV4 ``Authorization`` header's credential scope, unverified."""
    parts = _credential(header)
    return parts[2] if len(parts) >= 3 and parts[2] else DEFAULT_REGION


def access_key_of(header: bytes | str | None) -> str | None:
    """The access key of a SigV4 ``Authorization`` header's credential, unverified (None
    without one): who the caller is once the signature is verified."""
    parts = _credential(header)
    return parts[0] or None if parts else None


def _basic(ts: float) -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(ts))


class _SignedHeaders(dict[str, list[str]]):
    """The declared signed headers and their values, in the shape botocore's signer reads."""

    def get_all(self, name: str) -> list[str]:
        return self[name]


@functools.cache
def _signer_class() -> Any:
    """botocore's SigV4 signer, made to sign exactly the headers the client declared."""
    from botocore.auth import SigV4Auth

    class DeclaredHeadersSigner(SigV4Auth):  # type: ignore[misc]
        def __init__(self, credentials: Any, service: str, region: str, signed: Any) -> None:
            super().__init__(credentials, service, region)
            self._signed = signed

        def headers_to_sign(self, request: Any) -> Any:
            return self._signed

    return DeclaredHeadersSigner


# (access key id, secret, region, service, signed header names, header values, date, signature)
_Parsed = tuple[str, str, str, str, list[str], dict[str, list[str]], str, str]


class SigV4Verifier:
    """Verifies AWS Signature Version 4 against configured access key/secret pairs.

    The checks and their wording follow DynamoDB's (as recorded by dynalite): missing
    header -> ``MissingAuthenticationTokenException``; malformed -> ``IncompleteSignatureException``;
    bad scope, stale date or wrong signature -> ``InvalidSignatureException``; unknown key ->
    ``UnrecognizedClientException``.
    """

    def __init__(self, credentials: Mapping[str, str], *, clock: Callable[[], float] = time.time):
        if not credentials:
            raise ValueError("SigV4Verifier needs at least one access key/secret pair")
        self.credentials = dict(credentials)
        self.clock = clock

    def verify(
        self,
        method: str,
        raw_path: bytes,
        query_string: bytes,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
    ) -> str:
        """Return the signed region, or raise the :class:`DynamoDBError` DynamoDB would."""
        return self.authenticate(method, raw_path, query_string, headers, body)[1]

    def check_headers(self, headers: list[tuple[bytes, bytes]]) -> str:
        """What can be checked before the body arrives (the header's parameters, the date, the
        credential scope, the access key): the access key id, or DynamoDB's error."""
        return self._parse(headers)[0]

    def authenticate(
        self,
        method: str,
        raw_path: bytes,
        query_string: bytes,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
    ) -> tuple[str, str]:
        """Return ``(access key id, region)`` of a valid signature, or raise DynamoDB's error."""
        key_id, secret, region, service, names, values, amz_date, signature = self._parse(headers)
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials

        signed = _SignedHeaders((n, values.get(n) or [""]) for n in names)
        path = raw_path.decode("latin-1") or "/"
        query = query_string.decode("latin-1")
        request = AWSRequest(
            method, "http://host" + path + ("?" + query if query else ""), data=body
        )
        # DynamoDB hashes the body itself: an X-Amz-Content-SHA256 header (an S3 convention) is
        # never taken for the body's hash. Signed, it is one more canonical header; unsigned,
        # it is ignored. Left out of ``request.headers``, botocore hashes the body.
        request.context["timestamp"] = amz_date
        signer = _signer_class()(Credentials(key_id, secret), service, region, signed)
        canonical = signer.canonical_request(request)
        string_to_sign = signer.string_to_sign(request, canonical)
        expected = signer.signature(string_to_sign, request)
        if not hmac.compare_digest(expected, signature):
            raise DynamoDBError(
                "InvalidSignatureException",
                f"{_SIGNATURE_MISMATCH}\n\nThe Canonical String for this request should have been\n"
                f"'{canonical}'\n\nThe String-to-Sign should have been\n'{string_to_sign}'\n",
            )
        return key_id, region

    def _parse(self, headers: list[tuple[bytes, bytes]]) -> _Parsed:
        """Every check but the signature's, in DynamoDB's order."""
        values: dict[str, list[str]] = {}
        for name, value in headers:
            values.setdefault(name.decode("latin-1").lower(), []).append(value.decode("latin-1"))
        auth = ",".join(values.get("authorization", []))
        if not auth.strip().startswith("AWS4-"):
            raise DynamoDBError("MissingAuthenticationTokenException", _MISSING_TOKEN)
        algorithm, _, rest = auth.strip().partition(" ")
        params: dict[str, str] = {}
        for piece in _SEPARATORS.split(rest.strip()):
            key, _, val = piece.partition("=")
            params[key] = val
        date = (values.get("x-amz-date") or values.get("date") or [""])[0]
        missing = "".join(
            f"Authorization header requires '{name}' parameter. "
            for name in ("Credential", "Signature", "SignedHeaders")
            if not params.get(name)
        )
        if not date:
            missing += "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header. "
        if missing:
            raise DynamoDBError("IncompleteSignatureException", missing + "Authorization=" + auth)
        signed_at = self._parse_date(date)
        amz_date = _basic(signed_at)
        now = self.clock()
        if signed_at < now - _SKEW_SECONDS:
            raise DynamoDBError(
                "InvalidSignatureException",
                f"Signature expired: {amz_date} is now earlier than "
                f"{_basic(now - _SKEW_SECONDS)} ({_basic(now)} - 15 min.)",
            )
        if signed_at > now + _SKEW_SECONDS:
            raise DynamoDBError(
                "InvalidSignatureException",
                f"Signature not yet current: {amz_date} is still later than "
                f"{_basic(now + _SKEW_SECONDS)} ({_basic(now)} + 15 min.)",
            )
        names = [n.strip().lower() for n in params["SignedHeaders"].split(";")]
        if "host" not in names:
            raise DynamoDBError(
                "InvalidSignatureException",
                "'Host' must be a 'SignedHeader' in the AWS Authorization.",
            )
        if algorithm != "AWS4-HMAC-SHA256":
            raise DynamoDBError(
                "IncompleteSignatureException",
                f"Unsupported AWS 'algorithm': '{algorithm}' (only AWS4-HMAC-SHA256 for now). ",
            )
        credential = params["Credential"]
        scope = credential.rstrip("/").split("/")
        if len(scope) != 5:
            raise DynamoDBError(
                "IncompleteSignatureException",
                "Credential must have exactly 5 slash-delimited elements, "
                f"e.g. keyid/date/region/service/term, got '{credential}'",
            )
        key_id, scope_date, region, service, terminator = scope
        problems = ""
        if not region:
            problems += f"Credential should be scoped to a valid region, not '{region}'. "
        if service != "dynamodb":
            problems += "Credential should be scoped to correct service: 'dynamodb'. "
        if terminator != "aws4_request":
            problems += f"Credential should be scoped with a valid terminator: 'aws4_request', not '{terminator}'. "
        if scope_date != amz_date[:8]:
            problems += (
                "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date "
                f"from HTTP: '{scope_date}' != '{amz_date[:8]}', from '{date}'."
            )
        if problems:
            raise DynamoDBError("InvalidSignatureException", problems.rstrip())
        secret = self.credentials.get(key_id)
        if secret is None:
            raise DynamoDBError("UnrecognizedClientException", _BAD_TOKEN)
        return key_id, secret, region, service, names, values, amz_date, params["Signature"]

    @staticmethod
    def _parse_date(date: str) -> float:
        if _BASIC_DATE.match(date):
            with contextlib.suppress(ValueError):  # e.g. month 13: not a date at all
                return float(calendar.timegm(time.strptime(date, "%Y%m%dT%H%M%SZ")))
        with contextlib.suppress(TypeError, ValueError):
            return parsedate_to_datetime(date).timestamp()
        raise DynamoDBError(
            "IncompleteSignatureException",
            f"Date must be in ISO-8601 'basic format'. Got '{date}'. "
            "See http://en.wikipedia.org/wiki/ISO_8601",
        )
