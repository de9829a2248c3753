"""Every table of the engine's SQLite database, in one place.

Whoever adds a table adds it here, with a comment saying who reads and writes it; the
statements that use it live in that owner's module of this package. ``Storage`` runs the whole
script once per database file at open (:func:`install`; ``IF NOT EXISTS``: opening an existing
file changes nothing) and checks :data:`SCHEMA_VERSION` against the file's.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

__all__ = ["SCHEMA", "SCHEMA_UPGRADES", "SCHEMA_VERSION", "install"]

# A database file written by another schema version is refused rather than misread.
SCHEMA_VERSION = "3"
# Older versions this schema upgrades in place: the script only adds tables (IF NOT EXISTS), so
# opening a version-1 or version-2 file creates them and stamps it 3. An engine of an older
# version then refuses the file rather than writing to tables with indexes it would not maintain
# (version 1) or to tables whose point-in-time history it would not record (version 2).
SCHEMA_UPGRADES = frozenset({"1", "2"})

SCHEMA = """
-- Storage (database.py): the schema version of the file.
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;

-- The catalog (core.py), keyed by (region, table name). AUTOINCREMENT: an id is never reused,
-- so (id, version) names one definition forever (the catalog cache relies on it).
CREATE TABLE IF NOT EXISTS tables (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    region     TEXT NOT NULL,
    name       TEXT NOT NULL,
    version    INTEGER NOT NULL,
    definition TEXT NOT NULL,
    UNIQUE (region, name)
);

-- Items (core.py): one row per item; pk/sk are the order-preserving key encodings (item_keys.py),
-- the body is MessagePack.
CREATE TABLE IF NOT EXISTS items (
    table_id INTEGER NOT NULL,
    pk       BLOB NOT NULL,
    sk       BLOB NOT NULL,
    size     INTEGER NOT NULL,
    body     BLOB NOT NULL,
    PRIMARY KEY (table_id, pk, sk)
) WITHOUT ROWID;

-- TransactWriteItems ClientRequestTokens (core.py), for their 10-minute window.
CREATE TABLE IF NOT EXISTS tokens (
    region       TEXT NOT NULL,
    token        TEXT NOT NULL,
    fingerprint  TEXT NOT NULL,
    completed_at REAL NOT NULL,
    response     BLOB NOT NULL,
    PRIMARY KEY (region, token)
) WITHOUT ROWID;
-- Expired tokens are purged on every transaction: keep that a range delete, not a scan.
CREATE INDEX IF NOT EXISTS tokens_by_completion ON tokens (completed_at);

