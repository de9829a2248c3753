"""A real browser (Debian's Chromium, headless, via Playwright) against a served engine.

A page of another site, open in the developer's browser, tries what a web page can do without a
CORS preflight: a ``no-cors`` fetch with a ``text/plain`` body, a ``<form>`` posting JSON as
``text/plain`` (to inject errors) and form data, and a JSON fetch (which needs a preflight the
server never grants). None of them moves the engine's clock or adds a fault, with auth off (the
default) or on, logged in or not. A page of the server's own origin (a mounted app) logs in and drives the admin API.

Playwright's own browsers are never downloaded: the test uses ``/usr/bin/chromium`` (``.ci/run``
installs it) and skips, saying so, where it is absent.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from security_helpers import KEY, SECRET

from browser import launch, needs_chromium
from firstwrite.engine.api import Engine
from firstwrite.engine.server.app import Mounted, ServerThread

pytestmark = [needs_chromium(), pytest.mark.xdist_group("engine-browser")]

YEAR = 31536000

_ATTACK = """<!doctype html><html><body>
<iframe name="sink-plain"></iframe><iframe name="sink-urlencoded"></iframe>
<form id="plain" method="POST" action="{admin}/_firstwrite/faults" enctype="text/plain"
      target="sink-plain"><input name='{{"kind": "error", "code": "InternalServerError", "message": "'
      value='"}}'></form>
<form id="urlencoded" method="POST" action="{admin}/_firstwrite/clock"
      target="sink-urlencoded">
  <input name="advance" value="{year}"></form>
<script>
async function attack() {{
  const results = [];
  const body = JSON.stringify({{advance: {year}}});
  try {{
    await fetch("{admin}/_firstwrite/clock", {{method: "POST", mode: "no-cors",
      credentials: "include", headers: {{"Content-Type": "text/plain"}}, body}});
    results.push("no-cors sent");
  }} catch (e) {{ results.push("no-cors failed: " + e); }}
  try {{
    const r = await fetch("{admin}/_firstwrite/clock", {{method: "POST", credentials: "include",
      headers: {{"Content-Type": "application/json"}}, body}});
    results.push("json answered " + r.status);
  }} catch (e) {{ results.push("json blocked"); }}
  return results;
}}
</script></body></html>"""

_OWN_PAGE = b"""<!doctype html><html><body><script>
async function drive(key, secret) {
  const json = {"Content-Type": "application/json"};
  const login = await fetch("/_firstwrite/session", {method: "POST", headers: json,
    body: JSON.stringify({access_key_id: key, secret_access_key: secret})});
  const moved = await fetch("/_firstwrite/clock", {method: "POST", headers: json,
    body: JSON.stringify({advance: 60})});
  const who = await fetch("/_firstwrite/session");
  return [login.status, moved.status, (await who.json()).principal];
}
</script></body></html>"""


async def _own_page(scope: Any, receive: Any, send: Any) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/html; charset=utf-8")],
        }
    )
    await send({"type": "http.response.body", "body": _OWN_PAGE})


# The page itself is public (a login page would be); what it calls needs the session.
OWN_PAGE = Mounted(_own_page, public=("/",))


class _Attacker(http.server.ThreadingHTTPServer):
    """Another site: serves one page on localhost (the engine is on 127.0.0.1)."""

    def __init__(self, page: bytes) -> None:
        page_bytes = page

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(page_bytes)))
                self.end_headers()
                self.wfile.write(page_bytes)

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        self.url = f"http://localhost:{self.server_address[1]}/"
        threading.Thread(target=self.serve_forever, daemon=True).start()


@pytest.fixture(scope="module")
def browser(playwright: Any) -> Iterator[Any]:
    launched = launch(playwright)
    yield launched
    launched.close()


@pytest.mark.parametrize("auth", [False, True], ids=["auth-off", "auth-on"])
def test_another_site_cannot_drive_the_admin_api(browser: Any, engine: Engine, auth: bool) -> None:
    credentials = {KEY: SECRET} if auth else None
    with ServerThread(engine, credentials=credentials, mounts={"/console": OWN_PAGE}) as url:
        attacker = _Attacker(_ATTACK.format(admin=url, year=YEAR).encode())
        context = browser.new_context()
        try:
            page = context.new_page()
            if auth:  # the developer is logged in to the console in this browser
                page.goto(url + "/console/")
                assert page.evaluate(f"drive({KEY!r}, {SECRET!r})") == [200, 200, KEY]
            before = engine.clock.state()["offset"]
            page.goto(attacker.url)
            results = page.evaluate("attack()")
            assert results[0] == "no-cors sent"  # the browser sent it: the server refused it
            assert results[1] == "json blocked"  # no CORS preflight is ever granted
            # Each form navigates a frame of its own: a second submission into a frame whose
            # first navigation has not committed yet is dropped by Chromium (no request at all),
            # so one shared frame made the second wait time out whenever the machine was slow.
            for form, path in (
                ("plain", "/_firstwrite/faults"),
                ("urlencoded", "/_firstwrite/clock"),
            ):
                with page.expect_response(
                    lambda r, path=path: (
                        r.url.endswith(path)
                        and r.request.method == "POST"
                        and r.request.resource_type == "document"
                    )
                ) as answer:
                    page.evaluate(f"document.getElementById({form!r}).submit()")
                assert answer.value.status in (403, 415), form
            assert engine.clock.state()["offset"] == before  # the year never passed
            assert engine.faults.active() == []  # no error injected into the data plane
        finally:
            context.close()
            attacker.shutdown()
            attacker.server_close()


def test_a_same_origin_page_logs_in_and_drives_the_admin_api(browser: Any, engine: Engine) -> None:
    with ServerThread(engine, credentials={KEY: SECRET}, mounts={"/console": OWN_PAGE}) as url:
        context = browser.new_context()
        try:
            page = context.new_page()
            page.goto(url + "/console/")
            before = engine.clock.state()["offset"]
            assert page.evaluate(f"drive({KEY!r}, {SECRET!r})") == [200, 200, KEY]
            assert engine.clock.state()["offset"] == pytest.approx(before + 60)
            cookies = context.cookies()
            assert [(c["httpOnly"], c["sameSite"]) for c in cookies] == [(True, "Strict")]
            assert page.evaluate("document.cookie") == ""  # HttpOnly: no script can read it
        finally:
            context.close()
