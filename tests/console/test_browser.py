"""The console in a real browser: Debian's Chromium, headless, driven by Playwright.

Every page loads without a script error; a race of 32 claims shows one winner and 31 losers
holding the winner's item; the race's timeline has N lanes and one winner mark at N = 2, 32
and 128; every scenario shows its verdict, and its sequence diagram one arrow per listed call; a malformed raw request shows
DynamoDB's error and keeps the text; huge N is refused with a clear message; the keyboard
reaches everything; a 401 opens the sign-in form; a 71-character key leaves every column of a
table on screen at 1,280 px. The race page, three scenarios, that table and the diagrams of
the race and three scenarios are screenshotted: into ``docs/img/`` when
``FIRSTWRITE_SCREENSHOTS`` names it (``make screenshots``), else into the test's temporary
directory.

Playwright's own browsers are never downloaded: the tests use ``/usr/bin/chromium`` (``.ci/run``
installs it) and skip, saying so, where it is absent.
"""

from __future__ import annotations

import itertools
import json
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from browser import launch, needs_chromium
from firstwrite.console.race import MAX_N
from firstwrite.console.seed import EXAMPLES_TABLE

from .conftest import LONG_KEY, Server, store_http_replies

pytestmark = [
    # Never skipped when asked for screenshots: then it must fail loudly.
    needs_chromium(unless_env="FIRSTWRITE_SCREENSHOTS"),
    pytest.mark.xdist_group("console-browser"),
]

PAGES = {
    "/": "The firstwrite console",
    "/tables": "Tables in us-east-1",
    f"/tables/{EXAMPLES_TABLE}": EXAMPLES_TABLE,
    "/run": "Run an operation",
    "/race": "Race N claims",
    "/scenarios": "Scenarios",
    "/scenarios/lease-takeover": "Lease expiry and takeover",
    "/scenarios/ttl-race": "The TTL race",
    "/scenarios/throttling": "Throttling under burst",
    "/scenarios/transaction-cancelled": "A transaction cancelled",
    "/scenarios/stale-replica": "A stale replica",
    "/scenarios/replay": "Replay",
    "/scenarios/hot-partition": "A hot partition",
    "/scenarios/redelivered-batch": "A redelivered batch",
    "/scenarios/worker-killed-after-charge": "A worker killed after the charge",
    "/scenarios/skewed-worker": "A worker whose clock runs ahead",
    "/scenarios/regions-both-claimed": "Two regions both said yes",
    "/metrics": "Metrics",
    "/login": "Sign in to the engine",
}
SCREENSHOTS = {"lease-takeover", "transaction-cancelled", "hot-partition", "redelivered-batch"}
# The scenarios whose sequence diagrams docs/console.md shows (as PNG screenshots).
DIAGRAM_SCREENSHOTS = {
    "lease-takeover",
    "transaction-cancelled",
    "stale-replica",
    "worker-killed-after-charge",
    "skewed-worker",
    "regions-both-claimed",
}


def expect(locator: Any) -> Any:
    """Playwright's retrying assertions (imported late: the module loads without it)."""
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(locator)


@pytest.fixture(scope="module")
def chromium(playwright: Any) -> Iterator[Any]:
    """One headless Chromium for the module's tests (each opens contexts of its own)."""
    browser = launch(playwright)
    yield browser
    browser.close()


@pytest.fixture
def open_browser(chromium: Any) -> Iterator[Callable[..., Any]]:
    """``open_browser(**context_options)``: a fresh browser context (its own cookies, storage and
    cache, as a new profile has) on the module's Chromium."""
    contexts: list[Any] = []

    def open_context(**options: Any) -> Any:
        context = chromium.new_context(viewport={"width": 1280, "height": 900}, **options)
        context.set_default_timeout(60_000)
        contexts.append(context)
        return context

    yield open_context
    for context in contexts:
        context.close()


