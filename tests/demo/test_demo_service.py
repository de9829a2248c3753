"""The payments demo as a user meets it: ``python -m firstwrite.demo`` in a real subprocess on a
fresh database file, driven over loopback HTTP, with the engine's DynamoDB endpoint checked by
a real boto3 client while it runs, then stopped with a signal."""

from __future__ import annotations

import concurrent.futures
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest

from engine_process import Demo, start_demo


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    running = start_demo(tmp_path_factory.mktemp("demo") / "demo.db")
    yield running
    if running.process.poll() is None:
        running.stop(signal.SIGKILL)


def pay(
    client: httpx.Client, key: str, account: str = "acct_alice", amount: int = 1250, **more: Any
) -> httpx.Response:
    body = {"account": account, "amount": amount, "currency": "EUR", **more}
    return client.post("/payments", json=body, headers={"Idempotency-Key": key})


def new_key() -> str:
    return str(uuid.uuid4())


def test_the_banner_shows_a_curl_that_replays(demo: Demo) -> None:
    text = "\n".join(demo.banner)
    curl = next(ln for ln in demo.banner if "curl -si" in ln and "for i in 1 2" in ln)
    assert f"{demo.url}/payments" in curl and "Idempotency-Key: demo-" in curl
    assert demo.endpoint in text and "aws dynamodb scan" in text and "--no-sign-request" in text


