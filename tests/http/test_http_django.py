"""The Django middleware and decorator in a real Django project (``django_project/``) served
by a real server in a child process: wsgiref's threading server (WSGI) and uvicorn (ASGI).

Each scenario counts the view's side effects through the project's ``/effects/<id>``; the
same scenarios against the project without the middleware (``FIRSTWRITE_DJANGO_UNGUARDED``)
must fail, which :func:`test_each_scenario_fails_without_the_middleware` checks.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("django")
pytest.importorskip("rest_framework")

HERE = Path(__file__).resolve().parent
PROBLEM_JSON = "application/problem+json"
RACERS = 6


@pytest.fixture(scope="module", params=["wsgi", "asgi"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    with _serve(request.param, tmp_path_factory.mktemp("django"), unguarded=False) as url:
        yield url


@pytest.fixture(scope="module")
def unguarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with _serve("wsgi", tmp_path_factory.mktemp("django-bare"), unguarded=True) as url:
        yield url


@contextlib.contextmanager
def _serve(
    kind: str, directory: Path, *, unguarded: bool, results: Path | None = None
) -> Iterator[str]:
    """The project in a child process (``results``: its guard's result store folder); its base
    URL while the ``with`` lasts."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
        "FIRSTWRITE_LOCAL_DB": str(directory / "django.db"),
        "DJANGO_SETTINGS_MODULE": "django_project.settings",
        "FIRSTWRITE_DJANGO_UNGUARDED": "1" if unguarded else "0",
        "FIRSTWRITE_DJANGO_RESULTS": "" if results is None else str(results),
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "django_project.serve", kind],
        cwd=directory,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("listening "), f"the project did not start: {line!r}"
        url = f"http://127.0.0.1:{int(line.split()[1])}"
        _wait_for(url)
        yield url
    finally:
        process.terminate()
        process.wait(30)


