"""The middleware package is pure ASGI/WSGI: it imports the standard library, the idempotency
layer's public API and the stored reply's format (``firstwrite.shared.http_reply``, itself pure
standard library, shared with the CLI and the console that decode it), nothing else (no
Starlette, no Flask, no engine, no layer internals). One exception: ``django.py``, the Django
adapter (the ``django`` extra), imports Django and its ``asgiref``; nothing else imports it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "firstwrite" / "http"
REPLY_FORMAT = PACKAGE.parent / "shared" / "http_reply.py"
ALLOWED = {"firstwrite.idempotency", "firstwrite.shared.http_reply"}
# The Django adapter's own framework (firstwrite.http.django, loaded only when named).
DJANGO_ADAPTER = {"django.py": {"django", "asgiref"}}


def _absolute_imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            found.add(node.module or "")
    return found


def test_only_the_standard_library_and_the_layers_public_api() -> None:
    offenders = {}
    for path in PACKAGE.rglob("*.py"):
        bad = sorted(
            name
            for name in _absolute_imports(path)
            if name.split(".")[0] not in sys.stdlib_module_names
            and name not in ALLOWED
            and name.split(".")[0] not in DJANGO_ADAPTER.get(path.name, set())
        )
        if bad:
            offenders[path.name] = bad
    assert offenders == {}
    assert all(n.split(".")[0] in sys.stdlib_module_names for n in _absolute_imports(REPLY_FORMAT))
    assert _absolute_imports(PACKAGE / "asgi.py") >= {"firstwrite.idempotency"}  # the checker sees


def test_importing_it_loads_no_web_framework() -> None:
    code = (
        "import sys, firstwrite.http; "
        "print(sorted(m for m in ('starlette', 'fastapi', 'flask', 'werkzeug', 'django', "
        "'firstwrite.engine', 'firstwrite.http.django') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
