"""Failed logins slow down: ``POST /_firstwrite/session`` counts wrong pairs per client address
and, past five in a row, makes that address wait (429 + Retry-After, problem+json) without
ever holding up the event loop or another client. Over real HTTP on loopback: a second client
is a second loopback address (127.0.0.2), as a second machine would be."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import httpx
import pytest
from security_helpers import KEY, SECRET, sign

from firstwrite.engine.api import Engine
from firstwrite.engine.server.app import ServerThread
from firstwrite.engine.server.session import LoginThrottle, client_address

SESSION = "/_firstwrite/session"
RIGHT = {"access_key_id": KEY, "secret_access_key": SECRET}


def wrong(n: int = 0) -> dict[str, str]:
    return {"access_key_id": KEY, "secret_access_key": f"guess-{n}"}


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# --- the bookkeeping ---------------------------------------------------------------------------


def test_five_failures_are_free_then_the_wait_doubles_up_to_the_cap() -> None:
    clock = Clock()
    throttle = LoginThrottle(clock=clock)
    assert [throttle.failed("10.0.0.1") for _ in range(5)] == [0.0] * 5
    assert throttle.wait("10.0.0.1") == 0.0
    waits = []
    for _ in range(12):
        waits.append(throttle.failed("10.0.0.1"))
        assert throttle.wait("10.0.0.1") == waits[-1]
    assert waits == [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]
    clock.now += 100
    assert throttle.wait("10.0.0.1") == 200
    assert throttle.wait("10.0.0.2") == 0.0  # another address owes nothing


def test_success_clears_the_count_and_silence_forgets_it() -> None:
    clock = Clock()
    throttle = LoginThrottle(clock=clock, forget_after=3600)
    for _ in range(6):
        throttle.failed("a")
    throttle.succeeded("a")
    assert throttle.wait("a") == 0.0
    assert throttle.failed("a") == 0.0  # counting starts again at one
    for _ in range(6):
        throttle.failed("b")
    clock.now += 3600
    assert throttle.wait("b") == 0.0
    assert throttle.failed("b") == 0.0


def test_memory_is_bounded_the_least_recently_failed_go_first() -> None:
    throttle = LoginThrottle(clock=Clock(), free_failures=0, max_clients=3)
    for client in ("a", "b", "c"):
        throttle.failed(client)
    throttle.failed("a")  # a failed again: now the most recent
    throttle.failed("d")
    assert throttle.wait("b") == 0.0  # forgotten
    assert all(throttle.wait(c) > 0 for c in ("a", "c", "d"))


@pytest.mark.parametrize(
    "settings",
    [
        {"free_failures": -1},
        {"max_clients": 0},
        {"base_delay": 0},
        {"base_delay": 10, "max_delay": 5},
        {"max_delay": 600, "forget_after": 60},
    ],
)
def test_nonsense_settings_are_refused(settings: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        LoginThrottle(**settings)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("client", "counted_as"),
    [
        (("127.0.0.1", 5000), "127.0.0.1"),
        (("2001:db8:1:2:aaaa::1", 5000), "2001:db8:1:2::/64"),
        (("2001:db8:1:2:bbbb::9", 6000), "2001:db8:1:2::/64"),  # same host's block
        (("::ffff:192.0.2.7", 5000), "192.0.2.7"),
        (None, ""),
    ],
)
def test_clients_are_counted_by_address(client: tuple[str, int] | None, counted_as: str) -> None:
    assert client_address({"type": "http", "client": client}) == counted_as


# --- over HTTP ---------------------------------------------------------------------------------


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def thread(engine: Engine, clock: Clock) -> Iterator[ServerThread]:
    server = ServerThread(engine, credentials={KEY: SECRET})
    with server:
        server.app.sessions.throttle = LoginThrottle(clock=clock)
        yield server


def client_from(thread: ServerThread, address: str = "127.0.0.1") -> httpx.Client:
    transport = httpx.HTTPTransport(local_address=address)
    return httpx.Client(base_url=thread.url, transport=transport, timeout=30)


def test_the_sixth_wrong_pair_starts_a_wait_that_even_the_right_pair_meets(
    thread: ServerThread, clock: Clock
) -> None:
    with client_from(thread) as http:
        for n in range(5):
            answer = http.post(SESSION, json=wrong(n))
            assert answer.status_code == 401 and "retry-after" not in answer.headers
        answer = http.post(SESSION, json=wrong(5))
        assert answer.status_code == 401 and answer.headers["retry-after"] == "1"
        assert "next try in 1 s" in answer.json()["detail"]
        refused = http.post(SESSION, json=RIGHT)
        assert refused.status_code == 429
        assert refused.headers["retry-after"] == "1"
        assert refused.headers["content-type"] == "application/problem+json"
        assert refused.json() == {
            "type": "about:blank",
            "title": "Too Many Requests",
            "status": 429,
            "detail": "too many failed logins from this address: try again in 1 s",
        }
        assert "set-cookie" not in refused.headers
        clock.now += 1.0  # the wait is over: the right pair logs in, and the count is cleared
        assert http.post(SESSION, json=RIGHT).status_code == 200
        assert http.post(SESSION, json=wrong()).headers.get("retry-after") is None


def test_tries_during_the_wait_do_not_count_and_the_wait_grows_per_failure(
    thread: ServerThread, clock: Clock
) -> None:
    with client_from(thread) as http:
        for n in range(6):
            http.post(SESSION, json=wrong(n))
        for _ in range(20):  # hammering during the wait changes nothing
            assert http.post(SESSION, json=wrong()).status_code == 429
        clock.now += 1.0
        answer = http.post(SESSION, json=wrong(7))  # the seventh failure: 2 s
        assert (answer.status_code, answer.headers["retry-after"]) == (401, "2")
        clock.now += 1.5
        assert http.post(SESSION, json=RIGHT).headers["retry-after"] == "1"  # 0.5 s, rounded up


def test_another_address_and_signed_requests_are_not_held_up(
    thread: ServerThread, engine: Engine
) -> None:
    with client_from(thread) as guesser, client_from(thread, "127.0.0.2") as other:
        for n in range(6):
            guesser.post(SESSION, json=wrong(n))
        assert guesser.post(SESSION, json=RIGHT).status_code == 429
        assert other.post(SESSION, json=RIGHT).status_code == 200  # its own address, its own count
        assert other.get("/_firstwrite/clock").status_code == 200  # and its session works
        # SigV4 from the throttled address itself: verified per request, never throttled.
        url = thread.url + "/_firstwrite/clock"
        assert guesser.get("/_firstwrite/clock", headers=sign("GET", url)).status_code == 200
        assert guesser.get("/").status_code == 200  # the health check


def test_guesses_sent_in_parallel_are_counted_one_by_one(thread: ServerThread) -> None:
    # 40 wrong pairs from one address, their headers sent first and their bodies all at once:
    # every login is waiting for its body, past any check made before reading it, when the
    # bodies arrive. Only the five free ones and the sixth (which starts the wait) are looked
    # at; every other one is refused, none gets through unchecked, and nothing answers 5xx.
    # The clock is frozen, so the wait cannot run out meanwhile.
    count = 40
    barrier = threading.Barrier(count)
    statuses: list[int] = []
    lock = threading.Lock()

    def guess(n: int) -> None:
        def body() -> Iterator[bytes]:
            barrier.wait(30)  # the headers are out; the body follows with everyone else's
            yield json.dumps(wrong(n)).encode()

        with client_from(thread) as http:
            answer = http.post(
                SESSION, content=body(), headers={"content-type": "application/json"}
            )
        with lock:
            statuses.append(answer.status_code)

    threads = [threading.Thread(target=guess, args=(n,)) for n in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(statuses) == [401] * 6 + [429] * (count - 6)


def test_a_forwarded_for_header_does_not_change_whose_count_it_is(
    thread: ServerThread, clock: Clock
) -> None:
    # The server faces its callers directly (loopback by default): an X-Forwarded-For header is
    # the caller's own word, so a new one per guess must not make a fresh address of it.
    with client_from(thread) as http:
        for n in range(6):
            http.post(SESSION, json=wrong(n), headers={"x-forwarded-for": f"10.9.0.{n}"})
        refused = http.post(SESSION, json=RIGHT, headers={"x-forwarded-for": "10.9.1.1"})
        assert refused.status_code == 429
        assert refused.headers["retry-after"] == "1"
