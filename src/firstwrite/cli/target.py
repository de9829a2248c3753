"""Where the DynamoDB a command talks to is: the local engine in process, or an endpoint.

``--db PATH`` (the default: the layer's own local database, ``$FIRSTWRITE_LOCAL_DB`` or
``~/.firstwrite/local.db``) opens the engine in this process. ``--endpoint-url URL`` talks to any
DynamoDB endpoint (``firstwrite engine serve``, DynamoDB Local, moto); ``--aws`` to real DynamoDB
with the standard AWS settings (``AWS_REGION``, ``AWS_PROFILE``, ``AWS_ENDPOINT_URL``, the
credential chain). ``--region`` applies to both. Failures become one-line :class:`CLIError` s
(botocore's own are explained by :func:`firstwrite.shared.command_line.explain`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from firstwrite.shared.command_line import CLIError, error_code

DEFAULT_TABLE = "firstwrite-idempotency"
LOCAL_REGION = "us-east-1"
# Used only against an explicit --endpoint-url when no credentials are configured: local
# endpoints accept any credentials, and real AWS would refuse them anyway.
PLACEHOLDER_CREDENTIALS = {"aws_access_key_id": "firstwrite", "aws_secret_access_key": "local"}


@dataclass(frozen=True)
class Target:
    """Plain data (it crosses process boundaries in ``race``); :func:`connect` opens it."""

    db: str | None = None
    endpoint_url: str | None = None
    region: str | None = None
    aws: bool = False

    @property
    def local(self) -> bool:
        return not (self.aws or self.endpoint_url)

    @property
    def db_path(self) -> str:
        from firstwrite.idempotency.local import default_path

        return os.path.abspath(os.path.expanduser(self.db or default_path()))

    def options(self) -> str:
        """The command-line options that select this target again (`` --db PATH``...), each
        with its leading space; empty for the default database."""
        if self.aws:
            return " --aws" + (f" --region {shlex.quote(self.region)}" if self.region else "")
        if self.endpoint_url:
            region = f" --region {shlex.quote(self.region)}" if self.region else ""
            return f" --endpoint-url {shlex.quote(self.endpoint_url)}{region}"
        return f" --db {shlex.quote(self.db)}" if self.db else ""

    def command(self, words: str, table: str) -> str:
        """``firstwrite <words> --table TABLE <target options>``: a command to paste."""
        return f"firstwrite {words} --table {shlex.quote(table)}{self.options()}"

    def describe(self) -> str:
        if self.local:
            return f"the local engine at {self.db_path}"
        if self.endpoint_url:
            return self.endpoint_url
        return f"AWS ({self.region or 'default region'})"


def add_target_args(parser: argparse.ArgumentParser, *, table: bool = True) -> None:
    where = parser.add_argument_group(
        "where DynamoDB is (default: the local engine database, in process)"
    )
    choice = where.add_mutually_exclusive_group()
    choice.add_argument(
        "--db",
        metavar="PATH",
        help="local engine database file, opened in this process (default: "
        "$FIRSTWRITE_LOCAL_DB or ~/.firstwrite/local.db, the layer's zero-config database)",
    )
    choice.add_argument(
        "--endpoint-url",
        metavar="URL",
        help="any DynamoDB endpoint, e.g. http://127.0.0.1:8000 (firstwrite engine serve, "
        "DynamoDB Local, moto); credentials from the AWS settings, placeholders if none",
    )
    choice.add_argument(
        "--aws",
        action="store_true",
        help="real DynamoDB with the standard AWS settings (AWS_REGION, AWS_PROFILE, "
        "AWS_ENDPOINT_URL, the credential chain)",
    )
    where.add_argument(
        "--region",
        help=f"AWS region (the local engine keeps regions apart too; default there: {LOCAL_REGION})",
    )
    if table:
        where.add_argument(
            "--table",
            default=DEFAULT_TABLE,
            help="the idempotency table (default: %(default)s)",
        )


def target_of(args: argparse.Namespace) -> Target:
    return Target(db=args.db, endpoint_url=args.endpoint_url, region=args.region, aws=args.aws)


def _client_config(pool: int, attempts: int) -> Any:
    """The commands' client: ``attempts`` in botocore's standard mode, each within the
    timeouts the layer gives its own clients (:func:`firstwrite.idempotency.sdk_settings` for
    the default budget), so the guards the commands build (race, table, keys) fit their budget."""
    from botocore.config import Config

    from firstwrite.idempotency import IdempotencyConfig, sdk_settings

    timeouts = sdk_settings(IdempotencyConfig().budget)
    return Config(
        connect_timeout=timeouts.get("connect_timeout", 5),
        read_timeout=timeouts.get("read_timeout", 30),
        max_pool_connections=max(10, pool),
        retries={"total_max_attempts": attempts, "mode": "standard"},
    )


def _local_path(target: Target, *, create: bool) -> str:
    from firstwrite.idempotency.local import ENV_VAR

    path = target.db_path
    parent = os.path.dirname(path)
    if target.db is not None:
        hint = ""
    elif os.environ.get(ENV_VAR):
        hint = f" (from ${ENV_VAR}; or pass --db PATH)"
    else:
        hint = " (the default; pass --db PATH)"
    if not os.path.isdir(parent):
        if target.db is not None:
            raise CLIError(f"--db {target.db}: directory {parent} does not exist")
        if not create:
            raise CLIError(f"no local engine database at {path}{hint}")
        os.makedirs(parent, exist_ok=True)
    if os.path.isdir(path):
        raise CLIError(f"--db {target.db or path}: is a directory, not a database file")
    if not create and not os.path.exists(path):
        raise CLIError(f"no local engine database at {path}{hint}")
    return path


@contextlib.contextmanager
def connect(
    target: Target, *, create: bool = False, pool: int = 10, attempts: int = 3
) -> Iterator[Any]:
    """A boto3 DynamoDB client for ``target``. ``create``: a missing local database file may be
    created (commands that only read refuse to create one). ``attempts``: botocore's total."""
    config = _client_config(pool, attempts)
    if not target.local:
        yield remote_client(target, config)
        return
    path = _local_path(target, create=create)
    from firstwrite.engine import Engine, local_client
    from firstwrite.engine.features.ttl import TTLConfig

    try:
        # No TTL sweeper: a command looks at (or races on) the data as it is; deleting
        # expired items is the job of the process that serves it.
        engine = Engine(path, ttl_config=TTLConfig(sweep_interval=None))
    except sqlite3.Error as exc:
        raise CLIError(f"cannot open the local engine database {path}: {exc}") from None
    try:
        yield local_client(engine, region=target.region or LOCAL_REGION, config=config)
    finally:
        engine.close()