class Watched:
    """A page whose script errors and failed requests fail the test."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.errors: list[str] = []
        page.on("pageerror", lambda exc: self.errors.append(f"script error: {exc}"))
        page.on(
            "console",
            lambda m: (
                self.errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None
            ),
        )
        page.on("requestfailed", lambda r: self.errors.append(f"request failed: {r.url}"))

    def expect_clean(self, allowed: str | None = None) -> None:
        errors = [e for e in self.errors if allowed is None or not re.search(allowed, e)]
        assert errors == [], "\n".join(errors)


@pytest.fixture
def browser_page(open_browser: Callable[..., Any]) -> Iterator[Watched]:
    context = open_browser()
    watched = Watched(context.new_page())
    yield watched
    watched.expect_clean()


def screenshot(page: Any, tmp_path: Path, name: str) -> Path:
    """Save the top of the page (what a reader sees first) as ``name``."""
    folder = Path(os.environ.get("FIRSTWRITE_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    height = page.evaluate("document.documentElement.scrollHeight")
    page.screenshot(
        path=str(path),
        full_page=True,
        clip={"x": 0, "y": 0, "width": 1280, "height": min(height, 1500)},
        animations="disabled",
    )
    assert path.stat().st_size > 10_000
    return path


def screenshot_diagram(page: Any, tmp_path: Path, name: str) -> Path:
    """Save the page's diagram whole, at its natural size (its scroll box opened, the window
    as wide as it needs), as ``name``."""
    folder = Path(os.environ.get("FIRSTWRITE_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    diagram = page.locator("figure.diagram svg")
    width = diagram.evaluate("svg => svg.width.baseVal.value")
    page.set_viewport_size({"width": max(1280, int(width) + 96), "height": 900})
    page.evaluate("document.querySelector('.diagram-scroll').style.overflow = 'visible'")
    diagram.screenshot(path=str(path), animations="disabled")
    page.set_viewport_size({"width": 1280, "height": 900})
    assert path.stat().st_size > 10_000
    return path


SVG_TEXT = """g => [...g.querySelectorAll('text')].map(t => t.textContent).join(' ')"""


def expect_sequence_diagram(page: Any) -> None:
    """The scenario's diagram: one arrow per call the page lists, in the same order, each with
    the operation and the answer that call got; the verdict as the page has it."""
    diagram = page.locator("#scenario-result figure.diagram svg.fw-sequence")
    expect(diagram).to_have_count(1)
    assert diagram.bounding_box()["width"] > 300
    assert diagram.locator("title").first.inner_html()  # named, for assistive technology
    assert diagram.get_attribute("role") == "img"
    listed = page.locator("li.exchange > details > summary").evaluate_all(
        "items => items.map(s => [s.querySelector('code').textContent, "
        "s.querySelector('code').nextSibling.textContent])"
    )
    drawn = diagram.locator("g.call").evaluate_all(
        "calls => calls.map(g => [g.dataset.seq, "
        "[...g.querySelectorAll('text')].map(t => t.textContent)])"
    )
    assert len(drawn) == len(listed) > 0
    for n, ((seq, (operation_text, answer_text)), (operation, summary)) in enumerate(
        zip(drawn, listed, strict=True), start=1
    ):
        assert seq == str(n)
        assert operation_text.split(" · ")[0] == operation, (n, operation_text, operation)
        answer = summary.removeprefix(" → ").split(":")[0].strip()  # "400 SomeException"
        assert answer_text.startswith(f"← {answer}"), (n, answer_text, summary)
    verdict = diagram.locator("g.seq-verdict").evaluate(SVG_TEXT)
    assert verdict.startswith("Verdict: held.")
    checks = diagram.locator("g.check").evaluate_all("gs => gs.map(g => g.textContent)")
    assert len(checks) == page.locator(".checks li.pass").count()
    assert all(text.startswith("✓") for text in checks)


# -- every page ------------------------------------------------------------------------------


def test_every_page_loads(browser_page: Watched, console_server: Server) -> None:
    page = browser_page.page
    for path, heading in PAGES.items():
        response = page.goto(console_server.console_url + path)
        assert response.status == 200, path
        assert heading in page.locator("h1").inner_text(), path
        assert page.locator("h1").count() == 1, path
        # Accessible structure: a language, landmarks, a label for every control.
        assert page.evaluate("document.documentElement.lang") == "en"
        assert page.locator("main#main").count() == 1 and page.locator("nav").count() >= 1
        unlabelled = page.evaluate(
            """[...document.querySelectorAll('main input:not([type=hidden]), main select, main textarea')]
                 .filter(el => el.labels.length === 0).map(el => el.name || el.id)"""
        )
        assert unlabelled == [], path
        if path != "/login":
            current = page.locator("nav a[aria-current=page]")
            assert current.count() == 1, path


def test_a_long_key_leaves_every_column_on_screen(
    browser_page: Watched, console_server: Server, tmp_path: Path
) -> None:
    """At 1,280 px a 71-character key wraps in its cell: the state, lease, expiry and outcome
    columns stay on screen, nothing scrolls sideways, and the key is whole (hover and copy)."""
    table = store_http_replies(console_server.engine)
    page = browser_page.page
    page.goto(f"{console_server.console_url}/tables/{table}")
    row = page.locator("table.items tbody tr").filter(has_text=LONG_KEY)
    expect(row).to_have_count(1)
    key = row.locator("th code").first
    assert LONG_KEY in key.inner_text().replace("\n", "")  # a copy gets the whole key
    assert LONG_KEY in (key.get_attribute("title") or "")  # and so does a hover
    width = page.evaluate("document.documentElement.clientWidth")
    for header in page.locator("table.items thead th").all():
        box = header.bounding_box()
        assert box is not None and box["x"] + box["width"] <= width, header.inner_text()
    scroller = page.locator("table.items").locator("xpath=..")
    assert scroller.evaluate("e => e.scrollWidth <= e.clientWidth")
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    # Opened, the stored reply and the raw item wrap too.
    row.locator("details.stored-reply summary").click()
    row.locator("th details summary").click()
    expect(row.locator("details.stored-reply pre")).to_contain_text("HTTP 201 Created")
    assert scroller.evaluate("e => e.scrollWidth <= e.clientWidth")
    row.locator("details.stored-reply summary").click()
    row.locator("th details summary").click()
    screenshot(page, tmp_path, "console-table-long-key.png")


def test_unknown_table_is_a_clear_page(browser_page: Watched, console_server: Server) -> None:
    page = browser_page.page
    response = page.goto(console_server.console_url + "/tables/no-such-table")
    assert response.status == 404
    assert "There is no table named 'no-such-table' in us-east-1" in page.inner_text("main")
    browser_page.errors.clear()  # the 404 document itself is reported by Chromium


# -- the race --------------------------------------------------------------------------------


def test_race_32_claims(browser_page: Watched, console_server: Server, tmp_path: Path) -> None:
    page = browser_page.page
    page.goto(console_server.console_url + "/race")
    page.fill("#race-n", "32")
    page.get_by_role("button", name="Race").click()
    page.wait_for_selector("#race-result .verdict")
    assert page.locator(".verdict").get_attribute("data-held") == "true"
    won = page.locator("tr[data-outcome=won]")
    lost = page.locator("tr[data-outcome=lost]")
    assert won.count() == 1 and lost.count() == 31
    winner = won.get_attribute("data-writer")
    rows = lost.evaluate_all(
        "rows => rows.map(r => [r.dataset.code, r.dataset.itemWriter, r.dataset.writer])"
    )
    assert all(code == "ConditionalCheckFailedException" for code, _, _ in rows)
    assert all(item_writer == winner for _, item_writer, _ in rows)
    assert len({writer for _, _, writer in rows} | {winner}) == 32
    assert f"One winner, {winner}; 31 losers" in page.inner_text(".verdict")
    screenshot(page, tmp_path, "console-race.png")
    stored = console_server.engine.execute("Scan", {"TableName": "firstwrite-console-race"})[
        "Items"
    ]
    assert [item["writer"]["S"] for item in stored] == [winner]


@pytest.mark.parametrize("n", [2, 32, MAX_N])
def test_race_timeline(
    browser_page: Watched, console_server: Server, tmp_path: Path, n: int
) -> None:
    """N lanes, exactly one winner mark on the winner's lane, every loser pointing at the
    winner's item, the winning write under the engine's write lock; lanes that can be read
    (their names never overlap, text at least 9 px high) at 2 and at 128 claims."""
    page = browser_page.page
    page.goto(console_server.console_url + "/race")
    page.fill("#race-n", str(n))
    page.get_by_role("button", name="Race").click()
    page.wait_for_selector("#race-result .verdict")
    assert page.locator(".verdict").get_attribute("data-held") == "true"
    timeline = page.locator("#race-result figure.diagram svg.fw-timeline")
    expect(timeline).to_have_count(1)
    lanes = timeline.locator("g.lane")
    expect(lanes).to_have_count(n)
    expect(timeline.locator(".winner-mark")).to_have_count(1)
    winner = page.locator("tr[data-outcome=won]").get_attribute("data-writer")
    won = timeline.locator("g.lane[data-result=won]")
    assert won.get_attribute("data-writer") == winner
    expect(won.locator(".winner-mark")).to_have_count(1)
    expect(timeline.locator("path.points-to")).to_have_count(n - 1)
    answers = timeline.locator("g.lane[data-result=lost]").evaluate_all(
        "lanes => lanes.map(g => g.querySelector('.lane-answer').textContent)"
    )
    assert answers == [f"ConditionalCheckFailedException · handed {winner}'s item"] * (n - 1)
    lock = timeline.locator("g.lock")
    expect(lock).to_have_count(1)
    assert f"{winner}'s item written" in lock.evaluate(SVG_TEXT)
    assert str(n) in (timeline.locator("title").first.text_content() or "")
    # Readable: every lane's name on screen at 9 px or more, none overlapping the next.
    boxes = lanes.evaluate_all(
        "lanes => lanes.map(g => g.querySelector('.lane-name').getBoundingClientRect())"
        ".map(r => [r.top, r.height])"
    )
    assert min(height for _, height in boxes) >= 9
    tops = [top for top, _ in boxes]
    assert all(b - a >= 9 for a, b in itertools.pairwise(tops))
    if n == 32:
        screenshot_diagram(page, tmp_path, "console-diagram-race.png")
    if n == 2:  # the colour schemes: light, dark, and light again on paper
        backdrop = timeline.locator("rect.backdrop")
        fills = []
        for media in ({"color_scheme": "light"}, {"color_scheme": "dark"}, {"media": "print"}):
            page.emulate_media(**media)
            fills.append(backdrop.evaluate("r => getComputedStyle(r).fill"))
        assert fills[0] == fills[2] == "rgb(255, 255, 255)" != fills[1], fills


def test_huge_n_is_refused_and_nothing_is_lost(
    browser_page: Watched, console_server: Server
) -> None:
    page = browser_page.page
    page.goto(console_server.console_url + "/race")
    page.fill("#race-n", "4")
    page.get_by_role("button", name="Race").click()
    page.wait_for_selector("#race-result .verdict")
    page.fill("#race-n", "100000")
    page.get_by_role("button", name="Race").click()
    error = page.locator(".race-form .form-error")
    error.wait_for()
    assert f"between 2 and {MAX_N}" in error.inner_text()
    assert page.locator("#race-n").input_value() == "100000"  # the input is kept
    assert page.locator("tr[data-outcome]").count() == 4  # the last result is still shown
    browser_page.expect_clean(allowed="status of 400")
    browser_page.errors.clear()


def test_the_keyboard_reaches_and_runs_the_race(
    browser_page: Watched, console_server: Server
) -> None:
    page = browser_page.page
    page.goto(console_server.console_url + "/race")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.className") == "skip"
    for _ in range(30):
        page.keyboard.press("Tab")
        if (
            page.evaluate("document.activeElement.textContent.trim()") == "Race"
            and page.evaluate("document.activeElement.tagName") == "BUTTON"
        ):
            break
    else:
        pytest.fail("Tab never reached the Race button")
    page.keyboard.press("Enter")
    page.wait_for_selector("#race-result .verdict")
    # Focus moves to the result, so a screen reader reads it next.
    assert page.evaluate("document.activeElement.closest('#race-result') !== null")
    expect(page.locator(".race-form .form-status")).to_have_text("Done: held.")


# -- scenarios -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "slug",
    [
        "lease-takeover",
        "ttl-race",
        "throttling",
        "transaction-cancelled",
        "stale-replica",
        "replay",
        "hot-partition",
        "redelivered-batch",
        "worker-killed-after-charge",
        "skewed-worker",
        "regions-both-claimed",
    ],
)
def test_each_scenario_shows_its_verdict(
    browser_page: Watched, console_server: Server, tmp_path: Path, slug: str
) -> None:
    page = browser_page.page
    page.goto(f"{console_server.console_url}/scenarios/{slug}")
    page.get_by_role("button", name="Run the scenario").click()
    verdict = page.locator("#scenario-result .verdict")
    verdict.wait_for()
    assert verdict.get_attribute("data-held") == "true", verdict.inner_text()
    assert verdict.inner_text().startswith("Held.")
    assert page.locator(".checks li.fail").count() == 0
    assert page.locator(".checks li.pass").count() >= 4
    assert page.locator("ol.steps > li").count() >= 3
    # Each call opens to its request and answer.
    first_call = page.locator("li.exchange details:visible").first
    first_call.locator("summary").click()
    assert first_call.locator("pre.json").count() == 2
    first_call.locator("summary").click()
    expect_sequence_diagram(page)
    if slug in SCREENSHOTS:
        page.evaluate("window.scrollTo(0, 0)")
        screenshot(page, tmp_path, f"console-scenario-{slug}.png")
    if slug in DIAGRAM_SCREENSHOTS:
        screenshot_diagram(page, tmp_path, f"console-diagram-{slug}.png")
    # Reloading shows the same run, its diagram included, without JavaScript's help.
    page.reload()
    assert page.locator(".verdict").get_attribute("data-held") == "true"
    expect_sequence_diagram(page)


def run_scenario(page: Any, url: str) -> Any:
    """Open the scenario's page, run it, and return its verdict once shown."""
    page.goto(url)
    page.get_by_role("button", name="Run the scenario").click()
    verdict = page.locator("#scenario-result .verdict")
    verdict.wait_for()
    return verdict


