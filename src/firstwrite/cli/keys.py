"""``firstwrite keys get|list|delete``: idempotency records, decoded through the layer's Record.

A record is addressed the way the application addresses it, by its key (``KEY``, with the
``--scope`` and ``--key-prefix`` of its ``IdempotencyConfig``), or by the stored partition key
value that ``keys list`` prints (``--id``). Times are read on this machine's clock, as the
layer reads them on its callers' clocks.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from firstwrite.idempotency import IdempotencyConfig, Status, record_view
from firstwrite.idempotency.layout import DEFAULT, LAYOUTS, RecordLayout, layout_of, named
from firstwrite.shared.command_line import CLIError, ExitCode, error_code

from . import results
from ._common import add_json_flag, duration, fields, non_negative_int, print_json, table
from .progress import Progress
from .target import Target, add_target_args, connect, describe_table, key_schema, target_of

SUMMARY_CHARS = 60
PAGE = 500
SCOPE_SEARCH_ITEMS = 10_000  # `keys get` of an absent key looks this far for its scopes


def add_commands(commands: Any) -> None:
    keys = commands.add_parser(
        "keys",
        help="inspect or delete idempotency records",
        description="Idempotency records, decoded: state, owner, version, lease and expiry "
        "countdowns, the stored result.",
    )
    keys_commands = keys.add_subparsers(dest="keys_command", metavar="COMMAND", required=True)

    get = keys_commands.add_parser(
        "get",
        help="show one record",
        description="Show one record (a strongly consistent read). Exit status 4 if absent; "
        f"then a Scan of up to {SCOPE_SEARCH_ITEMS:,} items (key attributes only) names the "
        "scopes that hold the key, for the --scope it was missing.",
    )
    _address_args(get)
    results.add_store_args(get, keys=True)
    add_json_flag(get)
    get.set_defaults(handler=get_command)

    listing = keys_commands.add_parser(
        "list",
        help="list records (a Scan: it reads, and on AWS bills, the table)",
        description="List records, newest claim first. This is a Scan: on AWS it consumes read "
        "capacity for every item it reads, so it stops once --limit records are found.",
    )
    add_target_args(listing)
    listing.add_argument(
        "--state",
        choices=("pending", "completed", "failed", "expired"),
        action="append",
        help="only records in this state (repeatable); expired: past retention, "
        "awaiting TTL deletion",
    )
    listing.add_argument(
        "--limit",
        type=non_negative_int,
        default=50,
        help="show at most this many records; 0 for all (default: %(default)s)",
    )
    _layout_arg(listing)
    add_json_flag(listing)
    listing.set_defaults(handler=list_command)

    delete = keys_commands.add_parser(
        "delete",
        help="delete one record (a retry of its request will run again)",
        description="Delete one record, only if it is still the record shown (conditional on "
        "its owner and version). A retry of its request afterwards runs the side effect again: "
        "this is for clearing a key by hand, e.g. after fixing a final failure. Asks for "
        "confirmation on a terminal; elsewhere needs --yes. Exit status 4 if absent.",
    )
    _address_args(delete)
    delete.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    add_json_flag(delete)
    delete.set_defaults(handler=delete_command)


def _address_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("key", nargs="?", metavar="KEY", help="the idempotency key")
    parser.add_argument(
        "--scope", default="", help="the IdempotencyConfig scope the key was used in (default: '')"
    )
    parser.add_argument(
        "--key-prefix",
        default=IdempotencyConfig().key_prefix,
        help="the IdempotencyConfig key_prefix (default: %(default)s)",
    )
    parser.add_argument(
        "--id",
        metavar="RECORD_ID",
        help="the stored partition key value instead of KEY (record_id in `keys list --json`)",
    )
    parser.add_argument(
        "--sort-id", metavar="VALUE", help="with --id on a table with a sort key: its value"
    )
    _layout_arg(parser)
    add_target_args(parser)


def _layout_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--layout",
        choices=("auto", *LAYOUTS),
        default="auto",
        help="the record layout (IdempotencyConfig.layout); auto: read it from each item's "
        "attributes (default: %(default)s)",
    )


def _layout(args: argparse.Namespace) -> RecordLayout | None:
    return None if args.layout == "auto" else named(args.layout)


# -- decoding ---------------------------------------------------------------------------------


def _iso(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


_ESCAPED = re.compile(r"%(25|23)")


def _unescape(part: str) -> str:
    return _ESCAPED.sub(lambda m: "%" if m.group(1) == "25" else "#", part)


def split_record_id(pk: str, sk: str | None) -> tuple[str, str]:
    """``(scope, key)`` from the stored key (``<prefix>#<scope>#<key>``, escaped by the layer).
    A key longer than ``max_key_length`` was stored as its hash and stays one."""
    if sk is not None:
        _, _, scope = pk.partition("#")
        return _unescape(scope), _unescape(sk)
    _, _, rest = pk.partition("#")
    scope, _, key = rest.rpartition("#")
    return _unescape(scope), _unescape(key)


def decode(
    item: dict[str, Any], keys: dict[str, str], now: float, layout: RecordLayout | None = None
) -> dict[str, Any]:
    """One stored item as a JSON-ready dict (in ``layout``, or the one its attributes show);
    ``state`` is ``None`` for a foreign item."""
    pk_name, sk_name = keys["HASH"], keys.get("RANGE")
    pk = str(next(iter(item.get(pk_name, {}).values()), ""))  # a foreign table's may be N or B
    sk = str(next(iter(item.get(sk_name, {}).values()), "")) if sk_name else None
    scope, key = split_record_id(pk, sk)
    address: dict[str, Any] = {"record_id": pk, "sort_id": sk, "key": key, "scope": scope}
    rec = record_view.decode(item, limit=SUMMARY_CHARS, layout=layout)
    if rec is None:
        return address | {"key": pk, "scope": "", "state": None, "layout": None}
    claimed = rec.claimed_at
    lease = rec.lease_expires_at
    return address | {
        "state": rec.status.value,
        "label": rec.state,  # e.g. FAILED (retryable), COMPLETED (tombstone)
        "layout": rec.layout.name,
        "retryable": rec.retryable if rec.status is Status.FAILED else None,
        "expired": rec.expired(now),
        "owner": None if rec.record.foreign else rec.owner,
        "owner_short": "-" if rec.record.foreign else rec.owner_short,
        "hand_built": rec.record.foreign,  # a row without owner (seed 001's model, by hand)
        "version": rec.version,
        "claimed_at": _iso(claimed),
        "claimed_ago_s": None if claimed is None else round(now - claimed, 3),
        "lease_expires_at": _iso(lease),
        "lease_remaining_s": None if lease is None else round(lease - now, 3),
        "expires_at": _iso(rec.expires_at),
        "expires_in_s": round(rec.expires_at - now, 3),
        "removed_at": _iso(rec.removed_at),
        "fingerprint": rec.fingerprint,
        "region": rec.region,
        "result": None if rec.result is None else asdict(rec.result),  # format, size, summary
        "error": None if rec.error is None else asdict(rec.error),  # type, message, data
        "outcome": rec.outcome,
        "duplicate_gets": rec.condition(now),
    }


def _state(view: dict[str, Any]) -> str:
    if view["state"] is None:
        return "not a firstwrite record"
    return str(view["label"]) + (", expired" if view["expired"] else "")


def _lease(view: dict[str, Any]) -> str:
    left = view["lease_remaining_s"]
    if left is None:
        return "-"
    if view["state"] == "FAILED":
        return "released"
    return f"{duration(left)} left" if left >= 0 else f"over {duration(left)} ago"


def _expiry(view: dict[str, Any]) -> str:
    left = view["expires_in_s"]
    if left >= 0:
        return f"in {duration(left)}"
    return f"{duration(left)} ago (awaiting TTL)"


def render_record(view: dict[str, Any]) -> str:
    if view["state"] is None:
        return fields([("record", view["record_id"]), ("state", _state(view))])
    claimed = view["claimed_at"]
    pairs: list[tuple[str, Any]] = [
        ("record", view["record_id"] + (f" | {view['sort_id']}" if view["sort_id"] else "")),
        ("key", view["key"]),
        ("scope", view["scope"] or "(none)"),
        ("state", _state(view)),
        ("layout", view["layout"]),
        ("owner", view["owner"] or "none (a hand-built row: taken over as seen once free)"),
        ("version", view["version"]),
        (
            "claimed",
            "unknown" if claimed is None else f"{claimed} ({duration(view['claimed_ago_s'])} ago)",
        ),
        ("lease", _lease(view) if view["lease_expires_at"] else "none"),
        ("expires", f"{view['expires_at']} ({_expiry(view)})"),
        ("fingerprint", view["fingerprint"] or "none (payload validation off)"),
    ]
    if view["region"]:
        pairs.append(("region", view["region"]))
    if view["removed_at"]:
        pairs.append(("removed", f"{view['removed_at']} by TTL (a tombstone of the audit)"))
    at = view.get("result_at")
    if at and (at["where"] == "store" or at["sealed"]):  # plain inline: the result line says it
        place = f"{at['store']} store, {at['location']}" if at["where"] == "store" else "inline"
        pairs.append(("stored in", f"{place} ({at['size']} B{', sealed' if at['sealed'] else ''})"))
    if view["result"]:
        result = view["result"]
        stored = f"(stored as {result['format']}, {result['stored_bytes']} B)"
        pairs.append(("result", f"{result['summary']} {stored}"))
        detail = result.get("detail") or ()
        if len(detail) > 1:  # a stored HTTP reply: its status line, headers and body
            pairs += [("", f"  {line}") for line in detail]
    if view["error"]:
        error = view["error"]
        pairs.append(("error", f"{error['type']}: {error['message']}"))
    pairs.append(("now", view["duplicate_gets"]))
    return fields(pairs)


# -- commands ---------------------------------------------------------------------------------


def _locate(client: Any, args: argparse.Namespace, keys: dict[str, str]) -> dict[str, Any]:
    """The DynamoDB ``Key`` of the record the arguments name."""
    if (args.key is None) == (args.id is None):
        raise CLIError("give either KEY or --id RECORD_ID", ExitCode.USAGE)
    sort_key = keys.get("RANGE")
    if args.id is not None:
        key = {keys["HASH"]: {"S": args.id}}
        if sort_key is not None:
            if args.sort_id is None:
                raise CLIError(
                    f"the table has a sort key ({sort_key}): add --sort-id", ExitCode.USAGE
                )
            key[sort_key] = {"S": args.sort_id}
        return key
    from firstwrite.idempotency import Idempotency

    try:
        config = IdempotencyConfig(
            table_name=args.table,
            scope=args.scope,
            key_prefix=args.key_prefix,
            partition_key=keys["HASH"],
            sort_key=sort_key,
        )
        # The key exactly as the application's guard builds it (no call is made here).
        return Idempotency(config, client=client).dynamodb_key(args.key)
    except ValueError as exc:
        raise CLIError(str(exc), ExitCode.USAGE) from None


def _read(
    client: Any, args: argparse.Namespace, target: Target
) -> tuple[dict[str, str], dict[str, Any], dict[str, Any] | None]:
    """The table's key schema, the named record's ``Key``, and its item (``None``: absent),
    read strongly consistent."""
    keys = key_schema(describe_table(client, args.table, target))
    key = _locate(client, args, keys)
    item = client.get_item(TableName=args.table, Key=key, ConsistentRead=True).get("Item")
    return keys, key, item


def _absent(args: argparse.Namespace, key: dict[str, Any], scopes: Scopes | None = None) -> int:
    what = args.key if args.key is not None else args.id
    if args.json:
        found = {} if scopes is None else {"scopes": scopes.names, "searched_all": scopes.all}
        print_json({"found": False, "key": key, **found})
    where = f" in scope {args.scope!r}" if args.key is not None else ""
    line = f"firstwrite: no record for {what!r}{where} in table {args.table}"
    if scopes is not None and scopes.names:
        listed = ", ".join(repr(name) for name in scopes.names)
        line += f"; the key is held in scope {listed}: add --scope {shlex.quote(scopes.names[0])}"
    if scopes is not None and not scopes.all:
        line += f" (searched the first {SCOPE_SEARCH_ITEMS:,} items)"
    print(line, file=sys.stderr)
    return ExitCode.NOT_FOUND


@dataclass(frozen=True)
class Scopes:
    """The scopes whose records hold a key, and whether the whole table was searched."""

    names: list[str]
    all: bool


def scopes_of(client: Any, args: argparse.Namespace, keys: dict[str, str]) -> Scopes:
    """The scopes (of ``--key-prefix``) holding a record of ``args.key``: a Scan reading only
    the key attributes, of at most ``SCOPE_SEARCH_ITEMS`` items (on AWS it bills the read)."""
    names = [keys["HASH"], *([keys["RANGE"]] if "RANGE" in keys else [])]
    request: dict[str, Any] = {
        "TableName": args.table,
        "ProjectionExpression": ", ".join(f"#k{i}" for i in range(len(names))),
        "ExpressionAttributeNames": {f"#k{i}": name for i, name in enumerate(names)},
    }
    found: set[str] = set()
    scanned = 0
    while scanned < SCOPE_SEARCH_ITEMS:
        page = client.scan(**request, Limit=min(PAGE, SCOPE_SEARCH_ITEMS - scanned))
        for item in page.get("Items", []):
            pk = str(next(iter(item.get(names[0], {}).values()), ""))
            sk = str(next(iter(item.get(names[1], {}).values()), "")) if len(names) > 1 else None
            scope, key = split_record_id(pk, sk)
            if key == args.key and pk.startswith(f"{args.key_prefix}#"):
                found.add(scope)
        scanned += len(page.get("Items", []))
        if "LastEvaluatedKey" not in page:
            return Scopes(sorted(found), True)
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    return Scopes(sorted(found), False)


def get_command(args: argparse.Namespace) -> int:
    target = target_of(args)
    with connect(target) as client:
        keys, key, item = _read(client, args, target)
        if item is None:  # a key without its --scope is the usual miss: say where it is
            scopes = scopes_of(client, args, keys) if args.key is not None else None
            return _absent(args, key, scopes)
    view = decode(item, keys, time.time(), _layout(args))
    view = results.opened(args, view, item, (_layout(args) or layout_of(item) or DEFAULT).result)
    if args.json:
        print_json({"found": True, **view})
    else:
        print(render_record(view))
    return 0


def list_command(args: argparse.Namespace) -> int:
    target = target_of(args)
    wanted = set(args.state or ())
    now = time.time()
    views: list[dict[str, Any]] = []
    scanned = 0
    more = False
    with connect(target) as client:
        described = describe_table(client, args.table, target)
        keys = key_schema(described)
        estimate = described.get("ItemCount")
        request: dict[str, Any] = {"TableName": args.table, "Limit": PAGE}
        with Progress("scanning", estimate or None) as bar:
            while True:
                page = client.scan(**request)
                for item in page.get("Items", []):
                    scanned += 1
                    view = decode(item, keys, now, _layout(args))
                    if _matches(view, wanted):
                        views.append(view)
                bar.advance(len(page.get("Items", [])))
                last = page.get("LastEvaluatedKey")
                if args.limit and len(views) >= args.limit:
                    more = last is not None or len(views) > args.limit
                    break
                if last is None:
                    break
                request["ExclusiveStartKey"] = last
    views.sort(key=lambda v: v.get("claimed_ago_s") or 0.0)
    shown = views[: args.limit] if args.limit else views
    if args.json:
        print_json({"records": shown, "scanned": scanned, "more": more})
        return 0
    if not shown:
        print(f"no records in table {args.table} ({scanned} items scanned)")
        return 0
    with_scope = any(v["scope"] for v in shown)
    headers = ["KEY", *(["SCOPE"] if with_scope else []), "STATE", "VER", "OWNER", "CLAIMED"]
    headers += ["LEASE", "EXPIRES", "RESULT"]
    rows = []
    for v in shown:
        foreign = v["state"] is None
        row = [v["key"], *([v["scope"]] if with_scope else []), _state(v)]
        if foreign:
            row += ["-"] * 6
        else:
            claimed = v["claimed_ago_s"]
            row += [
                v["version"],
                v["owner_short"],
                "?" if claimed is None else f"{duration(claimed)} ago",
                _lease(v),
                _expiry(v),
                v["outcome"] or "-",
            ]
        rows.append(row)
    print(table(headers, rows))
    footer = f"{len(shown)} shown, {scanned} items scanned"
    if more:
        footer += "; more not shown (--limit 0 for all)"
    print(footer)
    return 0


def _matches(view: dict[str, Any], wanted: set[str]) -> bool:
    if not wanted:
        return True
    if view["state"] is None:
        return False
    if "expired" in wanted and view["expired"]:
        return True
    return view["state"].lower() in wanted and not view["expired"]


def delete_command(args: argparse.Namespace) -> int:
    target = target_of(args)
    with connect(target) as client:
        keys, key, item = _read(client, args, target)
        if item is None:
            return _absent(args, key)
        view = decode(item, keys, time.time(), _layout(args))
        if view["state"] is None:
            raise CLIError(f"{view['record_id']!r} is not a firstwrite record; not deleted")
        if not args.json:
            print(render_record(view))
        if not args.yes:
            _confirm()
        try:
            layout = _layout(args) or layout_of(item)
            client.delete_item(TableName=args.table, Key=key, **unchanged(item, layout))
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                raise CLIError(
                    "the record changed since it was read (claimed again, completed or "
                    "deleted); not deleted"
                ) from None
            raise
    if args.json:
        print_json({"deleted": True, **view})
    else:
        print(f"deleted {view['record_id']}")
    return 0


def unchanged(item: dict[str, Any], layout: RecordLayout | None = None) -> dict[str, Any]:
    """A condition that holds only while the record is as ``item`` shows it
    (:func:`firstwrite.idempotency.record.as_seen`): a record claimed, completed, failed or
    renewed since is never deleted."""
    from firstwrite.idempotency.record import as_seen

    return as_seen(item, layout)


def _confirm() -> None:
    if not sys.stdin.isatty():
        raise CLIError("not a terminal: pass --yes to delete without confirmation", ExitCode.USAGE)
    answer = input("delete it? a retry of its request will run its side effect again [y/N] ")
    if answer.strip().lower() not in ("y", "yes"):
        raise CLIError("not deleted")
