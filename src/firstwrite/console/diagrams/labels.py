"""The words of a sequence diagram: which lifeline a call goes to, and what its arrow says.

Pure functions of what the stage recorded (:mod:`firstwrite.console.scenarios.stage`); :mod:`.sequence` places
them. Every text here may hold user data: :mod:`.svg` cleans and escapes it where it is drawn.
"""

from __future__ import annotations

from collections.abc import Mapping

from firstwrite.idempotency import record_view

from ..scenarios.stage import Exchange, Note, Snapshot

STAGE_ACTOR = "the stage"
STREAMS = "DynamoDB Streams"
DYNAMODB = "DynamoDB"
STREAM_OPERATIONS = frozenset({"DescribeStream", "GetRecords", "GetShardIterator", "ListStreams"})


def actor_of(name: str) -> str:
    """The lifeline of calls made by ``name`` (none: the stage's own)."""
    return name or STAGE_ACTOR


def _tables_of(request: object) -> list[str]:
    """The tables a request names (its ``TableName``, or those of its batch/transaction)."""
    if not isinstance(request, Mapping):
        return []
    name = request.get("TableName")
    if isinstance(name, str):
        return [name]
    found: list[str] = []
    for entry in request.get("TransactItems") or []:
        if isinstance(entry, Mapping):
            for part in entry.values():
                table = part.get("TableName") if isinstance(part, Mapping) else None
                if isinstance(table, str) and table not in found:
                    found.append(table)
    for key in ("RequestItems",):
        items = request.get(key)
        if isinstance(items, Mapping):
            found.extend(str(t) for t in items if str(t) not in found)
    return found


def target_of(exchange: Exchange, regional: bool) -> str:
    """The lifeline a call goes to (``regional``: tables are told apart by region)."""
    if exchange.operation in STREAM_OPERATIONS:
        name = STREAMS
    else:
        tables = _tables_of(exchange.request)
        name = tables[0] if len(tables) == 1 else DYNAMODB
    return f"{name} ({exchange.region})" if regional and exchange.region else name


def operation_label(exchange: Exchange) -> str:
    """The operation, and the condition it was sent with."""
    request = exchange.request if isinstance(exchange.request, Mapping) else {}
    condition = request.get("ConditionExpression")
    if exchange.operation.startswith("Transact"):
        count = len(request.get("TransactItems") or [])
        return f"{exchange.operation} · {count} items"
    return f"{exchange.operation} · if {condition}" if condition else exchange.operation


def _record_words(view: record_view.RecordView) -> str:
    return f"{view.state} {view.owner_short} v{view.version}"


def answer_label(exchange: Exchange) -> str:
    """The answer in a few words: status, error code and what matters of what came back."""
    body = exchange.response if isinstance(exchange.response, Mapping) else {}
    code = exchange.code
    if code is None:
        text = f"{exchange.status} OK"
        item = body.get("Attributes") or body.get("Item")
        if isinstance(item, Mapping):
            view = record_view.decode(item)
            kind = "old item" if "Attributes" in body else "item"
            text += f" · {kind}: {_record_words(view)}" if view is not None else f" · {kind}"
        elif exchange.operation == "GetItem":
            text += " · no item"
        return text
    text = f"{exchange.status} {code}"
    if code == "ConditionalCheckFailedException":
        item = body.get("Item")
        if isinstance(item, Mapping):
            view = record_view.decode(item)
            text += f" · came back: {_record_words(view)}" if view is not None else " · item back"
    elif code == "TransactionCanceledException":
        reasons = body.get("CancellationReasons") or []
        text += " [" + ", ".join(str(r.get("Code")) for r in reasons if isinstance(r, Mapping))
        text += "]"
    else:
        reasons = body.get("throttlingReasons") or body.get("ThrottlingReasons") or []
        named = [str(r.get("reason")) for r in reasons if isinstance(r, Mapping)]
        if named:
            text += " · " + ", ".join(named)
    return text


def outcome_class(exchange: Exchange) -> str:
    code = exchange.code
    if code is None:
        return "ok"
    if "Throttl" in code or "ThroughputExceeded" in code:
        return "throttled"
    return "refused"


def snapshot_words(shot: Snapshot, at: float) -> str:
    """A watched record's state after a step, its lease and retention boundaries marked."""
    view = shot.record
    if view is None:
        return "absent" if shot.item is None else f"item {shot.item_json}"
    words = [view.state, f"owner {view.owner_short}", f"v{view.version}"]
    if view.lease_expires_at is not None and view.lease_expires_ms and view.lease_over(at):
        words.append("lease over")
    if view.expired(at):
        words.append("past retention")
    return " · ".join(words)


def is_clock_jump(note: Note) -> bool:
    """A stage change that moved the engine's clock."""
    return note.kind == "stage" and "clock" in note.code