def lifelines(page: Any) -> list[str]:
    """The sequence diagram's lifelines, left to right."""
    names: list[str] = page.locator("svg.fw-sequence g.lifeline > title").all_text_contents()
    return names


def test_worker_killed_after_charge_page(browser_page: Watched, console_server: Server) -> None:
    """Scenario 9: the refusal and the reconciliation told on the page and drawn, one lifeline
    per worker; the provider charged once."""
    page = browser_page.page
    verdict = run_scenario(
        page, f"{console_server.console_url}/scenarios/worker-killed-after-charge"
    )
    assert verdict.get_attribute("data-held") == "true", verdict.inner_text()
    expect(verdict.locator(".verdict-line")).to_contain_text("Held. Charged once")
    passed = page.locator(".checks li.pass").all_inner_texts()
    for text in (
        "without a hook, B's retry was refused with RecoveryRequiredError",
        "firstwrite_recovery_takeovers_total{outcome=refused} counted B's refusal",
        "C's reconcile hook was asked with A's mark",
        "the card was charged exactly once",
    ):
        assert any(text in line for line in passed), (text, passed)
    steps = page.locator("ol.steps > li")
    refused = steps.filter(has_text="Worker B retries, without a reconcile hook")
    expect(refused.locator("li.note")).to_contain_text(
        ["RecoveryRequiredError", "503 urn:firstwrite:problem:recovery-required"]
    )
    reconciled = steps.filter(has_text="Worker C retries, with a reconcile hook")
    expect(reconciled.locator("table.snapshots td").first).to_have_text("COMPLETED")
    charged = page.locator("li.note").filter(has_text="payment provider: card charged")
    expect(charged).to_have_count(1)
    expect_sequence_diagram(page)
    assert lifelines(page)[:3] == ["worker A", "worker B", "worker C"]
    drawn = page.locator("svg.fw-sequence g.check").all_text_contents()
    assert any("refused with RecoveryRequiredError" in text for text in drawn)