def test_the_banner_prints_keys_commands_that_find_the_demos_records(demo: Demo) -> None:
    """The banner's `firstwrite keys` commands, run as printed (from the directory the demo
    was started in) while it runs, find the payment its curl makes, decoded."""
    curl = next(ln for ln in demo.banner if "curl -si" in ln and "for i in 1 2" in ln)
    key = re.search(r"Idempotency-Key: (demo-[0-9a-f]+)", curl)
    assert key is not None
    with demo.client() as client:
        assert pay(client, key.group(1)).status_code == 201
    commands = [ln.strip() for ln in demo.banner if " keys " in ln]
    listing, getting = commands
    assert f"--db {demo.db}" in listing and "--table firstwrite-idempotency" in listing
    assert f"keys get {key.group(1)} --scope 'anonymous POST /payments'" in getting
    program = shlex.split(listing)[0]
    assert program == os.path.relpath(Path(sys.executable).parent / "firstwrite")
    for command in commands:
        done = subprocess.run(shlex.split(command), capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, (command, done.stderr)
        assert key.group(1) in done.stdout and "HTTP 201 Created" in done.stdout, done.stdout
    assert "COMPLETED" in done.stdout and '"account": "acct_alice"' in done.stdout


def test_a_retried_payment_is_charged_once_and_replayed_byte_for_byte(demo: Demo) -> None:
    before = demo.balance("acct_alice")
    key = new_key()
    with demo.client() as client:
        first = pay(client, key, amount=1250, description="coffee")
        again = pay(client, key, amount=1250, description="coffee")
        payment = client.get(first.headers["location"])
    assert first.status_code == 201 and "idempotent-replayed" not in first.headers
    assert again.status_code == 201 and again.headers["idempotent-replayed"] == "true"
    assert again.content == first.content
    assert again.headers["location"] == first.headers["location"]
    assert payment.status_code == 200 and payment.json() == first.json()
    assert first.json()["amount"] == 1250 and first.json()["description"] == "coffee"
    assert demo.balance("acct_alice") == before - 1250


def test_the_same_key_for_another_payment_is_422(demo: Demo) -> None:
    before = demo.balance("acct_alice")
    key = new_key()
    with demo.client() as client:
        first = pay(client, key, amount=300)
        other = pay(client, key, amount=301)
    assert first.status_code == 201
    assert other.status_code == 422
    assert other.headers["content-type"] == "application/problem+json"
    assert other.json()["type"] == "urn:firstwrite:problem:idempotency-key-reused"
    assert demo.balance("acct_alice") == before - 300


def test_concurrent_duplicates_charge_once(demo: Demo) -> None:
    before = demo.balance("acct_alice")
    key = new_key()
    barrier = threading.Barrier(10)

    def send(_: int) -> httpx.Response:
        with demo.client() as client:
            barrier.wait(30)
            return pay(client, key, amount=777)

    with concurrent.futures.ThreadPoolExecutor(10) as pool:
        responses = list(pool.map(send, range(10)))
    assert demo.balance("acct_alice") == before - 777
    created = [r for r in responses if r.status_code == 201]
    assert created, [r.status_code for r in responses]
    assert all(r.status_code in (201, 409) for r in responses), [r.text for r in responses]
    assert len({r.content for r in created}) == 1
    for busy in (r for r in responses if r.status_code == 409):
        assert busy.json()["type"] == "urn:firstwrite:problem:request-in-progress"
        assert int(busy.headers["retry-after"]) >= 1
    with demo.client() as client:  # once it settled, every retry is the replay
        assert pay(client, key, amount=777).content == created[0].content


def test_a_failed_payment_may_be_retried_with_the_same_key(demo: Demo) -> None:
    before = demo.balance("acct_flaky")
    key = new_key()
    with demo.client() as client:
        failed = pay(client, key, account="acct_flaky", amount=900)
        retried = pay(client, key, account="acct_flaky", amount=900)
        replayed = pay(client, key, account="acct_flaky", amount=900)
    assert failed.status_code == 503 and failed.headers["retry-after"] == "1"
    assert failed.json()["type"] == "urn:firstwrite:demo:processor-unavailable"
    assert demo.balance("acct_flaky") == before - 900  # charged once, by the retry
    assert retried.status_code == 201 and "idempotent-replayed" not in retried.headers
    assert replayed.headers["idempotent-replayed"] == "true" and replayed.content == retried.content


def test_insufficient_funds_is_a_stored_answer(demo: Demo) -> None:
    before = demo.balance("acct_bob")
    key = new_key()
    with demo.client() as client:
        refused = pay(client, key, account="acct_bob", amount=before + 1)
        again = pay(client, key, account="acct_bob", amount=before + 1)
    assert refused.status_code == 402
    assert refused.json()["type"] == "urn:firstwrite:demo:insufficient-funds"
    assert again.status_code == 402 and again.content == refused.content
    assert again.headers["idempotent-replayed"] == "true"
    assert demo.balance("acct_bob") == before


def test_bad_requests_are_problems(demo: Demo) -> None:
    with demo.client() as client:
        no_key = client.post("/payments", json={"account": "acct_alice", "amount": 1})
        bad_amount = pay(client, new_key(), amount=-5)
        not_json = client.post("/payments", content=b"{", headers={"Idempotency-Key": new_key()})
        no_account = pay(client, new_key(), account="acct_nobody")
        no_payment = client.get("/payments/pay_missing")
    assert no_key.status_code == 400
    assert no_key.json()["type"] == "urn:firstwrite:problem:idempotency-key-missing"
    for response, kind in (
        (bad_amount, "invalid-payment"),
        (not_json, "invalid-payment"),
        (no_account, "account-not-found"),
        (no_payment, "payment-not-found"),
    ):
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["type"] == f"urn:firstwrite:demo:{kind}"
        assert 400 <= response.status_code < 500


def test_unknown_routes_and_methods_are_problems_too(demo: Demo) -> None:
    with demo.client() as client:
        no_route = client.get("/nowhere")
        wrong_method = client.delete("/payments")
    for response, status, kind in (
        (no_route, 404, "not-found"),
        (wrong_method, 405, "method-not-allowed"),
    ):
        assert response.status_code == status
        assert response.headers["content-type"] == "application/problem+json"
        document = response.json()
        assert document["type"] == f"urn:firstwrite:demo:{kind}" and document["status"] == status
    assert wrong_method.headers["allow"] == "POST"
    assert "DELETE /payments" in wrong_method.json()["detail"]


def test_one_caller_cannot_replay_anothers_payment(demo: Demo) -> None:
    key = new_key()
    with demo.client("token-ann") as ann, demo.client("token-ben") as ben:
        mine = pay(ann, key, amount=10)
        theirs = pay(ben, key, amount=10)
    assert mine.status_code == theirs.status_code == 201
    assert "idempotent-replayed" not in theirs.headers
    assert mine.json()["id"] != theirs.json()["id"]


def test_the_engine_endpoint_answers_sdks_while_the_demo_runs(demo: Demo) -> None:
    with demo.client() as client:
        made = pay(client, new_key(), amount=42).json()
    ddb = boto3.client(
        "dynamodb",
        endpoint_url=demo.endpoint,
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )
    item = ddb.get_item(TableName="demo-payments", Key={"id": {"S": made["id"]}})["Item"]
    assert item["amount"] == {"N": "42"}
    tables = ddb.list_tables()["TableNames"]
    assert {"demo-accounts", "demo-payments", "firstwrite-idempotency"} <= set(tables)


def test_sigterm_stops_it_cleanly_and_a_restart_keeps_the_balances(tmp_path: Path) -> None:
    first = start_demo(tmp_path / "restart.db")
    with first.client() as client:
        assert pay(client, "restart-key", amount=5000).status_code == 201
    code, out = first.stop(signal.SIGTERM)
    assert code == 0 and "firstwrite demo stopped" in out and "Traceback" not in out
    second = start_demo(tmp_path / "restart.db")
    try:
        assert second.balance("acct_alice") == 100_000 - 5000  # not re-seeded
        with second.client() as client:
            replay = pay(client, "restart-key", amount=5000)
        assert replay.headers["idempotent-replayed"] == "true"
    finally:
        code, out = second.stop(signal.SIGINT)
    assert code == 0 and "Traceback" not in out


@pytest.mark.parametrize("signals", [1, 2], ids=["SIGTERM", "SIGTERM twice"])
def test_sigterm_exits_cleanly_without_a_traceback(tmp_path: Path, signals: int) -> None:
    # A supervisor's SIGTERM, or two (the second stops waiting for requests in flight): exit
    # status 0 and not one traceback. Two used to leave the ASGI lifespan task pending, and its
    # cancellation at exit was logged as "Exception in 'lifespan' protocol" + CancelledError.
    demo = start_demo(tmp_path / "term.db")
    with demo.client() as client:  # one payment served, its keep-alive connection still open
        assert pay(client, new_key(), amount=100).status_code == 201
        demo.process.send_signal(signal.SIGTERM)
        if signals == 2:
            # Apart: a second SIGTERM still pending when it comes merges with the first.
            time.sleep(0.05)
            demo.process.send_signal(signal.SIGTERM)
        try:
            out, _ = demo.process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            demo.process.kill()
            out, _ = demo.process.communicate()
    assert demo.process.returncode == 0, out
    assert "Traceback" not in out and "CancelledError" not in out, out
    assert "Exception in" not in out and "firstwrite demo stopped" in out


@pytest.mark.parametrize("which", ["--port", "--engine-port"])
def test_a_busy_port_is_one_line_not_a_traceback(demo: Demo, tmp_path: Path, which: str) -> None:
    """One line, naming the address and whose port it is (the demo binds two), with the
    option that moves it."""
    port = demo.url.rsplit(":", 1)[1]
    other = "--engine-port" if which == "--port" else "--port"
    result = subprocess.run(
        [
            sys.executable,  # `make run`'s command: `firstwrite demo ...`
            "-m",
            "firstwrite.cli",
            "demo",
            which,
            port,
            other,
            "0",
            "--db",
            str(tmp_path / "busy.db"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.startswith("firstwrite:") and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "[Errno" not in result.stderr
    whose = (
        "for the demo (--port; make run PORT=...)"
        if which == "--port"
        else "for the demo's DynamoDB endpoint (--engine-port; make run ENGINE_PORT=...)"
    )
    assert f"cannot listen on 127.0.0.1:{port} {whose}: " in result.stderr


def test_a_database_in_a_missing_directory_is_one_line(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,  # `make run`'s command: `firstwrite demo ...`
            "-m",
            "firstwrite.cli",
            "demo",
            "--port",
            "0",
            "--db",
            str(tmp_path / "no" / "x.db"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert (
        result.stderr.startswith("firstwrite: --db ")
        and "does not exist" in result.stderr
        and "Traceback" not in result.stderr
    )


def _claims_total(page: str) -> float:
    row = re.search(r'data-metric="firstwrite_claims_total">(.*?)</tr>', page, re.S)
    assert row is not None, page
    total = re.search(r'<td class="num">([^<]+)</td>', row.group(1))
    assert total is not None, row.group(1)
    return float(total.group(1))


def test_the_console_is_served_beside_the_demo_and_counts_its_claims(demo: Demo) -> None:
    console = f"{demo.url}/console/"
    assert any(line.endswith(console) for line in demo.banner), demo.banner
    # ...and points at the race's timeline and the scenarios' diagrams, saying what they show.
    race = next(i for i, line in enumerate(demo.banner) if line.endswith(console + "race"))
    assert "timeline" in demo.banner[race - 1], demo.banner
    shown = next(i for i, line in enumerate(demo.banner) if line.endswith(console + "scenarios"))
    assert "sequence diagram" in demo.banner[shown - 1], demo.banner
    with demo.client() as client:
        before = _claims_total(client.get("/console/metrics").text)
        assert pay(client, new_key(), amount=5).status_code == 201
        after = _claims_total(client.get("/console/metrics").text)
        tables = client.get("/console/tables")
    # The demo's guard counts into the console's metrics: its one new claim is on the page.
    assert after == before + 1
    assert tables.status_code == 200 and "demo-payments" in tables.text


def test_the_demo_is_served_with_the_engine_servers_uvicorn_config(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The engine server's configuration, whole: its HTTP/1.1 protocol (limits, pacing), no
    # proxy-headers middleware (it re-scanned every header of every request, and X-Forwarded-For
    # is the caller's own word), no lifespan.
    from firstwrite.demo import server as demo_server
    from firstwrite.engine.server import runner

    served: list[Any] = []
    monkeypatch.setattr(runner, "serve_until_signalled", lambda server, sock: served.append(server))
    with socket.socket() as sock:
        demo_server._run(object(), sock, lambda: None)
    (server,) = served
    expected = runner.config(object(), demo_server.connection.Limits(), threads=40)
    assert server.config.proxy_headers is False and server.config.lifespan == "off"
    assert server.config.http.__qualname__ == expected.http.__qualname__
    assert server.config.http.__module__ == "firstwrite.engine.server.connection"
