"""``firstwrite capacity``: the capacity planner (:mod:`.capacity_plan`) on the command line."""

from __future__ import annotations

import argparse
from typing import Any

from firstwrite.shared.command_line import CLIError, ExitCode

from . import capacity_alarms
from . import capacity_plan as model
from ._common import (
    add_json_flag,
    fraction,
    non_negative,
    non_negative_int,
    number,
    positive,
    positive_int,
    print_json,
    ratio,
    table,
)
from .target import DEFAULT_TABLE, add_target_args, connect, describe_table, target_of

PRICES = model.Prices()


def add_commands(commands: Any) -> None:
    cap = commands.add_parser(
        "capacity",
        help="plan write/read units, partitions, storage and monthly cost",
        description="Plan the idempotency table's capacity: the rule of thumb "
        "peak x (1 + duplicate ratio) WCU beside the full per-request model (claim, completion "
        "sized by the result, failed conditional writes, transactions at 2x, in-progress polls "
        "as RCU), partitions at 1,000 WCU / 3,000 RCU / 10 GB each, storage including expired "
        "items TTL has not deleted yet, and on-demand vs provisioned monthly cost. The model "
        "and its sources are in docs/operating-on-aws.md.",
    )
    cap.add_argument(
        "--peak-rps",
        type=positive,
        required=True,
        metavar="N",
        help="new requests per second at peak (first attempts; duplicates come on top)",
    )
    cap.add_argument(
        "--duplicate-ratio",
        type=ratio,
        default=0.0,
        metavar="R",
        help="duplicates per new request: 0.15 or 15%% (default: 0)",
    )
    cap.add_argument(
        "--record-bytes",
        type=positive_int,
        default=model.DEFAULT_RECORD_BYTES,
        metavar="B",
        help="the record without its result: the claim item (default: %(default)s, the "
        "layer's claim for a 36-character key with payload validation)",
    )
    cap.add_argument(
        "--result-bytes",
        type=non_negative_int,
        default=0,
        metavar="B",
        help="the stored result as stored (results over 4 KB are zlib-compressed first) "
        "(default: 0)",
    )
    cap.add_argument(
        "--retention",
        type=positive,
        default=24.0,
        metavar="HOURS",
        help="IdempotencyConfig.retention in hours (default: %(default)s)",
    )
    cap.add_argument(
        "--ttl-lag",
        type=non_negative,
        default=model.MAX_TTL_LAG_HOURS,
        metavar="HOURS",
        help="how long TTL takes to delete an expired record; DynamoDB: typically within 48 "
        "hours (default: %(default)s)",
    )
    cap.add_argument(
        "--average-rps",
        type=non_negative,
        default=None,
        metavar="N",
        help="average new requests per second over the month, for cost and storage "
        "(default: the peak, all month)",
    )
    cap.add_argument(
        "--in-progress-share",
        type=fraction,
        default=0.0,
        metavar="R",
        help="share of duplicates arriving while the first attempt still runs (default: 0)",
    )
    cap.add_argument(
        "--polls",
        type=non_negative,
        default=float(model.DEFAULT_POLLS),
        metavar="N",
        help="strongly consistent GetItem polls per in-progress duplicate: at most those that "
        "fit in in_progress_wait, the interval doubling from poll_interval to 0.5 s (2 s with "
        "the default 0.02 s: 8 polls); default: %(default)g, what the layer's default "
        "in_progress_wait of 1 s allows",
    )
    cap.add_argument(
        "--transactional-share",
        type=fraction,
        default=0.0,
        metavar="R",
        help="share of requests using variant 3 (TransactWriteItems, 2x) (default: 0)",
    )
    cap.add_argument(
        "--target-utilization",
        type=fraction,
        default=model.DEFAULT_TARGET_UTILIZATION,
        metavar="R",
        help="provisioned capacity = peak units / this (default: %(default)s, "
        "autoscaling's default target)",
    )
    cap.add_argument(
        "--business-items",
        type=non_negative,
        default=0.0,
        metavar="N",
        help="business items each variant-3 transaction writes beside the claim, each at 2x "
        "(default: 0)",
    )
    cap.add_argument(
        "--business-item-bytes",
        type=positive_int,
        default=model.WRITE_UNIT_BYTES,
        metavar="B",
        help="the size of one business item (default: %(default)s)",
    )
    cap.add_argument(
        "--gsi",
        type=non_negative_int,
        default=None,
        metavar="N",
        help="global secondary indexes on the idempotency table, each projecting the record: "
        "an index write per claim and completion (default: 0, or the table's own with --table)",
    )
    cap.add_argument(
        "--alarms",
        action="store_true",
        help="print CloudWatch alarms for the table as a CloudFormation template (YAML) "
        "instead of the plan: throttling, consumed vs provisioned capacity, replication "
        "latency, the layer's own metrics",
    )
    add_target_args(cap, table=False)
    cap.add_argument(
        "--table",
        default=None,
        help="read the number of GSIs and the billing mode from this table's description "
        "(at the local engine, --endpoint-url or --aws)",
    )
    prices = cap.add_argument_group(
        f"prices in USD (defaults: us-east-1, Standard table class, as of {PRICES.as_of})"
    )
    for flag, attr, what in (
        ("--price-write-million", "write_request_per_million", "per million write request units"),
        ("--price-read-million", "read_request_per_million", "per million read request units"),
        ("--price-wcu-hour", "wcu_hour", "per provisioned WCU-hour"),
        ("--price-rcu-hour", "rcu_hour", "per provisioned RCU-hour"),
        ("--price-gb-month", "gb_month", "per GB-month of storage"),
    ):
        prices.add_argument(
            flag,
            dest=attr,
            type=non_negative,
            default=getattr(PRICES, attr),
            metavar="USD",
            help=f"{what} (default: %(default)s)",
        )
    add_json_flag(cap)
    cap.set_defaults(handler=capacity_command)


