"""The idempotency package's seams, checked on its source and at run time: it imports no
botocore (a client's errors are recognised by their shape), and the pieces it promises to
others keep their promises."""

from __future__ import annotations

import ast
import inspect
import os
import subprocess
import sys
from pathlib import Path

import botocore.exceptions as bx
import pytest

from firstwrite.idempotency import (
    AsyncGuard,
    AsyncIdempotency,
    Guard,
    Idempotency,
    TableNotFoundError,
    client_errors,
)
from firstwrite.idempotency.aio import ThreadedClient

SRC = Path(__file__).resolve().parents[2] / "src" / "firstwrite"
LAYER = SRC / "idempotency"


def _imported(path: Path) -> set[str]:
    """Every module ``path`` imports, anywhere (function bodies and TYPE_CHECKING included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module)
    return found


# -- no botocore ------------------------------------------------------------------------------


def test_no_module_of_the_layer_imports_botocore() -> None:
    offenders = {
        str(path.relative_to(SRC)): sorted(
            name for name in _imported(path) if name.split(".")[0] in ("botocore", "aiobotocore")
        )
        for path in LAYER.rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_import_checker_sees_imports() -> None:
    assert "botocore.exceptions" in _imported(Path(__file__))
    assert "firstwrite.idempotency.aio" in _imported(Path(__file__))


def test_loading_the_layer_and_the_middleware_loads_no_botocore() -> None:
    code = (
        "import sys, firstwrite, firstwrite.idempotency, firstwrite.http\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('botocore', 'boto3')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def _client_error(code: str, **extra: object) -> bx.ClientError:
    return bx.ClientError({"Error": {"Code": code, "Message": "m"}, **extra}, "PutItem")


@pytest.mark.parametrize(
    ("error", "code", "sdk", "transport"),
    [
        (_client_error("ConditionalCheckFailedException"), "ConditionalCheckFailedException", 1, 0),
        (bx.ConnectionClosedError(endpoint_url="https://x"), None, 1, 1),
        (bx.EndpointConnectionError(endpoint_url="https://x"), None, 1, 1),
        (bx.ReadTimeoutError(endpoint_url="https://x"), None, 1, 1),
        (bx.ParamValidationError(report="bad"), None, 1, 0),
        (ValueError("a bug"), None, 0, 0),
        (OSError("not the client's"), None, 0, 0),
    ],
)
def test_client_errors_are_recognised_by_their_shape(
    error: BaseException, code: str | None, sdk: int, transport: int
) -> None:
    assert client_errors.client_error_code(error) == code
    assert client_errors.is_sdk_error(error) is bool(sdk)
    assert client_errors.is_transport_error(error) is bool(transport)
    assert client_errors.error_code(error) == (code or type(error).__name__)


def test_any_exception_shaped_like_a_client_error_is_one() -> None:
    class Foreign(Exception):
        response = {"Error": {"Code": "ThrottlingException"}}

    class NotOne(Exception):
        response = "a requests.Response, say"

    assert client_errors.client_error_code(Foreign()) == "ThrottlingException"
    assert client_errors.is_sdk_error(Foreign())
    assert client_errors.response_of(NotOne()) is None and not client_errors.is_sdk_error(NotOne())


def test_a_missing_table_is_also_the_clients_own_error() -> None:
    modeled = type("ResourceNotFoundException", (bx.ClientError,), {})
    raised = modeled({"Error": {"Code": "ResourceNotFoundException"}}, "PutItem")
    error = TableNotFoundError.raised_for(raised, ["t"], raised.response, "PutItem")
    assert isinstance(error, TableNotFoundError) and isinstance(error, modeled)
    assert isinstance(error, bx.ClientError) and error.operation_name == "PutItem"
    assert error.response["Error"]["Code"] == "ResourceNotFoundException"
    assert "'t'" in str(error) and type(error).__name__ == "TableNotFoundError"
    again = TableNotFoundError.raised_for(raised, ["u"], raised.response, "GetItem")
    assert type(again) is type(error)  # one class per client error class
    plain = TableNotFoundError(["t"], {"Error": {"Code": "ResourceNotFoundException"}}, "PutItem")
    assert plain.response["Error"]["Code"] == "ResourceNotFoundException"


# -- the guards are what the protocols say -----------------------------------------------------


def _guards(tmp_path: Path) -> tuple[Idempotency, AsyncIdempotency]:
    from firstwrite.engine import Engine, local_client

    engine = Engine(str(tmp_path / "protocols.db"))
    client = local_client(engine)
    return Idempotency(client=client), AsyncIdempotency(client=ThreadedClient(client))


def test_the_guards_satisfy_the_protocols(tmp_path: Path) -> None:
    sync, aio = _guards(tmp_path)
    # Checked by mypy when it reads this file (MYPYPATH=src mypy tests/idempotency/...):
    # an Idempotency is a Guard and an AsyncIdempotency an AsyncGuard, and not the other way.
    as_guard: Guard = sync
    as_async_guard: AsyncGuard = aio
    either: list[Guard | AsyncGuard] = [sync, aio]
    # At run time: the discriminating attribute, and every protocol method with its signature.
    assert as_guard.is_async is False and as_async_guard.is_async is True
    assert [g.is_async for g in either] == [False, True]
    for protocol, guard, coroutine in ((Guard, sync, False), (AsyncGuard, aio, True)):
        for name in ("claim", "complete", "fail", "claim_with"):
            wanted = inspect.signature(getattr(protocol, name))
            method = getattr(type(guard), name)
            assert inspect.signature(method) == wanted, (type(guard).__name__, name)
            assert inspect.iscoroutinefunction(method) is coroutine, name


def test_the_protocols_are_checked_by_mypy(tmp_path: Path) -> None:
    """The assignments above pass mypy, and the crossed ones fail it: the protocols tell the
    two kinds of guard apart."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from firstwrite.idempotency import AsyncGuard, AsyncIdempotency, Guard, Idempotency\n"
        "def good(s: Idempotency, a: AsyncIdempotency) -> tuple[Guard, AsyncGuard]:\n"
        "    return s, a\n"
        "def crossed(s: Idempotency, a: AsyncIdempotency) -> tuple[AsyncGuard, Guard]:\n"
        "    return s, a\n"
        "def narrowed(g: Guard | AsyncGuard) -> None:\n"
        "    if g.is_async:\n"
        "        reveal_type(g)\n"
        "    else:\n"
        "        reveal_type(g)\n"
    )
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(probe)],
        capture_output=True,
        text=True,
        cwd=SRC.parents[1],
        env={**os.environ, "MYPYPATH": str(SRC.parent)},  # this tree's source, not an install
    )
    out = run.stdout
    assert "probe.py:3:" not in out, out
    assert "probe.py:5: error" in out, out  # the crossed tuple does not type-check
    assert 'probe.py:8: note: Revealed type is "firstwrite.idempotency.protocols.AsyncGuard"' in out
    assert 'probe.py:10: note: Revealed type is "firstwrite.idempotency.protocols.Guard"' in out