def remote_client(target: Target, config: Any) -> Any:
    import boto3

    session = boto3.session.Session()
    kwargs: dict[str, Any] = {"config": config}
    if target.endpoint_url:
        kwargs["endpoint_url"] = target.endpoint_url
        if session.get_credentials() is None:
            kwargs.update(PLACEHOLDER_CREDENTIALS)
    region = target.region or session.region_name
    if region is None:
        if not target.endpoint_url:
            raise CLIError("no AWS region: pass --region or set AWS_REGION")
        region = LOCAL_REGION
    try:
        return session.client("dynamodb", region_name=region, **kwargs)
    except ValueError as exc:  # e.g. a malformed endpoint URL
        raise CLIError(f"--endpoint-url {target.endpoint_url}: {exc}") from None


def describe_table(client: Any, table: str, target: Target) -> dict[str, Any]:
    """DescribeTable's ``Table``; a missing table is a one-line :class:`CLIError`."""
    from botocore.exceptions import ClientError

    try:
        described: dict[str, Any] = client.describe_table(TableName=table)["Table"]
    except ClientError as exc:
        if error_code(exc) == "ResourceNotFoundException":
            raise missing_table(table, target) from None
        raise
    return described


def key_schema(described: dict[str, Any]) -> dict[str, str]:
    """``{"HASH": name, "RANGE": name}`` from a DescribeTable ``Table``."""
    return {k["KeyType"]: k["AttributeName"] for k in described["KeySchema"]}


def missing_table(table: str, target: Target) -> CLIError:
    return CLIError(
        f"table {table!r} does not exist at {target.describe()} "
        f"(create it with `{target.command('table create', table)}`)"
    )
