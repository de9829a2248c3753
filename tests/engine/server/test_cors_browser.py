"""A browser app on another origin, using the AWS SDK for JavaScript v3, against a served engine:
real headless Chromium (Debian's, via Playwright), the SDK bundled for the browser by esbuild
(both pinned in tests/engine/server/js/package-lock.json).

The page is served from ``http://localhost:<port>``, the engine from ``http://127.0.0.1:<port>``
(``firstwrite engine serve --allow-origin http://localhost:<port>``): another origin, so every
call is a CORS request with a preflight, as from a developer's front end. An allowed origin
works, with auth off and with ``--require-auth`` (the page signs with its key, and a wrong key
is the SDK's own ``InvalidSignatureException``, not a network failure); the same page from an
origin not allowed (``http://127.0.0.1:<page port>``) gets nothing done; no page can drive
the admin API.
"""

from __future__ import annotations

import http.server
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest

from browser import launch, needs_chromium
from npm_packages import npm_ci

JS = Path(__file__).with_name("js")
KEY, SECRET = "AKIDBROWSER", "browser-secret"

pytestmark = [
    needs_chromium(),
    pytest.mark.skipif(
        shutil.which("node") is None or shutil.which("npm") is None,
        reason="node and npm are not installed (.ci/run installs them)",
    ),
    pytest.mark.slow,
    pytest.mark.xdist_group("js-sdk"),  # one npm ci at a time in tests/engine/server/js
]

_ENTRY = """export {
  DynamoDBClient, CreateTableCommand, PutItemCommand, GetItemCommand, ListTablesCommand,
} from "@aws-sdk/client-dynamodb";
"""

_PAGE = b"""<!doctype html><html><head><script src="/sdk.js"></script></head><body><script>
async function useTheEngine(endpoint, key, secret) {
  const ddb = new AWSDynamoDB.DynamoDBClient({
    endpoint, region: "us-east-1", maxAttempts: 1,
    credentials: {accessKeyId: key, secretAccessKey: secret},
  });
  try {
    await ddb.send(new AWSDynamoDB.CreateTableCommand({
      TableName: "from-browser",
      KeySchema: [{AttributeName: "pk", KeyType: "HASH"}],
      AttributeDefinitions: [{AttributeName: "pk", AttributeType: "S"}],
      BillingMode: "PAY_PER_REQUEST",
    }));
    await ddb.send(new AWSDynamoDB.PutItemCommand({
      TableName: "from-browser", Item: {pk: {S: "p1"}, note: {S: "hello"}},
    }));
    const got = await ddb.send(new AWSDynamoDB.GetItemCommand({
      TableName: "from-browser", Key: {pk: {S: "p1"}},
    }));
    return {ok: true, item: got.Item, requestId: got.$metadata.requestId};
  } catch (e) {
    return {ok: false, name: e.name, message: String(e.message)};
  }
}
async function driveTheAdminApi(engine) {
  try {
    const r = await fetch(engine + "/_firstwrite/clock", {method: "POST",
      headers: {"Content-Type": "application/json"}, body: JSON.stringify({advance: 3600})});
    return "answered " + r.status;
  } catch (e) { return "blocked"; }
}
</script></body></html>"""


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The SDK as one browser script (``window.AWSDynamoDB``), bundled by esbuild."""
    modules = npm_ci(JS)
    folder = tmp_path_factory.mktemp("sdk")
    entry, out = folder / "entry.mjs", folder / "sdk.js"
    entry.write_text(_ENTRY)
    script = (
        "require('esbuild').buildSync({entryPoints: [process.argv[1]], bundle: true, "
        "format: 'iife', globalName: 'AWSDynamoDB', platform: 'browser', "
        "nodePaths: [process.argv[3]], outfile: process.argv[2], logLevel: 'warning'})"
    )
    done = subprocess.run(
        ["node", "-e", script, str(entry), str(out), str(modules)],
        cwd=JS,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return out.read_bytes()


class _PageServer(http.server.ThreadingHTTPServer):
    """The browser app's own server: its page and the bundled SDK, on 127.0.0.1."""

    def __init__(self, files: dict[str, tuple[str, bytes]]) -> None:
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                found = files.get(self.path.split("?")[0])
                if found is None:
                    self.send_error(404)
                    return
                content_type, body = found
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        self.port = self.server_address[1]
        threading.Thread(target=self.serve_forever, daemon=True).start()


@pytest.fixture(scope="module")
def pages(bundle: bytes) -> Iterator[_PageServer]:
    server = _PageServer(
        {
            "/": ("text/html; charset=utf-8", _PAGE),
            "/sdk.js": ("text/javascript; charset=utf-8", bundle),
        }
    )
    yield server
    server.shutdown()


@pytest.fixture(scope="module")
def browser(playwright: Any) -> Iterator[Any]:
    launched = launch(playwright)
    yield launched
    launched.close()


def _open(browser: Any, url: str) -> Any:
    page = browser.new_context().new_page()
    page.goto(url)
    return page


def _tables(url: str, *, auth: bool) -> list[str]:
    """The engine's tables, asked by boto3 (signed with the server's key when it needs one)."""
    client = boto3.client(
        "dynamodb",
        region_name="us-east-1",
        endpoint_url=url,
        aws_access_key_id=KEY if auth else "any",
        aws_secret_access_key=SECRET if auth else "any",
    )
    return list(client.list_tables()["TableNames"])


@pytest.mark.parametrize("auth", [False, True], ids=["auth-off", "auth-on"])
def test_a_browser_app_on_an_allowed_origin_uses_the_engine(
    browser: Any, pages: _PageServer, cli_server: Any, auth: bool
) -> None:
    app_origin = f"http://localhost:{pages.port}"
    args = ["--allow-origin", app_origin]
    if auth:
        args += ["--require-auth", f"{KEY}:{SECRET}"]
    engine = cli_server(*args)
    page = _open(browser, app_origin + "/")
    if auth:  # a wrong key: the SDK reads DynamoDB's error, CORS headers and all
        wrong = page.evaluate(f"useTheEngine({engine.url!r}, {KEY!r}, 'not-the-secret')")
        assert (wrong["ok"], wrong["name"]) == (False, "InvalidSignatureException"), wrong
        assert _tables(engine.url, auth=True) == []
    seen = page.evaluate(f"useTheEngine({engine.url!r}, {KEY!r}, {SECRET!r})")
    assert seen["ok"], seen
    assert seen["item"] == {"pk": {"S": "p1"}, "note": {"S": "hello"}}
    assert seen["requestId"]  # x-amzn-RequestId is exposed to the page
    assert _tables(engine.url, auth=auth) == ["from-browser"]
    # The admin API stays same-origin, allowed origin or not: the clock does not move.
    if not auth:
        before = httpx.get(engine.url + "/_firstwrite/clock").json()["offset"]
    assert page.evaluate(f"driveTheAdminApi({engine.url!r})") == "blocked"
    if not auth:
        assert httpx.get(engine.url + "/_firstwrite/clock").json()["offset"] == before


def test_the_same_app_on_another_origin_gets_nothing_done(
    browser: Any, pages: _PageServer, cli_server: Any
) -> None:
    engine = cli_server("--allow-origin", f"http://localhost:{pages.port}")
    page = _open(browser, f"http://127.0.0.1:{pages.port}/")  # same page, origin not allowed
    seen = page.evaluate(f"useTheEngine({engine.url!r}, {KEY!r}, {SECRET!r})")
    assert seen["ok"] is False
    assert seen["name"] == "TypeError", seen  # the browser's CORS failure: "Failed to fetch"
    assert _tables(engine.url, auth=False) == []
