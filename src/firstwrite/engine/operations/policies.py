"""Resource-based policies: Put-, Get- and DeleteResourcePolicy, and their evaluation.

They are evaluated for a signed caller.

A policy belongs to a table or to its current stream (by ARN) and lives in the table
definition (``_policies``: ARN -> ``{"Policy", "RevisionId"}``, private: DescribeTable does not
show it). Its RevisionId is the engine clock's milliseconds when it was put, always greater
than the one it replaces; putting the same document again changes nothing and returns the same
RevisionId, and ``ExpectedRevisionId`` (``NO_POLICY``: none may exist yet) makes a put or a
delete conditional, failing with PolicyNotFoundException, as the API reference says.

Evaluation (:func:`check_access`) runs for calls that carry a caller: the access key of a
request the server verified (``firstwrite engine serve --require-auth KEY:SECRET``). A key is
the IAM user ``arn:aws:iam::<account>:user/<KEY>`` of the engine's account, with every
identity-based permission; so, as in IAM's evaluation logic, a resource policy can only take
access away: a statement with ``Effect: Deny`` whose Principal, Action and Resource match the
call refuses it with AccessDeniedException, and Allow statements add nothing. Statements with a
``Condition`` are kept but not evaluated (the engine has none of the request context their keys
name). In-process calls carry no caller and are never refused: the way back from a lockout.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator, Mapping
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from ..errors import DynamoDBError, validation
from ..storage import Reader, TableRow, Writer
from ..validation import F, check

if TYPE_CHECKING:
    from ..context import Context

MAX_POLICY_BYTES = 20 * 1024  # the API reference: 20 KB, white space counted
NO_POLICY = "NO_POLICY"

_RESOURCE_ARN = re.compile(
    r"arn:aws[a-z-]*:dynamodb:(?P<region>[a-z0-9-]+):(?P<account>\d{12}):"
    r"table/(?P<table>[a-zA-Z0-9_.-]{3,255})(?P<stream>/stream/[^/]+)?\Z"
)
_ARN = F("ResourceArn", required=True, min_len=1, max_len=1283)
_REVISION = F("ExpectedRevisionId", min_len=1, max_len=255)
_PUT = (
    _ARN,
    F("Policy", required=True),
    _REVISION,
    F("ConfirmRemoveSelfResourceAccess", kind="bool"),
)
_GET = (_ARN,)
_DELETE = (_ARN, _REVISION)


def _not_found(arn: str) -> DynamoDBError:
    return DynamoDBError(
        "PolicyNotFoundException",
        f"Resource-based policy not found for the provided ResourceArn: {arn}",
    )


def _resource(ctx: Context, reader: Reader, arn: str) -> TableRow:
    """The table ``arn`` names (a table's ARN, or its current stream's), or
    ResourceNotFoundException (the tagging operations' words for an ARN)."""
    match = _RESOURCE_ARN.match(arn)
    if match is None:
        if not arn.startswith("arn:"):
            raise validation(
                f"One or more parameter values were invalid: ARNs must start with 'arn:': {arn}"
            )
        raise validation(f"Invalid ResourceArn provided as input {arn}")
    row = None
    if match["region"] == ctx.region and match["account"] == ctx.engine.account_id:
        row = reader.table(ctx.region, match["table"])
    if row is not None and match["stream"] and row.definition.get("LatestStreamArn") != arn:
        row = None
    if row is None:
        raise DynamoDBError(
            "ResourceNotFoundException",
            f"Requested resource not found: ResourcArn: {arn} not found",
        )
    return row


def policy_statements(document: str) -> list[dict[str, Any]]:
    """The statements of a policy document, after the checks that make it one."""
    if len(document.encode("utf-8")) > MAX_POLICY_BYTES:
        raise validation(
            f"Resource-based policy size exceeds the limit of {MAX_POLICY_BYTES} bytes"
        )
    try:
        policy = json.loads(document)
    except ValueError:
        raise validation("Invalid policy document: the policy is not valid JSON") from None
    statements = policy.get("Statement") if isinstance(policy, dict) else None
    if isinstance(statements, dict):
        statements = [statements]
    if not isinstance(statements, list) or not statements:
        raise validation("Invalid policy document: a policy needs a Statement")
    for statement in statements:
        if not isinstance(statement, dict) or statement.get("Effect") not in ("Allow", "Deny"):
            raise validation("Invalid policy document: each Statement's Effect is Allow or Deny")
        if "Principal" not in statement and "NotPrincipal" not in statement:
            raise validation("Invalid policy document: a resource-based policy names a Principal")
        actions = statement.get("Action", statement.get("NotAction"))
        if actions is None:
            raise validation("Invalid policy document: each Statement names an Action")
        for action in _listed(actions):
            if action != "*" and not action.lower().startswith("dynamodb:"):
                raise validation(
                    f"Invalid policy document: Action {action} is not a DynamoDB action"
                )
    return statements


def _listed(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else [str(v) for v in value or ()]


def put_resource_policy(ctx: Context) -> dict[str, Any]:
    params = ctx.params
    check(params, _PUT)
    arn, document = params["ResourceArn"], params["Policy"]
    statements = policy_statements(document)
    expected = params.get("ExpectedRevisionId")
    confirmed = params.get("ConfirmRemoveSelfResourceAccess")
    locks_out = ctx.caller is not None and not confirmed
    if locks_out and _denied(ctx, statements, "PutResourcePolicy", arn) is not None:
        raise validation(
            "The policy denies the caller dynamodb:PutResourcePolicy on this resource: "
            "set ConfirmRemoveSelfResourceAccess to true to confirm"
        )

    def write(w: Writer) -> str:
        row = _resource(ctx, w, arn)
        policies = dict(row.definition.get("_policies") or {})
        current = policies.get(arn)
        _expect(arn, current, expected)
        if current is not None and current["Policy"] == document:
            return str(current["RevisionId"])  # the same document: the same revision
        revision = new_revision(ctx, current)
        policies[arn] = {"Policy": document, "RevisionId": revision}
        definition = copy.deepcopy(row.definition)
        definition["_policies"] = policies
        w.update_table(row, definition)
        return revision

    return {"RevisionId": ctx.storage.write(write)}


def new_revision(ctx: Context, current: Mapping[str, Any] | None) -> str:
    """A RevisionId: the engine clock's milliseconds, past the one it replaces."""
    revision = int(ctx.now() * 1000)
    if current is not None:
        revision = max(revision, int(current["RevisionId"]) + 1)
    return str(revision)


def _expect(arn: str, current: Mapping[str, Any] | None, expected: str | None) -> None:
    if expected is None:
        return
    if expected == NO_POLICY:
        if current is not None:
            raise DynamoDBError(
                "PolicyNotFoundException",
                f"A resource-based policy already exists for the provided ResourceArn: {arn} "
                f"(RevisionId {current['RevisionId']}), but {NO_POLICY} was expected",
            )
        return
    if current is None:
        raise _not_found(arn)
    if current["RevisionId"] != expected:
        raise DynamoDBError(
            "PolicyNotFoundException",
            f"Resource-based policy not found for the provided ResourceArn and RevisionId: "
            f"{arn}, {expected} (the current RevisionId is {current['RevisionId']})",
        )


def get_resource_policy(ctx: Context) -> dict[str, Any]:
    params = ctx.params
    check(params, _GET)
    arn = params["ResourceArn"]
    row = ctx.storage.read(lambda r: _resource(ctx, r, arn))
    current = (row.definition.get("_policies") or {}).get(arn)
    if current is None:
        raise _not_found(arn)
    return {"Policy": current["Policy"], "RevisionId": current["RevisionId"]}


def delete_resource_policy(ctx: Context) -> dict[str, Any]:
    params = ctx.params
    check(params, _DELETE)
    arn = params["ResourceArn"]
    expected = params.get("ExpectedRevisionId")

    def write(w: Writer) -> str:
        row = _resource(ctx, w, arn)
        policies = dict(row.definition.get("_policies") or {})
        current = policies.get(arn)
        if current is None:
            raise _not_found(arn)
        _expect(arn, current, expected)
        del policies[arn]
        definition = copy.deepcopy(row.definition)
        definition["_policies"] = policies
        w.update_table(row, definition)
        return str(current["RevisionId"])

    return {"RevisionId": ctx.storage.write(write)}


# --- evaluation ---------------------------------------------------------------------------


def caller_arn(ctx: Context) -> str:
    """The IAM principal a signed caller's access key stands for."""
    return f"arn:aws:iam::{ctx.engine.account_id}:user/{ctx.caller}"


def check_access(ctx: Context) -> None:
    """Refuse the call when a resource policy of a table (or stream) it names denies the
    caller this operation on that resource (see the module docstring for the model)."""
    if ctx.caller is None:
        return
    for row, resource, action in _resources(ctx):
        policies = row.definition.get("_policies")
        if not policies:
            continue
        for arn, policy in policies.items():
            # A table's policy covers the table and its indexes; a stream has its own.
            covered = resource == arn or (
                "/stream/" not in arn and resource.startswith(arn + "/index/")
            )
            if covered:
                _refuse_if_denied(ctx, policy_statements(policy["Policy"]), action, resource)


def _refuse_if_denied(
    ctx: Context, statements: list[dict[str, Any]], action: str, resource: str
) -> None:
    denied = _denied(ctx, statements, action, resource)
    if denied is not None:
        raise DynamoDBError(
            "AccessDeniedException",
            f"User: {caller_arn(ctx)} is not authorized to perform: dynamodb:{action} "
            f"on resource: {resource} with an explicit deny in a resource-based policy",
        )


def _denied(
    ctx: Context, statements: list[dict[str, Any]], operation: str, resource: str
) -> dict[str, Any] | None:
    """The first Deny statement matching the caller, ``dynamodb:<operation>`` and
    ``resource`` (statements with a Condition are not evaluated)."""
    for statement in statements:
        if statement["Effect"] != "Deny" or "Condition" in statement:
            continue
        if (
            _principal_matches(ctx, statement)
            and _matches(statement, "Action", f"dynamodb:{operation}", fold=True)
            and _matches(statement, "Resource", resource, fold=False)
        ):
            return statement
    return None


def _principal_matches(ctx: Context, statement: Mapping[str, Any]) -> bool:
    account = ctx.engine.account_id
    names = {"*", account, f"arn:aws:iam::{account}:root", caller_arn(ctx)}
    for member, negated in (("Principal", False), ("NotPrincipal", True)):
        if member not in statement:
            continue
        value = statement[member]
        given = value if isinstance(value, str) else (value or {}).get("AWS", [])
        found = any(p in names for p in _listed(given))
        return found != negated
    return False


def _matches(statement: Mapping[str, Any], member: str, value: str, *, fold: bool) -> bool:
    """Whether ``value`` matches the statement's ``member`` (or misses its ``Not`` twin);
    an absent Resource means the resource the policy is on."""
    for name, negated in ((member, False), (f"Not{member}", True)):
        if name not in statement:
            continue
        found = any(
            fnmatchcase(value.lower() if fold else value, p.lower() if fold else p)
            for p in _listed(statement[name])
        )
        return found != negated
    return member == "Resource"


# The IAM action of each transaction action (a transaction is authorized action by action).
_TRANSACT_ACTIONS = {
    "Get": "GetItem",
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
}


def _resources(ctx: Context) -> Iterator[tuple[TableRow, str, str]]:
    """The tables a call names, each with the ARN of what it touches there (the table, one
    of its indexes, its stream) and the IAM action (``dynamodb:`` less) it takes there."""
    params = ctx.params or {}
    operation = ctx.operation
    names: list[tuple[str, str | None, str]] = []
    table = params.get("TableName")
    if isinstance(table, str):
        index = params.get("IndexName")
        names.append((table, index if isinstance(index, str) else None, operation))
    items = params.get("RequestItems")
    if isinstance(items, Mapping):
        names.extend((name, None, operation) for name in items if isinstance(name, str))
    for entry in params.get("TransactItems") or ():
        for kind, body in entry.items() if isinstance(entry, Mapping) else ():
            if isinstance(body, Mapping) and isinstance(body.get("TableName"), str):
                names.append((body["TableName"], None, _TRANSACT_ACTIONS.get(kind, operation)))
    cached = ctx.engine.storage.cached_table
    for name, index, action in names:
        row = cached(ctx.region, name.rsplit("/", 1)[-1])
        if row is not None:
            arn = str(row.definition["TableArn"])
            yield row, arn if index is None else f"{arn}/index/{index}", action
    for member in ("ResourceArn", "StreamArn"):
        named = params.get(member)
        match = _RESOURCE_ARN.match(named) if isinstance(named, str) else None
        if match is not None and match["region"] == ctx.region:
            row = cached(ctx.region, match["table"])
            if row is not None:
                yield row, match.group(0), operation
