"""Results kept outside their record: ``keys get``'s store and key options, ``results orphans``.

``firstwrite keys get`` shows where a result lives (inline or in a result store, its size,
whether it is sealed) and never prints ciphertext; given the store (``--result-dir`` or
``--s3-bucket``) and the key (``--local-key ID=BASE64``, or ``--kms`` for AWS KMS), it opens
the result and shows it as it would be replayed. ``firstwrite results orphans`` lists the
store's objects whose record is gone or points elsewhere (``--delete`` removes them).
"""

from __future__ import annotations

import argparse
import base64
import binascii
import dataclasses
from typing import Any

from firstwrite.idempotency import record_view
from firstwrite.idempotency.errors import IdempotencyError
from firstwrite.idempotency.result_cipher import KmsEnvelopeCipher, LocalKeyCipher, ResultCipher
from firstwrite.idempotency.result_placement import Placement, describe
from firstwrite.idempotency.result_store import DirectoryResultStore, ResultStore, S3ResultStore
from firstwrite.shared.command_line import CLIError, ExitCode

from ._common import add_json_flag, print_json, table
from .target import Target, add_target_args, connect, describe_table, key_schema, target_of


def add_store_args(parser: argparse.ArgumentParser, *, keys: bool) -> None:
    """The result store options (and, with ``keys``, the cipher's)."""
    parser.add_argument("--result-dir", metavar="DIR", help="a DirectoryResultStore's folder")
    parser.add_argument("--s3-bucket", metavar="BUCKET", help="an S3ResultStore's bucket")
    parser.add_argument(
        "--s3-prefix", default="firstwrite/", help="the S3ResultStore's prefix (%(default)s)"
    )
    if keys:
        parser.add_argument(
            "--local-key",
            action="append",
            default=[],
            metavar="ID=BASE64",
            help="a LocalKeyCipher key (repeat for rotated keys) to open a sealed result",
        )
        parser.add_argument(
            "--kms", action="store_true", help="open a sealed result with AWS KMS (kms:Decrypt)"
        )


def _store(args: argparse.Namespace, target: Target) -> ResultStore | None:
    if args.result_dir:
        return DirectoryResultStore(args.result_dir)
    if args.s3_bucket:
        import boto3

        s3 = boto3.client("s3", region_name=target.region, endpoint_url=target.endpoint_url)
        return S3ResultStore(s3, args.s3_bucket, prefix=args.s3_prefix)
    return None


def _cipher(args: argparse.Namespace, target: Target) -> ResultCipher | None:
    if args.local_key:
        keys: dict[str, bytes] = {}
        for given in args.local_key:
            key_id, sep, text = given.partition("=")
            try:
                keys[key_id] = base64.b64decode(text, validate=True)
            except (binascii.Error, ValueError):
                sep = ""
            if not sep or not key_id:
                raise CLIError(f"--local-key wants ID=BASE64, not {given!r}", ExitCode.USAGE)
        try:
            return LocalKeyCipher(keys, next(iter(keys)))
        except IdempotencyError as exc:
            raise CLIError(str(exc), ExitCode.USAGE) from None
    if args.kms:
        import boto3

        kms = boto3.client("kms", region_name=target.region, endpoint_url=target.endpoint_url)
        return KmsEnvelopeCipher(kms, "unused-for-opening")
    return None


def opened(
    args: argparse.Namespace, view: dict[str, Any], item: dict[str, Any], result_name: str
) -> dict[str, Any]:
    """``view`` with its result's whereabouts (``result_at``) and, when the arguments give
    the store and key it needs, the result opened (``result``, as it would be replayed)."""
    raw_value = item.get(result_name, {})
    raw = raw_value.get("S", raw_value.get("B"))
    if raw is None or view.get("state") is None:
        return view
    raw = raw if isinstance(raw, str) else bytes(raw)
    where = describe(raw)
    view = {**view, "result_at": where}
    if where["where"] == "inline" and not where["sealed"]:
        return view
    target = target_of(args)
    store, cipher = _store(args, target), _cipher(args, target)
    if (where["where"] == "store" and store is None) or (where["sealed"] and cipher is None):
        return view
    record_id = view["record_id"] + (f"|{view['sort_id']}" if view["sort_id"] else "")
    try:
        inner = Placement(args.table, store, cipher, 0).inner(raw, record_id)
    except IdempotencyError as exc:
        raise CLIError(f"cannot open the result: {exc}", ExitCode.ERROR) from None
    assert inner is not None
    shown = record_view.stored_result(inner)
    return {**view, "result": {**dataclasses.asdict(shown), "opened": True}}


def add_commands(commands: Any) -> None:
    results = commands.add_parser(
        "results", help="results kept in a result store", description=__doc__
    )
    sub = results.add_subparsers(dest="results_command", metavar="COMMAND", required=True)
    orphans = sub.add_parser(
        "orphans",
        help="list store objects whose record is gone or points elsewhere",
        description="List the result store's objects that no record points at (the record "
        "expired, was deleted, or completed with another object); --delete removes them.",
    )
    add_store_args(orphans, keys=False)
    orphans.add_argument("--delete", action="store_true", help="delete the orphans listed")
    add_json_flag(orphans)
    add_target_args(orphans)
    orphans.set_defaults(handler=orphans_command)


def orphans_command(args: argparse.Namespace) -> int:
    target = target_of(args)
    store = _store(args, target)
    if store is None:
        raise CLIError("say which store: --result-dir DIR or --s3-bucket BUCKET", ExitCode.USAGE)
    found: list[dict[str, Any]] = []
    with connect(target) as client:
        tables: dict[str, dict[str, str] | None] = {}
        for obj in store.objects():
            if obj.table not in tables:
                try:
                    tables[obj.table] = key_schema(describe_table(client, obj.table, target))
                except CLIError:
                    tables[obj.table] = None  # the table is gone: all its objects are orphans
            keys = tables[obj.table]
            why = _why_orphan(client, obj.table, keys, obj.record_id, obj.location)
            if why is not None:
                found.append({**dataclasses.asdict(obj), "why": why})
    if args.delete:
        for orphan in found:
            store.delete(orphan["location"])
    if args.json:
        print_json({"orphans": found, "deleted": bool(args.delete)})
    elif not found:
        print("no orphans")
    else:
        rows = [[o["location"], o["record_id"], str(o["size"]), o["why"]] for o in found]
        print(table(["object", "record", "bytes", "why"], rows))
        if args.delete:
            print(f"deleted {len(found)} object(s)")
    return 0


def _why_orphan(
    client: Any, table_name: str, keys: dict[str, str] | None, record_id: str, location: str
) -> str | None:
    if keys is None:
        return "table gone"
    pk, _, sk = record_id.partition("|") if "RANGE" in keys else (record_id, "", "")
    key = {keys["HASH"]: {"S": pk}}
    if "RANGE" in keys:
        key[keys["RANGE"]] = {"S": sk}
    item = client.get_item(TableName=table_name, Key=key, ConsistentRead=True).get("Item")
    if item is None:
        return "record gone"
    for value in item.values():
        raw = value.get("B")
        if raw is not None and bytes(raw)[:1] == b"\x07":
            where = describe(bytes(raw))
            return None if where.get("location") == location else "record points elsewhere"
    return "record holds no pointer"