def _wait_for(url: str) -> None:
    """Until the server answers (uvicorn listens a moment after the port is printed)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.get(f"{url}/effects/none", timeout=5)
            return
        except httpx.TransportError:
            assert time.monotonic() < deadline, "the project does not answer"
            time.sleep(0.05)


def effects(url: str, ident: str) -> int:
    return int(httpx.get(f"{url}/effects/{ident}", timeout=30).json()["count"])


def post(
    url: str, path: str, body: dict[str, Any], key: str | None, tenant: str = "acme"
) -> httpx.Response:
    headers = {"X-Tenant": tenant}
    if key is not None:
        headers["Idempotency-Key"] = key
    return httpx.post(f"{url}{path}", json=body, headers=headers, timeout=30)


def problem_type(response: httpx.Response) -> str:
    assert response.headers["content-type"] == PROBLEM_JSON, response.text
    return str(response.json()["type"])


# -- the scenarios (each takes the base URL; an AssertionError is its failure) ------------


def race(path: str, expected_status: int = 201, delay: float = 0.3) -> Callable[[str], None]:
    def scenario(url: str) -> None:
        ident, key = uuid.uuid4().hex, uuid.uuid4().hex
        body = {"id": ident, "delay": delay}
        with concurrent.futures.ThreadPoolExecutor(RACERS) as pool:
            answers = list(pool.map(lambda _: post(url, path, body, key), range(RACERS)))
        assert effects(url, ident) == 1
        ran = [a for a in answers if a.status_code == expected_status]
        firsts = [a for a in ran if "idempotent-replayed" not in a.headers]
        assert len(firsts) == 1, [a.status_code for a in answers]
        for answer in answers:
            if answer.status_code == 409:
                assert problem_type(answer) == "urn:firstwrite:problem:request-in-progress"
                assert int(answer.headers["retry-after"]) >= 1
            else:
                assert answer.status_code == expected_status
                assert answer.content == firsts[0].content

    return scenario


def replay(url: str) -> None:
    ident, key = uuid.uuid4().hex, uuid.uuid4().hex
    first = post(url, "/orders", {"id": ident}, key)
    again = post(url, "/orders", {"id": ident}, f'"{key}"')  # the sf-string form: one key
    assert first.status_code == again.status_code == 201
    assert "idempotent-replayed" not in first.headers
    assert again.headers.get("idempotent-replayed") == "true"
    assert again.content == first.content
    assert again.headers["content-type"] == "application/json"
    assert effects(url, ident) == 1


def mismatch(url: str) -> None:
    ident, key = uuid.uuid4().hex, uuid.uuid4().hex
    assert post(url, "/orders", {"id": ident}, key).status_code == 201
    reused = post(url, "/orders", {"id": ident, "qty": 2}, key)
    assert reused.status_code == 422
    assert problem_type(reused) == "urn:firstwrite:problem:idempotency-key-reused"
    assert effects(url, ident) == 1


def missing_key(url: str) -> None:
    ident = uuid.uuid4().hex
    answer = post(url, "/orders", {"id": ident}, None)
    assert answer.status_code == 400
    assert problem_type(answer) == "urn:firstwrite:problem:idempotency-key-missing"
    assert effects(url, ident) == 0


def tenant_scope(url: str) -> None:
    ident, key = uuid.uuid4().hex, uuid.uuid4().hex
    first = post(url, "/orders", {"id": ident}, key, tenant="acme")
    other = post(url, "/orders", {"id": ident}, key, tenant="globex")
    assert "idempotent-replayed" not in other.headers and other.content != first.content
    anonymous = httpx.post(
        f"{url}/orders", json={"id": ident}, headers={"Idempotency-Key": key}, timeout=30
    )
    assert anonymous.status_code == 401
    assert problem_type(anonymous) == "urn:firstwrite:problem:principal-required"
    assert post(url, "/orders", {"id": ident}, key, tenant="acme").content == first.content
    assert effects(url, ident) == 2


def drf(path: str, via: str) -> Callable[[str], None]:
    def scenario(url: str) -> None:
        ident, key = uuid.uuid4().hex, uuid.uuid4().hex
        first = post(url, path, {"id": ident}, key)
        again = post(url, path, {"id": ident}, key)
        assert first.status_code == again.status_code == 201, first.text
        assert first.json()["via"] == via
        assert again.headers.get("idempotent-replayed") == "true"
        assert again.content == first.content  # the rendered JSON was stored
        assert again.headers["content-type"] == "application/json"
        assert post(url, path, {"id": ident}, None).status_code == 400  # require_key=True
        assert effects(url, ident) == 1

    return scenario


def size_limit(url: str) -> None:
    ident, key = uuid.uuid4().hex, uuid.uuid4().hex
    first = post(url, "/big", {"id": ident}, key)
    assert first.status_code == 200 and len(first.content) == 10_000
    assert first.headers.get("idempotency-replay-unavailable") == "size-exceeded"
    again = post(url, "/big", {"id": ident}, key)
    assert again.status_code == 409
    assert problem_type(again) == "urn:firstwrite:problem:response-not-stored"
    assert effects(url, ident) == 1


def streaming(url: str) -> None:
    """A streaming response passes through unstored; its key answers "not stored"."""
    ident, key = uuid.uuid4().hex, uuid.uuid4().hex
    first = post(url, "/stream", {"id": ident}, key)
    assert first.status_code == 200 and first.content == b"one,two"
    assert first.headers.get("idempotency-replay-unavailable") == "streaming"
    again = post(url, "/stream", {"id": ident}, key)
    assert again.status_code == 409
    assert problem_type(again) == "urn:firstwrite:problem:response-not-stored"
    assert effects(url, ident) == 1


def decorated_no_wait(url: str) -> None:
    """The decorator's ``wait=0``: a twin gets 409 at once instead of waiting to replay."""
    ident, key = uuid.uuid4().hex, uuid.uuid4().hex
    body = {"id": ident, "delay": 1.0}
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        slow = pool.submit(post, url, "/decorated", body, key)
        time.sleep(0.3)
        twin = post(url, "/decorated", body, key)
        assert twin.status_code == 409
        assert problem_type(twin) == "urn:firstwrite:problem:request-in-progress"
        assert slow.result().status_code == 202
    assert effects(url, ident) == 1


