"""The SQLite schema: the version-1 tables, created whole, and one migration per later version
(index i upgrades a store from v(i+1) to v(i+2)). Every journal-like table is append-only,
enforced by triggers."""

from __future__ import annotations

SCHEMA_V1 = """
CREATE TABLE IF NOT EXISTS daybook_runs (
    run_id TEXT PRIMARY KEY,
    workflow TEXT NOT NULL,
    ref TEXT NOT NULL,
    status TEXT NOT NULL,
    input TEXT,
    result TEXT,
    error TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    lease_owner TEXT,
    lease_expires REAL,
    schema_version INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS daybook_runs_status ON daybook_runs (status, updated_at);
CREATE TABLE IF NOT EXISTS daybook_events (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    step INTEGER,
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    key TEXT,
    status TEXT,
    attempt INTEGER NOT NULL,
    fp TEXT,
    data TEXT NOT NULL,
    at REAL NOT NULL,
    parent TEXT,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE UNIQUE INDEX IF NOT EXISTS daybook_events_key ON daybook_events (key)
    WHERE kind = 'intent';
CREATE TRIGGER IF NOT EXISTS daybook_events_no_update BEFORE UPDATE ON daybook_events
BEGIN SELECT RAISE(ABORT, 'daybook journal is append-only: rows are never updated'); END;
CREATE TRIGGER IF NOT EXISTS daybook_events_no_delete BEFORE DELETE ON daybook_events
BEGIN SELECT RAISE(ABORT, 'daybook journal is append-only: rows are never deleted'); END;
"""

# Index i upgrades a store from schema v(i+1) to v(i+2); v1 is created whole, then upgraded.
MIGRATIONS: list[str] = [
    # v2: workers find runnable runs (pending, or running with a lapsed lease) oldest first.
    """CREATE INDEX IF NOT EXISTS daybook_runs_runnable ON daybook_runs (created_at)
        WHERE status IN ('pending', 'running');""",
    # v3: durable waits. Suspended runs wake at `wake_at`; signals wait in an append-only inbox.
    """ALTER TABLE daybook_runs ADD COLUMN wake_at REAL;
    CREATE INDEX IF NOT EXISTS daybook_runs_waking ON daybook_runs (wake_at)
        WHERE status = 'suspended';
    CREATE TABLE IF NOT EXISTS daybook_inbox (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL,
        name TEXT NOT NULL,
        payload TEXT NOT NULL,
        sender TEXT NOT NULL,
        at REAL NOT NULL
    );
    CREATE INDEX IF NOT EXISTS daybook_inbox_run ON daybook_inbox (run_id, id);
    CREATE TRIGGER IF NOT EXISTS daybook_inbox_no_update BEFORE UPDATE ON daybook_inbox
    BEGIN SELECT RAISE(ABORT, 'daybook inbox is append-only'); END;""",
    # v4: approvers, each with the hash of a secret token, for approval gates.
    """CREATE TABLE IF NOT EXISTS daybook_approvers (
        name TEXT PRIMARY KEY,
        token_hash TEXT NOT NULL,
        created_at REAL NOT NULL
    );""",
    # v5: coordination entities. One row per shared resource holds its lease; the log of every
    # claim, release and record is append-only, like the journal.
    """CREATE TABLE IF NOT EXISTS daybook_entities (
        name TEXT PRIMARY KEY,
        holder TEXT,
        deadline REAL,
        updated_at REAL NOT NULL
    );
    CREATE TABLE IF NOT EXISTS daybook_entity_log (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        name TEXT NOT NULL,
        at REAL NOT NULL,
        agent TEXT NOT NULL,
        action TEXT NOT NULL,
        data TEXT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS daybook_entity_log_name ON daybook_entity_log (name, id);
    CREATE TRIGGER IF NOT EXISTS daybook_entity_log_no_update BEFORE UPDATE ON daybook_entity_log
    BEGIN SELECT RAISE(ABORT, 'daybook entity log is append-only: rows are never updated'); END;
    CREATE TRIGGER IF NOT EXISTS daybook_entity_log_no_delete BEFORE DELETE ON daybook_entity_log
    BEGIN SELECT RAISE(ABORT, 'daybook entity log is append-only: rows are never deleted'); END;""",
    # v6: runs remember the code version they started on, so workers can be pinned to one.
    """ALTER TABLE daybook_runs ADD COLUMN code_version TEXT;""",
    # v7: multi-record transactions: staged writes, the visible records, one audit row per commit.
    """CREATE TABLE IF NOT EXISTS daybook_staging (
        txid TEXT NOT NULL, collection TEXT NOT NULL, record_id TEXT NOT NULL,
        data TEXT NOT NULL, at REAL NOT NULL, PRIMARY KEY (txid, collection, record_id));
    CREATE TABLE IF NOT EXISTS daybook_records (
        collection TEXT NOT NULL, record_id TEXT NOT NULL, data TEXT NOT NULL,
        commit_id TEXT NOT NULL, PRIMARY KEY (collection, record_id));
    CREATE TABLE IF NOT EXISTS daybook_commits (
        commit_id TEXT PRIMARY KEY, key TEXT UNIQUE, message TEXT NOT NULL, author TEXT NOT NULL,
        at REAL NOT NULL, records TEXT NOT NULL);
    CREATE TRIGGER IF NOT EXISTS daybook_commits_no_update BEFORE UPDATE ON daybook_commits
    BEGIN SELECT RAISE(ABORT, 'daybook commits are append-only'); END;""",
]