-- TTL (ttl.py): one row per item whose TTL attribute is a Number, kept in the item's own write
-- transaction, so the sweeper reads due items off an index instead of scanning tables.
-- ttl_backfill holds the scan cursor of a table whose TTL was just enabled (done in chunks).
CREATE TABLE IF NOT EXISTS ttl_expiry (
    table_id INTEGER NOT NULL,
    pk       BLOB NOT NULL,
    sk       BLOB NOT NULL,
    expires  REAL NOT NULL,
    PRIMARY KEY (table_id, pk, sk)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS ttl_expiry_due ON ttl_expiry (expires);
CREATE TABLE IF NOT EXISTS ttl_backfill (
    table_id  INTEGER PRIMARY KEY,
    attribute TEXT NOT NULL,
    after_pk  BLOB,
    after_sk  BLOB
);

-- DynamoDB Streams (streams.py): one row per stream (one shard each), and the records.
-- AUTOINCREMENT makes record sequence numbers monotonic and never reused, across processes.
CREATE TABLE IF NOT EXISTS streams (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    arn             TEXT NOT NULL UNIQUE,
    region          TEXT NOT NULL,
    table_name      TEXT NOT NULL,
    label           TEXT NOT NULL,
    view_type       TEXT NOT NULL,
    shard_id        TEXT NOT NULL,
    key_schema      TEXT NOT NULL,
    created_at      REAL NOT NULL,
    start_seq       INTEGER NOT NULL,
    closed_at       REAL,
    end_seq         INTEGER,
    trimmed_through INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS stream_records (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    stream_id  INTEGER NOT NULL,
    created_at REAL NOT NULL,
    body       BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS stream_records_by_stream ON stream_records (stream_id, seq);
CREATE INDEX IF NOT EXISTS stream_records_by_time ON stream_records (created_at);

-- Global tables (replication.py). replication_queue holds the replication work of a write,
-- recorded in the write's own transaction, so a crash neither loses nor duplicates it: an
-- entry is deleted in the same transaction that applies it to the target replica.
-- item_versions keeps, per item of a replicated table, the (source write time, source region)
-- of the write it shows, for last-writer-wins; a delete keeps its version row as the tombstone.
CREATE TABLE IF NOT EXISTS replication_queue (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    table_name    TEXT NOT NULL,
    source_region TEXT NOT NULL,
    target_region TEXT NOT NULL,
    pk            BLOB NOT NULL,
    sk            BLOB NOT NULL,
    written_at    REAL NOT NULL,  -- the version, for last-writer-wins
    queued_at     REAL NOT NULL,  -- the source's clock at the write: the lag counts from here
    body          BLOB
);
CREATE INDEX IF NOT EXISTS replication_by_target ON replication_queue (target_region, queued_at);
CREATE TABLE IF NOT EXISTS item_versions (
    table_id   INTEGER NOT NULL,
    pk         BLOB NOT NULL,
    sk         BLOB NOT NULL,
    written_at REAL NOT NULL,
    region     TEXT NOT NULL,
    PRIMARY KEY (table_id, pk, sk)
) WITHOUT ROWID;

-- Secondary indexes (indexes.py). index_catalog allocates each index's storage id (never reused,
-- so a re-created index of the same name never sees its predecessor's entries) and records its
-- table. index_items holds one entry per indexed item: the index key (ipk, isk) and the base key
-- (pk, sk), all in the order-preserving key encoding (keys.py), so an index is read exactly like
-- the items table; the body is the projected item. index_backfill holds the scan cursor of an
-- index still being built from its table's items (done in chunks, like ttl_backfill).
CREATE TABLE IF NOT EXISTS index_catalog (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    table_id INTEGER NOT NULL,
    name     TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS index_items (
    index_id INTEGER NOT NULL,
    ipk      BLOB NOT NULL,
    isk      BLOB NOT NULL,
    pk       BLOB NOT NULL,
    sk       BLOB NOT NULL,
    size     INTEGER NOT NULL,
    body     BLOB NOT NULL,
    PRIMARY KEY (index_id, ipk, isk, pk, sk)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS index_backfill (
    index_id INTEGER PRIMARY KEY,
    table_id INTEGER NOT NULL,
    after_pk BLOB,
    after_sk BLOB
);

-- Stale reads (history.py): while a stale-read fault is on, every write to a table in its
-- scope records the item as it was before the write, stamped with the write's time.
CREATE TABLE IF NOT EXISTS item_history (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    table_id      INTEGER NOT NULL,
    pk            BLOB NOT NULL,
    sk            BLOB NOT NULL,
    superseded_at REAL NOT NULL,
    size          INTEGER NOT NULL,
    body          BLOB
);
CREATE INDEX IF NOT EXISTS item_history_by_key ON item_history (table_id, pk, sk, superseded_at);

-- Backups (backups.py). backups holds one row per on-demand backup (USER, or SYSTEM: made when
-- a table with point-in-time recovery is deleted); its description is the BackupDetails and
-- the source table's definition as they were when it was made. backup_items is the backup's
-- copy of the table's items, in the items table's layout.
CREATE TABLE IF NOT EXISTS backups (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    arn         TEXT NOT NULL UNIQUE,
    region      TEXT NOT NULL,
    table_name  TEXT NOT NULL,
    kind        TEXT NOT NULL,
    created_at  REAL NOT NULL,
    expires_at  REAL,
    description TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS backups_by_time ON backups (region, created_at);
CREATE TABLE IF NOT EXISTS backup_items (
    backup_id INTEGER NOT NULL,
    pk        BLOB NOT NULL,
    sk        BLOB NOT NULL,
    size      INTEGER NOT NULL,
    body      BLOB NOT NULL,
    PRIMARY KEY (backup_id, pk, sk)
) WITHOUT ROWID;

-- Point-in-time recovery (backups.py): while it is on for a table, every write to the table
-- records the item as it was before the write (NULL: absent), stamped with the write's time, in
-- the write's own transaction. The table as of instant t is its items now, each key changed
-- since t put back to its first pre-image recorded after t.
CREATE TABLE IF NOT EXISTS pitr_changes (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    table_id   INTEGER NOT NULL,
    pk         BLOB NOT NULL,
    sk         BLOB NOT NULL,
    changed_at REAL NOT NULL,
    size       INTEGER NOT NULL,
    body       BLOB
);
CREATE INDEX IF NOT EXISTS pitr_changes_by_time ON pitr_changes (table_id, changed_at);

-- Exports to and imports from S3 (transfers.py): one row per ExportTableToPointInTime or
-- ImportTable, its description as DescribeExport / DescribeImport show it. A file of an older
-- engine gains the table (no version change: nothing else reads or writes it).
CREATE TABLE IF NOT EXISTS transfers (
    arn          TEXT PRIMARY KEY,
    kind         TEXT NOT NULL,
    region       TEXT NOT NULL,
    table_arn    TEXT NOT NULL,
    client_token TEXT,
    started_at   REAL NOT NULL,
    description  TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS transfers_by_time ON transfers (kind, region, started_at);
"""


def install(conn: sqlite3.Connection, path: str | None) -> None:
    """Create the tables ``conn``'s database lacks and stamp its schema version, in one
    transaction; a file of an older version listed in :data:`SCHEMA_UPGRADES` is upgraded, any
    other version refused with a ``RuntimeError`` naming ``path``."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        for statement in _statements(SCHEMA):
            conn.execute(statement)
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if row is None:
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', ?)", (SCHEMA_VERSION,)
            )
        elif row[0] in SCHEMA_UPGRADES:
            conn.execute(
                "UPDATE meta SET value = ? WHERE key = 'schema_version'", (SCHEMA_VERSION,)
            )
        elif row[0] != SCHEMA_VERSION:
            raise RuntimeError(f"{path}: database schema version {row[0]} is not {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _statements(script: str) -> Iterator[str]:
    """The statements of an SQL script, one by one (a semicolon in a comment ends none)."""
    statement = ""
    for line in script.splitlines(keepends=True):
        statement += line
        if sqlite3.complete_statement(statement):
            yield statement
            statement = ""
    if statement.strip():
        raise ValueError(f"the schema ends in an incomplete statement: {statement!r}")
