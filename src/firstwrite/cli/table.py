"""``firstwrite table create|describe``: the idempotency table.

``create`` is the layer's own ``ensure_table()`` (on-demand, string partition key, TTL on
the layout's expiry attribute: ``expires_at``, or seed 001's ``expiresAt``); on an endpoint
without ``UpdateTimeToLive`` (dynalite) the table is kept without TTL, with a warning
(:func:`ensure_table`). On an existing table it lists every change it would make and switches
TTL on only with ``--enable-ttl`` or when the table is empty and has the layer's key schema:
TTL deletes any item whose expiry attribute is past, not only records. ``describe`` shows
DescribeTable and DescribeTimeToLive, checks what the layer needs from the table, says which
record layout it sees (from the TTL attribute, else from a few items, or as ``--layout`` names
it) and, for seed 001's layout, the status vocabulary of its first items (hand-built rows
included), and warns where the key layout concentrates writes.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from firstwrite.idempotency.layout import (
    DEFAULT,
    LAYOUTS,
    VOCABULARIES,
    RecordLayout,
    layout_of,
    named,
    vocabulary_of,
)
from firstwrite.shared.command_line import CLIError, ExitCode, error_code

from ._common import add_json_flag, fields, number, print_json, size
from .target import Target, add_target_args, connect, describe_table, key_schema, target_of

if TYPE_CHECKING:
    from firstwrite.idempotency import IdempotencyConfig

# DynamoDB's per-partition write ceiling, units per second.
PARTITION_WCU = 1000
HOT_PARTITION_WARNING = (
    "with a sort key the layer writes one partition per scope (pk = <prefix>#<scope>, "
    "sk = <key>): every claim and completion of one tenant goes to one partition key, and "
    "DynamoDB throttles a partition past {wcu:,} WCU a second (KeyRangeThroughputExceeded), "
    "about {requests:,} requests a second for that tenant. Keep the key in the partition key "
    "(no sort key) unless you query a tenant's records together, and then give a busy tenant "
    "more than one scope (docs/testing-with-faults.md#hot-partitions)"
)
NO_TTL_WARNING = (
    "{where} has no UpdateTimeToLive: TTL not enabled on {attribute}, so expired records are "
    "never deleted (the layer still treats them as expired)"
)


def ensure_table(guard: Any, client: Any, target: Target) -> tuple[bool, str | None]:
    """``guard.ensure_table()`` (``True`` when this call created the table), and a warning:
    ``None``, or the endpoint's lack of ``UpdateTimeToLive``, where the table is then created
    (or kept) without TTL and the command goes on."""
    name = guard.config.table_name
    try:
        client.describe_table(TableName=name)
        existed = True
    except ClientError as exc:
        if error_code(exc) != "ResourceNotFoundException":
            raise
        existed = False
    # An endpoint that cannot enable TTL is logged by the layer, not raised; the command says
    # so itself (the warning returned here), so the layer's log line would say it twice.
    with _without_layer_warnings():
        created = guard.ensure_table()
    try:
        ttl = client.describe_time_to_live(TableName=name).get("TimeToLiveDescription", {})
        enabled = ttl.get("TimeToLiveStatus") in ("ENABLED", "ENABLING")
    except ClientError as exc:
        if error_code(exc) != "UnknownOperationException":
            raise
        enabled = False
    if enabled:
        return created, None
    return created and not existed, NO_TTL_WARNING.format(
        where=target.describe(), attribute=guard.config.layout.expires
    )


@contextlib.contextmanager
def _without_layer_warnings() -> Iterator[None]:
    layer = logging.getLogger("firstwrite.idempotency")
    quiet = logging.Filter("firstwrite.idempotency.never")  # passes no record of the layer
    layer.addFilter(quiet)
    try:
        yield
    finally:
        layer.removeFilter(quiet)


def add_commands(commands: Any) -> None:
    table = commands.add_parser(
        "table",
        help="create or describe the idempotency table",
        description="The idempotency table: create it, or see its settings and whether they "
        "suit the layer.",
    )
    table_commands = table.add_subparsers(dest="table_command", metavar="COMMAND", required=True)
    create = table_commands.add_parser(
        "create",
        help="create the table (on-demand, TTL on expires_at) unless it exists",
        description="Create the idempotency table exactly as the layer's ensure_table() does: "
        "on-demand billing, string partition key, TTL on expires_at (expiresAt with --layout "
        "seed-001). On an existing table it "
        "says what it would change and changes TTL only with --enable-ttl, or when the table "
        "is empty and has the layer's key schema: TTL deletes every item whose expiry "
        "attribute is past, the application's own items included (an endpoint without "
        "UpdateTimeToLive: left off, with a warning). In production prefer infrastructure as "
        "code (docs/operating-on-aws.md).",
    )
    add_target_args(create)
    create.add_argument(
        "--partition-key", default="pk", help="partition key attribute (default: %(default)s)"
    )
    create.add_argument(
        "--sort-key",
        default=None,
        help="optional sort key attribute: one partition per scope (default: none)",
    )
    create.add_argument(
        "--layout",
        choices=tuple(LAYOUTS),
        default=DEFAULT.name,
        help="the record layout: TTL goes on its expiry attribute (default: %(default)s)",
    )
    create.add_argument(
        "--enable-ttl",
        action="store_true",
        help="on an existing table whose TTL is off, switch it on for the layout's expiry "
        "attribute (DynamoDB then deletes every item whose expiry is past, not only the "
        "layer's records)",
    )
    add_json_flag(create)
    create.set_defaults(handler=create_command)

    describe = table_commands.add_parser(
        "describe",
        help="show the table's settings and check them",
        description="DescribeTable and DescribeTimeToLive, decoded, with a check of what the "
        "layer needs: a string partition key and TTL on the layout's expiry attribute "
        "(expires_at, or seed 001's expiresAt), and which record layout the table holds. "
        "Item count and size are "
        "DynamoDB's estimates (refreshed about every six hours on AWS).",
    )
    add_target_args(describe)
    describe.add_argument(
        "--layout",
        choices=("auto", *LAYOUTS),
        default="auto",
        help="the record layout to check against; auto: the one the TTL attribute or the "
        "first records show (default: %(default)s)",
    )
    add_json_flag(describe)
    describe.set_defaults(handler=describe_command)


def create_command(args: argparse.Namespace) -> int:
    from firstwrite.idempotency import Idempotency, IdempotencyConfig

    try:
        config = IdempotencyConfig(
            table_name=args.table,
            partition_key=args.partition_key,
            sort_key=args.sort_key,
            layout=named(args.layout),
        )
    except ValueError as exc:
        raise CLIError(str(exc), ExitCode.USAGE) from None
    target = target_of(args)
    changes: list[dict[str, Any]] = []
    with connect(target, create=True) as client:
        guard = Idempotency(config, client=client)
        before = _ttl_status(client, args.table) if _exists(client, args.table) else None
        if before is None:
            created, no_ttl = ensure_table(guard, client, target)
        else:
            created, no_ttl = False, None
            if before == "DISABLED":
                change = _ttl_change(client, args, config)
                if change["applied"]:
                    _created, no_ttl = ensure_table(guard, client, target)
                    change["applied"] = no_ttl is None
                changes.append(change)
        info = table_info(client, args.table, target, config.layout)
    if no_ttl is not None:
        info["warnings"].insert(0, no_ttl)
        info["problems"] = _problems(info)
    if args.json:
        print_json({"created": created, "changes": changes, **info})
    else:
        verb = "created" if created else "already exists:"
        print(f"table {args.table} {verb} at {target.describe()}")
        if before is not None and not changes:
            print("no change: the table is kept as it is")
        for change in changes:
            done = "changed" if change["applied"] else "not changed"
            print(f"{done}: {change['change']} ({change['why']})")
        print(render(info))
    return 0


def _exists(client: Any, name: str) -> bool:
    try:
        client.describe_table(TableName=name)
    except ClientError as exc:
        if error_code(exc) != "ResourceNotFoundException":
            raise
        return False
    return True


def _ttl_status(client: Any, name: str) -> str:
    """DISABLED, ENABLED, ENABLING, DISABLING, or UNSUPPORTED (no DescribeTimeToLive)."""
    try:
        ttl = client.describe_time_to_live(TableName=name).get("TimeToLiveDescription", {})
    except ClientError as exc:
        if error_code(exc) != "UnknownOperationException":
            raise
        return "UNSUPPORTED"
    return str(ttl.get("TimeToLiveStatus", "DISABLED"))


def _ttl_change(client: Any, args: argparse.Namespace, config: IdempotencyConfig) -> dict[str, Any]:
    """Whether to switch TTL on for an existing table, and why: asked (``--enable-ttl``), or
    the table is empty and keyed as the layer keys it; otherwise left off, saying how."""
    expiry = config.layout.expires
    change = f"TTL on {expiry} (it is off)"
    if args.enable_ttl:
        return {"change": change, "applied": True, "why": "--enable-ttl"}
    keys = key_schema(client.describe_table(TableName=args.table)["Table"])
    layers = keys == {
        "HASH": config.partition_key,
        **({"RANGE": config.sort_key} if config.sort_key else {}),
    }
    page = client.scan(TableName=args.table, Limit=1)
    empty = not page.get("Items") and "LastEvaluatedKey" not in page
    if layers and empty:
        why = "the table is empty and has the layer's key schema"
        return {"change": change, "applied": True, "why": why}
    why = "the table is not empty" if layers else "the table's key schema is not the layer's"
    why += (
        f"; TTL deletes every item whose {expiry} is past, the application's own "
        "included: pass --enable-ttl to switch it on"
    )
    return {"change": change, "applied": False, "why": why}


def describe_command(args: argparse.Namespace) -> int:
    target = target_of(args)
    layout = None if args.layout == "auto" else named(args.layout)
    with connect(target) as client:
        info = table_info(client, args.table, target, layout)
    if args.json:
        print_json(info)
    else:
        print(render(info))
    return 0


def table_info(
    client: Any, name: str, target: Target, layout: RecordLayout | None = None
) -> dict[str, Any]:
    """DescribeTable + DescribeTimeToLive, flattened, with the record ``layout`` (``None``:
    the one the table shows) and ``problems`` the layer would hit."""
    table = describe_table(client, name, target)
    try:
        ttl = client.describe_time_to_live(TableName=name).get("TimeToLiveDescription", {})
    except ClientError as exc:
        if error_code(exc) != "UnknownOperationException":
            raise
        ttl = {"TimeToLiveStatus": "UNSUPPORTED"}
    types = {a["AttributeName"]: a["AttributeType"] for a in table.get("AttributeDefinitions", [])}
    keys = key_schema(table)
    billing = table.get("BillingModeSummary", {}).get("BillingMode")
    throughput = table.get("ProvisionedThroughput", {})
    if billing is None:  # DynamoDB omits the summary for tables created as PROVISIONED
        billing = "PROVISIONED" if throughput.get("WriteCapacityUnits") else "PAY_PER_REQUEST"
    stream = table.get("StreamSpecification", {})
    info: dict[str, Any] = {
        "table": name,
        "where": target.describe(),
        "status": table.get("TableStatus"),
        "arn": table.get("TableArn"),
        "partition_key": {"name": keys.get("HASH"), "type": types.get(keys.get("HASH", ""))},
        "sort_key": (
            {"name": keys["RANGE"], "type": types.get(keys["RANGE"])} if "RANGE" in keys else None
        ),
        "billing_mode": billing,
        "provisioned": (
            {
                "read": throughput.get("ReadCapacityUnits"),
                "write": throughput.get("WriteCapacityUnits"),
            }
            if billing == "PROVISIONED"
            else None
        ),
        "item_count": table.get("ItemCount"),
        "size_bytes": table.get("TableSizeBytes"),
        "ttl": {"status": ttl.get("TimeToLiveStatus"), "attribute": ttl.get("AttributeName")},
        "stream": stream.get("StreamViewType") if stream.get("StreamEnabled") else None,
        "global_secondary_indexes": [
            index["IndexName"] for index in table.get("GlobalSecondaryIndexes", [])
        ],
    }
    seen, how = (layout, "named") if layout is not None else _seen_layout(client, name, ttl)
    info["layout"] = {"name": None if seen is None else seen.name, "from": how}
    info["layout_names"] = (seen or DEFAULT).names()
    info["vocabulary"] = _vocabulary(client, name, seen)
    info["problems"] = _problems(
        info, fix_ttl=target.command("table create", name) + " --enable-ttl"
    )
    info["warnings"] = _warnings(info)
    return info


def _seen_layout(client: Any, name: str, ttl: dict[str, Any]) -> tuple[RecordLayout | None, str]:
    """The layout the table shows: by its TTL attribute, else by its first few items (one
    Scan page of 10: it reads, and on AWS bills, those items)."""
    for layout in LAYOUTS.values():
        if ttl.get("AttributeName") == layout.expires:
            return layout, "TTL attribute"
    for item in client.scan(TableName=name, Limit=10).get("Items", []):
        found = layout_of(item)
        if found is not None:
            return found, "items"
    return None, "nothing: TTL is off and no record found"


def _vocabulary(client: Any, name: str, layout: RecordLayout | None) -> dict[str, Any] | None:
    """For a layout with an explicit status: the status words the first items use (one Scan
    page of 10) and whether any of them is a hand-built row (no ``owner``); ``None`` for the
    default layout (which writes no status)."""
    if layout is None or not layout.explicit:
        return None
    words: list[str] = []
    hand_built = 0
    for item in client.scan(TableName=name, Limit=10).get("Items", []):
        found = vocabulary_of(item, layout)
        if found is None:
            continue
        if found not in words:
            words.append(found)
        hand_built += layout.owner not in item
    return {"words": words, "hand_built": hand_built}


def _vocabulary_text(vocabulary: dict[str, Any]) -> str:
    if not vocabulary["words"]:
        return "none seen (writes PENDING/COMPLETED/FAILED unless configured)"
    shown = " and ".join("/".join(VOCABULARIES[w]) for w in vocabulary["words"])
    rows = vocabulary["hand_built"]
    return shown + (f" ({rows} hand-built row(s) without owner seen)" if rows else "")


def _warnings(info: dict[str, Any]) -> list[str]:
    """What suits the layer but may hurt under load: a tenant partition key with a sort key."""
    if info["sort_key"] is None:
        return []
    return [HOT_PARTITION_WARNING.format(wcu=PARTITION_WCU, requests=PARTITION_WCU // 2)]


def _problems(info: dict[str, Any], *, fix_ttl: str | None = None) -> list[str]:
    """What is wrong for the layer; ``fix_ttl`` is the command that switches TTL on (None:
    this endpoint cannot)."""
    problems = []
    for role in ("partition_key", "sort_key"):
        key = info[role]
        if key is not None and key["type"] != "S":
            problems.append(f"the {role.replace('_', ' ')} {key['name']!r} must be a string (S)")
    ttl = info["ttl"]
    if ttl["status"] not in ("ENABLED", "ENABLING"):
        fix = f"run `{fix_ttl}` to enable it" if fix_ttl else "this endpoint cannot enable it"
        problems.append(
            f"TTL is not enabled: expired records are never deleted and storage only grows ({fix})"
        )
    elif ttl["attribute"] != (expires := info["layout_names"]["expires"]):
        layout = info["layout"]["name"] or DEFAULT.name
        problems.append(
            f"TTL is on {ttl['attribute']!r}, but the layer ({layout} layout) writes expiry to "
            f"{expires!r}"
        )
    return problems


def _layout_text(info: dict[str, Any]) -> str:
    seen = info["layout"]
    if seen["name"] is None:
        return f"unknown ({seen['from']}); checked against {DEFAULT.name}"
    return f"{seen['name']} (from the {seen['from']})" if seen["from"] != "named" else seen["name"]


def render(info: dict[str, Any]) -> str:
    def key(k: dict[str, Any] | None) -> str:
        return "none" if k is None else f"{k['name']} ({k['type']})"

    billing = info["billing_mode"]
    if info["provisioned"]:
        billing += f" ({info['provisioned']['read']} RCU, {info['provisioned']['write']} WCU)"
    ttl = info["ttl"]
    pairs = [
        ("table", info["table"]),
        ("where", info["where"]),
        ("status", info["status"]),
        ("partition key", key(info["partition_key"])),
        ("sort key", key(info["sort_key"])),
        ("billing", billing),
        ("TTL", f"{ttl['status']}" + (f" on {ttl['attribute']}" if ttl["attribute"] else "")),
        ("layout", _layout_text(info)),
        *(
            [("vocabulary", _vocabulary_text(info["vocabulary"]))]
            if info.get("vocabulary") is not None
            else []
        ),
        ("stream", info["stream"] or "off"),
        (
            "items",
            "unknown"
            if info["item_count"] is None
            else f"{number(info['item_count'])} (~{size(info['size_bytes'] or 0)}, estimate)",
        ),
    ]
    text = fields(pairs)
    text += "".join(f"\nwarning: {w}" for w in info.get("warnings", ()))
    if info["problems"]:
        text += "\n" + "\n".join(f"problem: {p}" for p in info["problems"])
    else:
        text += "\nok: the table suits the idempotency layer"
    return text