def _described(args: argparse.Namespace) -> tuple[int, str]:
    """(GSIs, billing mode): from ``--gsi`` or, with ``--table``, the table's description."""
    if args.table is None:
        return (args.gsi or 0), "PAY_PER_REQUEST"
    if args.gsi is not None:
        raise CLIError("give --gsi or --table, not both", ExitCode.USAGE)
    target = target_of(args)
    with connect(target) as client:
        table = describe_table(client, args.table, target)
    billing = (table.get("BillingModeSummary") or {}).get("BillingMode")
    if billing is None:  # DynamoDB omits the summary for tables created as PROVISIONED
        write = (table.get("ProvisionedThroughput") or {}).get("WriteCapacityUnits")
        billing = "PROVISIONED" if write else "PAY_PER_REQUEST"
    return len(table.get("GlobalSecondaryIndexes") or ()), str(billing)


def capacity_command(args: argparse.Namespace) -> int:
    gsis, billing = _described(args)
    try:
        workload = model.Workload(
            peak_rps=args.peak_rps,
            duplicate_ratio=args.duplicate_ratio,
            record_bytes=args.record_bytes,
            result_bytes=args.result_bytes,
            retention_hours=args.retention,
            ttl_lag_hours=args.ttl_lag,
            average_rps=args.average_rps,
            in_progress_share=args.in_progress_share,
            polls=args.polls,
            transactional_share=args.transactional_share,
            target_utilization=args.target_utilization,
            gsis=gsis,
            business_items=args.business_items,
            business_item_bytes=args.business_item_bytes,
        )
        prices = model.Prices(
            write_request_per_million=args.write_request_per_million,
            read_request_per_million=args.read_request_per_million,
            wcu_hour=args.wcu_hour,
            rcu_hour=args.rcu_hour,
            gb_month=args.gb_month,
            as_of=PRICES.as_of if _default_prices(args) else "given",
        )
    except ValueError as exc:
        raise CLIError(str(exc), ExitCode.USAGE) from None
    result = model.plan(workload, prices)
    if args.alarms:
        print(
            capacity_alarms.template(
                args.table or DEFAULT_TABLE,
                billing_mode=billing,
                utilization_percent=round(min(90.0, args.target_utilization * 100 + 10), 1),
            ),
            end="",
        )
        return 0
    if args.json:
        print_json(result.to_dict())
    else:
        print(render(result))
    return 0


