"""Exports and imports (``operations/exports.py``, ``operations/imports.py``): their records.

A record is the export's or import's description (DescribeExport's ExportDescription,
DescribeImport's ImportTableDescription) under its ARN, with what ListExports / ListImports and
the ClientToken check look it up by.
"""

from __future__ import annotations

import json
from typing import Any

from .base import Statements

__all__ = ["TransferReads", "TransferWrites"]


class TransferReads(Statements):
    def transfer(self, arn: str) -> dict[str, Any] | None:
        """The description stored under ``arn``, or ``None``."""
        row = self._conn.execute(
            "SELECT description FROM transfers WHERE arn = ?", (arn,)
        ).fetchone()
        return None if row is None else dict(json.loads(row[0]))

    def transfers(
        self,
        kind: str,
        region: str,
        *,
        table_arn: str | None = None,
        client_token: str | None = None,
    ) -> list[dict[str, Any]]:
        """The descriptions of ``kind`` ("export" or "import") in ``region``, oldest first,
        of one table or with one ClientToken when given."""
        sql = "SELECT description FROM transfers WHERE kind = ? AND region = ?"
        args: list[Any] = [kind, region]
        if table_arn is not None:
            sql += " AND table_arn = ?"
            args.append(table_arn)
        if client_token is not None:
            sql += " AND client_token = ?"
            args.append(client_token)
        rows = self._conn.execute(sql + " ORDER BY started_at, arn", args).fetchall()
        return [dict(json.loads(row[0])) for row in rows]


class TransferWrites(Statements):
    def transfer_put(
        self,
        arn: str,
        kind: str,
        region: str,
        table_arn: str,
        client_token: str | None,
        started_at: float,
        description: dict[str, Any],
    ) -> None:
        """Store (or replace) the record of ``arn``."""
        self._conn.execute(
            "INSERT OR REPLACE INTO transfers "
            "(arn, kind, region, table_arn, client_token, started_at, description) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (arn, kind, region, table_arn, client_token, started_at, json.dumps(description)),
        )