def test_regions_both_claimed_page(browser_page: Watched, console_server: Server) -> None:
    """Scenario 11: both regions' claims and the reconcilers' stream reads drawn, the overwrite
    logged with both owners, counted once."""
    page = browser_page.page
    verdict = run_scenario(page, f"{console_server.console_url}/scenarios/regions-both-claimed")
    assert verdict.get_attribute("data-held") == "true", verdict.inner_text()
    expect(verdict.locator(".verdict-line")).to_contain_text("Held. Found:")
    passed = page.locator(".checks li.pass").all_inner_texts()
    for text in (
        "the hazard is real",
        "the reconciler found exactly one overwrite of order-9117",
        "it names both owners",
        "dynamo_cross_region_duplicate_detected_total{region=eu-west-1} counted it once",
    ):
        assert any(text in line for line in passed), (text, passed)
    logged = page.locator("li.note-log").filter(has_text="cross-region duplicate")
    expect(logged).to_have_count(1)
    expect(logged).to_contain_text("made in us-east-1")
    expect(logged).to_contain_text("made in eu-west-1")
    found = page.locator("li.note").filter(has_text="overwrite of order-9117")
    expect(found).to_have_count(1)
    expect(found).to_contain_text("us-east-1's claim")
    expect(found).to_contain_text("replaced by eu-west-1's")
    metric = page.locator("table.metrics tr").filter(
        has_text="dynamo_cross_region_duplicate_detected_total"
    )
    expect(metric.locator("td.num")).to_have_text("1")
    expect_sequence_diagram(page)
    names = lifelines(page)
    assert {"reconciler us-east-1", "reconciler eu-west-1"} <= set(names)
    reads = page.locator("svg.fw-sequence g.call").filter(has_text="GetRecords")
    assert reads.count() >= 2