def _default_prices(args: argparse.Namespace) -> bool:
    names = ("write_request_per_million", "read_request_per_million", "wcu_hour", "rcu_hour")
    return all(getattr(args, n) == getattr(PRICES, n) for n in (*names, "gb_month"))


def _units(value: float) -> str:
    return number(value, 2) if value else "-"


def _dollars(value: float) -> str:
    return f"${value:,.2f}"


def render(p: model.Plan) -> str:
    w = p.workload
    duplicates = w.peak_rps * w.duplicate_ratio
    head = (
        f"peak {number(w.peak_rps, 2)} new requests/s + {number(duplicates, 2)} duplicates/s "
        f"({w.duplicate_ratio:.0%}); record {w.record_bytes} B + result {w.result_bytes} B"
    )
    if w.transactional_share:
        head += f"; {w.transactional_share:.0%} through transactions (2x)"
        if w.business_items:
            head += f" writing {model.number_text(w.business_items)} business item(s) each"
    if w.gsis:
        head += f"; {w.gsis} GSI(s)"
    rows = [
        (line.name, line.call, number(line.rate, 2), _units(line.wcu), _units(line.rcu))
        for line in p.lines
    ]
    rows.append(("total", "", "", number(p.wcu), number(p.rcu)))
    missed = p.missed_by_rule_of_thumb
    share = f" ({missed / p.wcu:.0%} of the total)" if p.wcu else ""
    partitions = [
        f"partitions: {p.partitions}",
        f"  throughput: {number(p.table_wcu)} WCU / 1,000 + {number(p.table_rcu)} RCU / 3,000 "
        f"-> {p.partitions_for_throughput}",
        f"  storage: {p.table_storage_bytes / model.GIB:,.1f} GiB / 10 GiB -> "
        f"{p.partitions_for_storage}",
    ]
    copies = f" x {1 + w.gsis} (the table and {w.gsis} GSI(s))" if w.gsis else ""
    storage = [
        f"storage: {p.storage_gib:,.1f} GiB = {number(p.items_stored)} records x "
        f"{p.item_bytes} B{copies}",
        f"  {number(w.average, 2)} new requests/s, each kept {number(w.retention_hours, 2)} h "
        f"(retention) + {number(w.ttl_lag_hours, 2)} h (TTL lag)",
        "  record + result + 100 B per-item overhead",
    ]
    cost_rows = [
        (
            "on-demand",
            _dollars(p.on_demand.throughput),
            _dollars(p.on_demand.storage),
            _dollars(p.on_demand.total),
        ),
        (
            f"provisioned ({number(p.provisioned_wcu)} WCU, {number(p.provisioned_rcu)} RCU "
            f"at {w.target_utilization:.0%})",
            _dollars(p.provisioned.throughput),
            _dollars(p.provisioned.storage),
            _dollars(p.provisioned.total),
        ),
    ]
    prices = p.prices
    price_note = (
        f"prices ({'us-east-1, as of ' + prices.as_of if prices.as_of != 'given' else 'given'}): "
        f"${prices.write_request_per_million}/M writes, "
        f"${prices.read_request_per_million}/M reads,\n  ${prices.wcu_hour}/WCU-h, "
        f"${prices.rcu_hour}/RCU-h, ${prices.gb_month}/GB-month"
    )
    if w.average_rps is None:
        price_note += "; on-demand at the peak all month (see --average-rps)"
    parts = [
        head,
        "",
        f"rule of thumb: peak x (1 + duplicate ratio) = {number(p.rule_of_thumb_wcu)} WCU",
        "",
        "per-request model, at peak:",
        table(
            ("request", "DynamoDB call", "per s", "WCU", "RCU"),
            rows,
            align="<<>>>",
            indent="  ",
        ),
        f"  the rule of thumb misses {number(missed)} WCU{share}: it counts one unit per claim",
        f"  and leaves out the completion write ({number(p.lines[1].wcu)} WCU here)",
        "",
        *partitions,
        "",
        *storage,
        "",
        f"monthly cost ({model.HOURS_PER_MONTH} h):",
        table(("mode", "throughput", "storage", "total"), cost_rows, align="<>>>", indent="  "),
        f"  {price_note}",
    ]
    parts += [f"note: {note}" for note in p.notes]
    return "\n".join(parts)
