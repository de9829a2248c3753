"""A table filled by hand with seed 001's four-attribute rows, adopted by the layer.

The rows are what a team that built the seed's pattern itself has: ``pk = IDEMPOTENCY#<key>``,
``status``, ``resultId``, ``claimedAt``, ``expiresAt`` and no ``owner``, in either status
vocabulary. Each state is raced by 8 threads per key, on the engine in process and over HTTP:
the work runs exactly as the seed says (never for a live or finished row, once for a row that
may be taken over or reclaimed), and every thread gets the same answer.
"""

from __future__ import annotations

import base64
import decimal
import json
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from firstwrite.idempotency import (
    Idempotency,
    IdempotencyConfig,
    InProgressError,
    RecordLayout,
    ReplayedFailureError,
    Status,
)
from firstwrite.idempotency import requests as q
from firstwrite.idempotency.layout import VOCABULARIES, layout_of, vocabulary_of
from firstwrite.idempotency.record import Record

from .conftest import OffsetClock
from .test_seed_layout import seed_table

THREADS = 8
HOLD = 30.0  # the layout's hold for in-progress rows: claimedAt + 30 s


@pytest.fixture(params=["inprocess", "http"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def hand_row(
    key: str, word: str, *, claimed: float, expires: float | None, result_id: str | None = None
) -> dict[str, Any]:
    """A row exactly as the seed's model has it: no owner, no lease, no fingerprint."""
    item: dict[str, Any] = {
        "pk": {"S": f"IDEMPOTENCY#{key}"},
        "status": {"S": word},
        "claimedAt": {"N": str(int(claimed))},
    }
    if expires is not None:
        item["expiresAt"] = {"N": str(int(expires))}
    if result_id is not None:
        item["resultId"] = {"S": result_id}
    return item


def race(guard: Idempotency, key: str, result: Any) -> tuple[int, list[Any]]:
    """8 threads run ``key`` at once; (how many times the work ran, what each thread got)."""
    runs = 0
    lock = threading.Lock()
    barrier = threading.Barrier(THREADS)
    answers: list[Any] = [None] * THREADS

    def work() -> Any:
        nonlocal runs
        with lock:
            runs += 1
        time.sleep(0.05)
        return result

    def thread(i: int) -> None:
        barrier.wait()
        try:
            answers[i] = guard.run(key, work)
        except Exception as exc:  # the answer a caller would get
            answers[i] = exc

    threads = [threading.Thread(target=thread, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return runs, answers


@pytest.mark.parametrize("vocabulary", ["upper", "lower"])
def test_every_state_of_a_hand_built_table_raced_by_8_threads_per_key(
    transport: str, vocabulary: str, make_ddb: Callable[..., Any]
) -> None:
    client = make_ddb(transport)
    table = seed_table(client)
    clock = OffsetClock()
    now = clock.now()
    pending, succeeded, failed = VOCABULARIES[vocabulary]
    rows = {
        # in progress, within expiresAt and claimedAt + hold: held, never run
        "live": hand_row("live", pending, claimed=now - 5, expires=now + 3600),
        # in progress past claimedAt + hold (expiresAt still ahead): taken over, run once
        "abandoned": hand_row("abandoned", pending, claimed=now - 120, expires=now + 3600),
        # in progress past its expiresAt: taken over, run once
        "expired": hand_row("expired", pending, claimed=now - 7200, expires=now - 10),
        # succeeded: its resultId replayed as stored, never run
        "done": hand_row("done", succeeded, claimed=now - 60, expires=now + 3600, result_id="r-9"),
        # failed: reclaimable, run once
        "failed": hand_row("failed", failed, claimed=now - 60, expires=now + 3600),
        # failed and marked final by the layout's rule: the failure replayed, never run
        "final": {
            **hand_row("final", failed, claimed=now - 60, expires=now + 3600),
            "retryable": {"BOOL": False},
        },
    }
    for row in rows.values():
        client.put_item(TableName=table, Item=row)
    layout = RecordLayout.seed_001(vocabulary, hold=HOLD, final=("retryable", False))  # type: ignore[arg-type]
    guard = Idempotency(
        IdempotencyConfig(table_name=table, layout=layout, in_progress_wait=2.0),
        client=client,
        clock=clock.now,
    )
    got = {key: race(guard, key, {"ran": key}) for key in rows}

    runs, answers = got["live"]
    assert runs == 0 and all(isinstance(a, InProgressError) for a in answers), answers
    for key in ("abandoned", "expired", "failed"):
        runs, answers = got[key]
        assert runs == 1, (key, answers)
        assert answers == [{"ran": key}] * THREADS, (key, answers)
        item = client.get_item(TableName=table, Key={"pk": rows[key]["pk"]}, ConsistentRead=True)[
            "Item"
        ]
        # now the layer's own record, in the layout's vocabulary, resultId a string
        assert item["status"] == {"S": succeeded} and "owner" in item
        assert item["resultId"] == {"S": json.dumps({"ran": key}, separators=(",", ":"))}
        assert item["version"] == {"N": "2"}
    runs, answers = got["done"]
    assert runs == 0 and answers == ["r-9"] * THREADS
    runs, answers = got["final"]
    assert runs == 0 and all(isinstance(a, ReplayedFailureError) for a in answers), answers
    # The live row is untouched.
    live = client.get_item(TableName=table, Key={"pk": rows["live"]["pk"]}, ConsistentRead=True)
    assert live["Item"] == rows["live"]


def test_a_succeeded_row_goes_through_load_result(make_ddb: Callable[..., Any]) -> None:
    client = make_ddb("inprocess")
    table = seed_table(client)
    now = time.time()
    client.put_item(
        TableName=table,
        Item=hand_row("o-1", "succeeded", claimed=now, expires=now + 60, result_id="res-1"),
    )
    loaded: list[str] = []

    def load_result(result_id: str) -> dict[str, str]:
        loaded.append(result_id)
        return {"order": result_id, "state": "paid"}

    guard = Idempotency(
        IdempotencyConfig(
            table_name=table, layout=RecordLayout.seed_001("lower"), load_result=load_result
        ),
        client=client,
    )
    assert guard.run("o-1", lambda: pytest.fail("ran")) == {"order": "res-1", "state": "paid"}
    assert loaded == ["res-1"]
    # A record the layer wrote itself is not passed through the hook.
    assert guard.run("o-2", lambda: {"fresh": 1}) == {"fresh": 1}
    assert guard.run("o-2", lambda: pytest.fail("ran")) == {"fresh": 1}
    assert loaded == ["res-1"]


def test_an_in_progress_row_without_expires_at_is_held_for_claimed_at_plus_hold(
    make_ddb: Callable[..., Any], engine: Any
) -> None:
    client = make_ddb("inprocess")
    table = seed_table(client)
    now = engine.clock.now()
    client.put_item(TableName=table, Item=hand_row("h", "PENDING", claimed=now, expires=None))
    config = IdempotencyConfig(
        table_name=table, layout=RecordLayout.seed_001(hold=HOLD), in_progress_wait=0
    )
    # The time that passes is DynamoDB's (the engine's answers are dated from its clock, and
    # the guard judges the hold on it): the engine's clock moves, and the guard reads it.
    guard = Idempotency(config, client=client, clock=engine.clock.now)
    with pytest.raises(InProgressError):
        guard.run("h", lambda: pytest.fail("ran"))
    engine.clock.advance(HOLD + 1)
    assert guard.run("h", lambda: "taken") == "taken"


def test_the_takeover_holds_only_while_the_row_is_as_seen(make_ddb: Callable[..., Any]) -> None:
    """The takeover condition and its mirror (:func:`requests.replace_allows`) agree on every
    change the hand-built system could make meanwhile."""
    client = make_ddb("inprocess")
    table = seed_table(client)
    layout = RecordLayout.seed_001(hold=HOLD)
    requests = q.Requests(IdempotencyConfig(table_name=table, layout=layout))
    now = time.time()
    seen_row = hand_row("t", "PENDING", claimed=now - 100, expires=now + 3600)
    seen = Record.from_item(seen_row, layout)
    assert seen.foreign and seen.status is Status.PENDING
    token = q.fence(seen.owner, seen.version)
    changes: dict[str, dict[str, Any] | None] = {
        "unchanged": seen_row,
        "completed": {**seen_row, "status": {"S": "COMPLETED"}, "resultId": {"S": "x"}},
        "reclaimed": {**seen_row, "claimedAt": {"N": str(int(now))}},
        "extended": {**seen_row, "expiresAt": {"N": str(int(now + 7200))}},
        "versioned": {**seen_row, "version": {"N": "2"}},
        "other vocabulary": {**seen_row, "status": {"S": "in_progress"}},
        "owned": {**seen_row, "owner": {"S": "0" * 32 + ":1"}},
        "deleted": None,
    }
    for name, current in changes.items():
        client.delete_item(TableName=table, Key={"pk": seen_row["pk"]})
        if current is not None:
            client.put_item(TableName=table, Item=current)
        item = requests.new_item({"pk": seen_row["pk"]}, q.new_token(now), "-", 0, int(now) + 60)
        call = requests.replace_claim(item, token)
        try:
            client.put_item(**call.params)
            accepted = True
        except client.exceptions.ConditionalCheckFailedException:
            accepted = False
        mirror = current is not None and q.replace_allows(Record.from_item(current, layout), token)
        assert accepted == mirror == (name == "unchanged"), name


def test_tools_recognise_hand_built_rows_and_their_vocabulary() -> None:
    now = time.time()
    upper = hand_row("a", "COMPLETED", claimed=now, expires=now + 60, result_id="r")
    lower = hand_row("b", "in_progress", claimed=now, expires=None)
    seed = RecordLayout.seed_001()
    assert layout_of(upper) is seed and layout_of(lower) is seed
    assert vocabulary_of(upper, seed) == "upper" and vocabulary_of(lower, seed) == "lower"
    assert (
        layout_of({"pk": {"S": "x"}, "status": {"S": "shipped"}, "expiresAt": {"N": "1"}}) is None
    )


@pytest.mark.parametrize(
    "result",
    [
        {"blob": "x" * 20_000},  # compressed: B in the default layout
        {"amount": decimal.Decimal("10.50")},  # typed JSON: B in the default layout
        b"\x00\x01raw",
    ],
    ids=["large", "typed", "bytes"],
)
def test_the_seed_layout_keeps_result_id_a_string(
    result: Any, make_ddb: Callable[..., Any]
) -> None:
    client = make_ddb("inprocess")
    table = seed_table(client)
    guard = Idempotency(
        IdempotencyConfig(table_name=table, layout=RecordLayout.seed_001()), client=client
    )
    assert guard.run("k", lambda: result) == result
    item = client.get_item(TableName=table, Key={"pk": {"S": "IDEMPOTENCY#k"}})["Item"]
    text = item["resultId"]["S"]
    assert text.startswith("b64:") and base64.b64decode(text[4:])  # documented form
    assert guard.run("k", lambda: pytest.fail("ran")) == result


def test_the_console_and_keys_views_name_a_hand_built_row() -> None:
    from firstwrite.idempotency import record_view

    now = time.time()
    view = record_view.decode(hand_row("v", "failed", claimed=now, expires=now + 60))
    assert view is not None and view.layout.name == "seed-001"
    assert view.state == "FAILED (retryable, hand-built)" and view.owner_short == "hand-built"
    done = record_view.decode(hand_row("d", "COMPLETED", claimed=now, expires=now + 60))
    assert done is not None and done.state == "COMPLETED (hand-built)"


@pytest.mark.parametrize("refuse", [False, True])
def test_the_claim_condition_and_its_mirror_agree_on_hand_built_rows(
    refuse: bool, make_ddb: Callable[..., Any]
) -> None:
    """A hand-built row has no lease attribute: only the retention branch (``expiresAt`` past)
    lets a claim through directly; the mirror must say the same for every state."""
    client = make_ddb("inprocess")
    # Seed 001's table without its TTL: rows staged past their expiresAt would otherwise race
    # the engine's TTL sweeper (a row swept between its put and the claim is no row at all,
    # which the mirror, judging the row as staged, does not see).
    table = f"seed-{uuid.uuid4().hex[:10]}"
    client.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    layout = RecordLayout.seed_001(hold=HOLD)
    config = IdempotencyConfig(table_name=table, layout=layout, refuse_late_retries=refuse)
    requests = q.Requests(config)
    now = time.time()
    cases = 0
    accepted_any = rejected_any = False
    for word in (*VOCABULARIES["upper"], *VOCABULARIES["lower"]):
        for expires in (now - 100, now + 3600, None):
            for fp in ("fp-a", q.NO_FINGERPRINT):
                cases += 1
                key = f"c{cases}"
                row = hand_row(key, word, claimed=now - 600, expires=expires)
                client.put_item(TableName=table, Item=row)
                rec = Record.from_item(row, layout)
                item = requests.claim_item({"pk": row["pk"]}, q.new_token(now), fp, now, 60)
                try:
                    client.put_item(**requests.put_claim(item, fp, now).params)
                    accepted = True
                except client.exceptions.ConditionalCheckFailedException:
                    accepted = False
                mirror = q.claim_allows(rec, fp, now, retention_branch=not refuse)
                assert accepted is mirror, (word, expires, fp)
                accepted_any |= accepted
                rejected_any |= not accepted
    assert rejected_any and (accepted_any or refuse)


def test_an_unreadable_hand_built_row_is_a_clear_configuration_error(
    make_ddb: Callable[..., Any],
) -> None:
    from firstwrite.idempotency import ConfigurationError

    client = make_ddb("inprocess")
    table = seed_table(client)
    row = hand_row("n", "in_progress", claimed=time.time(), expires=None)
    client.put_item(TableName=table, Item=row)
    guard = Idempotency(
        IdempotencyConfig(table_name=table, layout=RecordLayout.seed_001("lower")), client=client
    )
    with pytest.raises(ConfigurationError, match=r"seed_001\(hold=seconds\)"):
        guard.run("n", lambda: pytest.fail("ran"))
    assert client.get_item(TableName=table, Key={"pk": row["pk"]})["Item"] == row  # untouched