def reconciled(url: str) -> None:
    """A view that marks a recovery point, charges, then fails (500, the key released): the
    retry is reconciled by the settings' ``RECONCILE`` hook, not run again."""
    ident, key = uuid.uuid4().hex, uuid.uuid4().hex
    first = post(url, "/charge", {"id": ident}, key)
    assert first.status_code == 500
    again = post(url, "/charge", {"id": ident}, key)
    assert again.status_code == 201, again.text
    assert again.json() == {"reference": f"django-{ident}", "reconciled": True}
    assert again.headers.get("idempotent-replayed") == "true"
    assert effects(url, ident) == 1


SCENARIOS: dict[str, Callable[[str], None]] = {
    "recovery-reconciled": reconciled,
    "race": race("/orders"),
    "race-async-view": race("/async-orders"),
    "race-decorated-async-view": race("/decorated-async"),
    "race-transactional": race("/transfer"),
    "replay": replay,
    "mismatch": mismatch,
    "missing-key": missing_key,
    "tenant-scope": tenant_scope,
    "drf-api-view": drf("/drf/function", "api_view"),
    "drf-apiview-method": drf("/drf/class", "APIView"),
    "size-limit": size_limit,
    "streaming": streaming,
    "decorated-no-wait": decorated_no_wait,
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario(served: str, name: str) -> None:
    SCENARIOS[name](served)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_each_scenario_fails_without_the_middleware(unguarded: str, name: str) -> None:
    with pytest.raises(AssertionError):
        SCENARIOS[name](unguarded)


@pytest.mark.parametrize("kind", ["wsgi", "asgi"])
def test_a_big_response_goes_to_the_result_store_and_replays_byte_for_byte(
    kind: str, tmp_path: Path
) -> None:
    """With a result store on the guard, a 3 MB ``HttpResponse`` is stored there (from a
    temporary file past ``SPOOL_THRESHOLD``) and a retry gets it back, the view run once."""
    results = tmp_path / "results"
    with _serve(kind, tmp_path, unguarded=False, results=results) as url:
        ident, key = uuid.uuid4().hex, uuid.uuid4().hex
        first = post(url, "/export", {"id": ident}, key)
        again = post(url, "/export", {"id": ident}, key)
        assert first.status_code == again.status_code == 200
        assert first.content == again.content == export_body(ident)
        assert "idempotency-replay-unavailable" not in first.headers
        assert again.headers["idempotent-replayed"] == "true"
        assert effects(url, ident) == 1
    stored = [p for p in results.rglob("*") if p.is_file() and not p.name.startswith(".")]
    assert len(stored) == 1 and stored[0].stat().st_size > len(export_body(ident))


def export_body(ident: str) -> bytes:
    """The project's export view's body (``django_project.views.export_body``)."""
    import hashlib

    return b"".join(hashlib.sha256(f"{ident}:{i}".encode()).digest() for i in range(98_304))


def test_a_status_only_guard_is_improperly_configured() -> None:
    code = (
        "from django.conf import settings; settings.configure();"
        "from django.core.exceptions import ImproperlyConfigured;"
        "from firstwrite.http.django import _Guarding\n"
        "from firstwrite.idempotency import Idempotency, IdempotencyConfig\n"
        "guard = Idempotency(IdempotencyConfig(replay='status-only'))\n"
        "try: _Guarding({'GUARD': guard})\n"
        "except ImproperlyConfigured as e: print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.startswith(
        "FIRSTWRITE_IDEMPOTENCY: the guard's IdempotencyConfig(replay='status-only') records"
    ), out.stdout + out.stderr


def test_settings_errors_are_improperly_configured() -> None:
    """Bad ``FIRSTWRITE_IDEMPOTENCY`` values say what is wrong (run in a child: Django's
    settings are the process's)."""
    code = (
        "from django.conf import settings; settings.configure();"
        "from django.core.exceptions import ImproperlyConfigured;"
        "from firstwrite.http.django import http_config\n"
        "for bad in ({'WIAT': 1}, {'WAIT': -1}, {'SCOPE': 3}, {'ROUTES': [{'path': 'x'}]},"
        " {'SCOPE': 'shop.nowhere'}):\n"
        "    try: http_config(bad)\n"
        "    except ImproperlyConfigured as e: print(e)\n"
        "print(http_config({'WAIT': 0, 'ROUTES': [{'path': '/a'}]}).routes[0].path)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.splitlines() == [
        "FIRSTWRITE_IDEMPOTENCY: unknown keys WIAT",
        "FIRSTWRITE_IDEMPOTENCY: wait must be >= 0 seconds",
        'FIRSTWRITE_IDEMPOTENCY["SCOPE"] is "user", a callable or its path',
        "FIRSTWRITE_IDEMPOTENCY: a route pattern starts with '/': 'x'",
        "FIRSTWRITE_IDEMPOTENCY[\"SCOPE\"]: No module named 'shop'",
        "/a",
    ], out.stdout + out.stderr


def test_the_user_scope_is_the_authenticated_users_primary_key() -> None:
    """``SCOPE: "user"``: an authenticated user's primary key; an anonymous caller has none
    (the middleware answers 401)."""
    code = (
        "import django; from django.conf import settings\n"
        "settings.configure(INSTALLED_APPS=['django.contrib.contenttypes', 'django.contrib.auth'])\n"
        "django.setup()\n"
        "from django.contrib.auth.models import AnonymousUser, User\n"
        "from django.test import RequestFactory\n"
        "from firstwrite.http.django import _View, http_config\n"
        "principal = http_config({'SCOPE': 'user'}).principal\n"
        "request = RequestFactory().post('/orders')\n"
        "print(principal(_View(request)))\n"
        "request.user = AnonymousUser(); print(principal(_View(request)))\n"
        "request.user = User(pk=7, username='ann'); print(principal(_View(request)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.splitlines() == ["None", "None", "7"], out.stdout + out.stderr


def test_idempotent_below_api_view_says_to_put_it_above() -> None:
    """Below ``@api_view`` the decorator gets the framework's unrendered response with no
    renderer: it refuses, naming the fix (docs/http.md)."""
    code = (
        "import django; from django.conf import settings\n"
        "settings.configure(INSTALLED_APPS=['django.contrib.contenttypes',"
        " 'django.contrib.auth'], FIRSTWRITE_IDEMPOTENCY={'METHODS': ['POST']})\n"
        "django.setup()\n"
        "from django.test import RequestFactory\n"
        "from rest_framework.decorators import api_view\n"
        "from rest_framework.response import Response\n"
        "from firstwrite.http.django import idempotent\n"
        "@api_view(['POST'])\n"
        "@idempotent\n"
        "def view(request): return Response({})\n"
        "request = RequestFactory().post('/x', HTTP_IDEMPOTENCY_KEY='k')\n"
        "try: view(request)\n"
        "except TypeError as e: print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == (
        "@idempotent goes above @api_view (it must see the rendered response)"
    ), out.stdout + out.stderr


def test_an_answered_request_makes_one_guard_call(tmp_path: Path) -> None:
    """A replay (or a 409, a 422) answered before the view is not guarded on its way out: one
    claim per request, never a second claim that could store the answer as the key's own."""
    code = (
        "import sys, types, django\n"
        "from django.conf import settings\n"
        "from firstwrite.idempotency import Idempotency\n"
        "class Counting(Idempotency):\n"
        "    claims = 0\n"
        "    def claim(self, *args, **kwargs):\n"
        "        Counting.claims += 1\n"
        "        return super().claim(*args, **kwargs)\n"
        "urls = sys.modules['counted_urls'] = types.ModuleType('counted_urls')\n"
        "settings.configure(ROOT_URLCONF='counted_urls', ALLOWED_HOSTS=['testserver'],"
        " MIDDLEWARE=['firstwrite.http.django.IdempotencyMiddleware'],"
        " FIRSTWRITE_IDEMPOTENCY={'GUARD': Counting(), 'METHODS': ['POST']})\n"
        "django.setup()\n"
        "from django.http import JsonResponse\n"
        "from django.test import Client\n"
        "from django.urls import path\n"
        "urls.urlpatterns = [path('orders', lambda request: JsonResponse({}, status=201))]\n"
        "client = Client(headers={'Idempotency-Key': 'k-1'})\n"
        "answers = [client.post('/orders').headers.get('Idempotent-Replayed') for _ in range(3)]\n"
        "print(answers, Counting.claims)\n"
    )
    env = {**os.environ, "FIRSTWRITE_LOCAL_DB": str(tmp_path / "counted.db")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.stdout.strip() == "[None, 'true', 'true'] 3", out.stdout + out.stderr