# -- the raw request editor ------------------------------------------------------------------


def test_a_malformed_raw_request_shows_dynamodbs_error(
    browser_page: Watched, console_server: Server
) -> None:
    page = browser_page.page
    page.goto(console_server.console_url + "/run")
    broken = '{"TableName": "firstwrite-console-examples", "Item": {"pk": {"S": "x"}'
    page.fill("#request", broken)
    page.get_by_role("button", name="Send").click()
    status = page.locator("#run-result .status")
    status.wait_for()
    assert status.inner_text() == "400 SerializationException"
    assert page.locator("#run-result pre.wire-body").inner_text() == (
        '{"__type":"com.amazon.coral.service#SerializationException"}'
    )
    assert "not valid JSON" in page.locator("#run-result .hint").inner_text()
    assert page.locator("#request").input_value() == broken  # nothing lost


def test_examples_drafts_and_ctrl_enter(browser_page: Watched, console_server: Server) -> None:
    page = browser_page.page
    page.goto(console_server.console_url + "/run")
    page.fill("#request", '{"TableName": "firstwrite-console-examples", "Limit": 1}')
    page.select_option("#operation", "Scan")
    assert '"Limit": 3' in page.locator("#request").input_value()  # Scan's example
    assert page.locator("#target").inner_text() == "DynamoDB_20120810.Scan"
    page.select_option("#operation", "PutItem")
    assert page.locator("#request").input_value() == (
        '{"TableName": "firstwrite-console-examples", "Limit": 1}'
    )  # the draft came back
    page.select_option("#operation", "ListStreams")
    assert page.locator("#target").inner_text() == "DynamoDBStreams_20120810.ListStreams"
    page.locator("#request").focus()
    page.keyboard.press("Control+Enter")
    status = page.locator("#run-result .status")
    status.wait_for()
    assert status.get_attribute("data-status") == "200"
    body = json.loads(page.locator("#run-result pre.wire-body").inner_text())
    assert body["Streams"][0]["TableName"] == EXAMPLES_TABLE


# -- the engine's clock ----------------------------------------------------------------------


def test_countdowns_follow_the_engine_clock(browser_page: Watched, console_server: Server) -> None:
    page = browser_page.page
    page.goto(f"{console_server.console_url}/tables/{EXAMPLES_TABLE}")
    row = page.locator('tr:has(code:text-matches("example-abandoned"))')
    lease = row.locator("time.countdown").nth(1)
    first = lease.inner_text()
    assert first.startswith("in ")
    page.wait_for_function(
        "([el, text]) => el.textContent !== text", arg=[lease.element_handle(), first]
    )
    # Frozen an hour ahead: the page shows the lease as over, and the clock stands still.
    engine = console_server.engine
    engine.clock.freeze(engine.clock.now() + 3600)
    page.reload()
    assert lease.inner_text().endswith(" ago")
    assert page.locator(".clock .tag").inner_text() == "frozen"
    shown = page.locator("#engine-clock").inner_text()
    page.wait_for_timeout(1500)
    assert page.locator("#engine-clock").inner_text() == shown


# -- readable without JavaScript -------------------------------------------------------------


def test_pages_read_without_javascript(
    open_browser: Callable[..., Any], console_server: Server
) -> None:
    import httpx

    from .conftest import post_json  # a race run through the API, then read with JS off

    with httpx.Client(base_url=console_server.console_url) as http:
        post_json(http, "/api/race", {"n": 5, "key": "no-js"})
    page = open_browser(java_script_enabled=False).new_page()
    page.goto(console_server.console_url + "/race")
    assert page.locator("tr[data-outcome=lost]").count() == 4
    page.goto(f"{console_server.console_url}/tables/{EXAMPLES_TABLE}")
    assert page.locator("tr[data-state='FAILED (final)']").count() == 1
    page.goto(console_server.console_url + "/run?operation=GetItem")
    assert '"ConsistentRead": true' in page.locator("#request").input_value()


# -- signing in ------------------------------------------------------------------------------


def test_sign_in_on_401(
    open_browser: Callable[..., Any], served: Callable[..., Server], console_engine: Any
) -> None:
    server = served(console_engine, credentials={"AKIDCONSOLE": "s3cret"})
    context = open_browser()
    page = Watched(context.new_page())
    # The login page is public; signing in there leads back into the console.
    page.page.goto(server.console_url + "/login?next=/console/race")
    page.page.fill("#access_key_id", "AKIDCONSOLE")
    page.page.fill("#secret_access_key", "s3cret")
    page.page.get_by_role("button", name="Sign in").click()
    page.page.wait_for_url(server.console_url + "/race")
    assert page.page.evaluate("document.cookie") == ""  # HttpOnly: not readable by scripts
    assert "Signed in as AKIDCONSOLE" in page.page.inner_text("header")
    # The session ends; the next state change gets 401 and opens the sign-in dialog.
    context.clear_cookies()
    page.page.get_by_role("button", name="Race").click()
    dialog = page.page.locator("#login-dialog")
    dialog.wait_for()
    dialog.locator("#access_key_id").fill("AKIDCONSOLE")
    dialog.locator("#secret_access_key").fill("wrong")
    dialog.get_by_role("button", name="Sign in").click()
    expect(dialog.locator(".form-error")).to_contain_text("Sign-in failed")
    dialog.locator("#secret_access_key").fill("s3cret")
    dialog.get_by_role("button", name="Sign in").click()
    # Signed in again, the race that asked runs without being asked twice.
    page.page.wait_for_selector("#race-result .verdict")
    assert page.page.locator(".verdict").get_attribute("data-held") == "true"
    # Signing out ends the session: the console no longer answers this browser.
    page.page.get_by_role("button", name="Sign out").click()
    page.page.wait_for_load_state()
    expect(page.page.locator("body")).not_to_contain_text("Signed in as")
    response = page.page.request.post(
        server.console_url + "/api/race",
        data=json.dumps({"n": 2}),
        headers={"Content-Type": "application/json"},
    )
    assert response.status == 401
    # The 401 is what Chromium reports; the page it reloaded into is not HTML, so it also
    # asks the server for /favicon.ico, which is not there (404).
    page.expect_clean(allowed="status of 40[14]")


def test_repeated_wrong_pairs_are_told_to_wait(
    open_browser: Callable[..., Any], served: Callable[..., Server], console_engine: Any
) -> None:
    from firstwrite.engine.server.session import LoginThrottle

    apps: list[Any] = []
    server = served(
        console_engine,
        credentials={"AKIDCONSOLE": "s3cret"},
        wrap=lambda app: apps.append(app) or app,
    )
    apps[0].sessions.throttle = LoginThrottle(clock=lambda: 1000.0)  # frozen: the wait holds
    page = Watched(open_browser().new_page())
    page.page.goto(server.console_url + "/login?next=/console/race")
    form_error = page.page.locator(".form-error")
    page.page.fill("#access_key_id", "AKIDCONSOLE")
    for n in range(6):
        page.page.fill("#secret_access_key", f"guess-{n}")
        page.page.get_by_role("button", name="Sign in").click()
        expect(form_error).to_contain_text("Sign-in failed")
        if n < 5:
            expect(form_error).not_to_contain_text("next try")
        else:  # the sixth starts the wait
            expect(form_error).to_contain_text("next try in 1 s")
        page.page.evaluate("document.querySelector('.form-error').textContent = ''")
    # The right pair now meets the wait the sixth wrong one started, and the page says so.
    page.page.fill("#secret_access_key", "s3cret")
    page.page.get_by_role("button", name="Sign in").click()
    expect(form_error).to_contain_text("too many failed logins from this address: try again in 1 s")
    assert page.page.url.endswith("/login?next=/console/race")  # not signed in
    page.expect_clean(allowed="status of 4(01|29)")
