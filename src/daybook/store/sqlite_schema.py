"""The SQLite schema: the version-1 tables, created whole, and one migration per later version
(index i upgrades a store from v(i+1) to v(i+2)). Every journal-like table is append-only,
enforced by triggers. Also how a store file is opened: read-write (created and upgraded when its
stamp is older than the code's, under the write lock only then) or read-only (a `mode=ro`
connection that never creates, migrates or writes)."""

from __future__ import annotations

import os
import sqlite3
from urllib.parse import quote

from ..errors import ConfigError, StoreUnavailable
from ..records import SCHEMA_VERSION
from .rows import check_version, parse_stamp

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
    # v4: approvers, each with the hash of a secret token, for approval gates. No longer read or
    # written: approvers' public keys live in the approvers file, outside the store (gates.roster);
    # the table stays for old stores (owner-only in the README's role recipe).
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
    # v8: append-only on every path. REPLACE (INSERT OR REPLACE) deletes the row it collides
    # with without firing delete triggers, so an insert that would collide is refused first;
    # inbox and commit rows are never deleted either. (Staging is not append-only: commits and
    # sweeps delete from it.)
    """CREATE TRIGGER IF NOT EXISTS daybook_events_no_replace BEFORE INSERT ON daybook_events
    WHEN EXISTS (SELECT 1 FROM daybook_events WHERE run_id = NEW.run_id AND seq = NEW.seq)
    BEGIN SELECT RAISE(ABORT, 'daybook journal is append-only: rows are never replaced'); END;
    CREATE TRIGGER IF NOT EXISTS daybook_inbox_no_replace BEFORE INSERT ON daybook_inbox
    WHEN EXISTS (SELECT 1 FROM daybook_inbox WHERE id = NEW.id)
    BEGIN SELECT RAISE(ABORT, 'daybook inbox is append-only: rows are never replaced'); END;
    CREATE TRIGGER IF NOT EXISTS daybook_inbox_no_delete BEFORE DELETE ON daybook_inbox
    BEGIN SELECT RAISE(ABORT, 'daybook inbox is append-only: rows are never deleted'); END;
    CREATE TRIGGER IF NOT EXISTS daybook_entity_log_no_replace BEFORE INSERT ON daybook_entity_log
    WHEN EXISTS (SELECT 1 FROM daybook_entity_log WHERE id = NEW.id)
    BEGIN SELECT RAISE(ABORT, 'daybook entity log is append-only: rows are never replaced'); END;
    CREATE TRIGGER IF NOT EXISTS daybook_commits_no_replace BEFORE INSERT ON daybook_commits
    WHEN EXISTS (SELECT 1 FROM daybook_commits WHERE commit_id = NEW.commit_id OR key = NEW.key)
    BEGIN SELECT RAISE(ABORT, 'daybook commit log is append-only: rows are never replaced'); END;
    CREATE TRIGGER IF NOT EXISTS daybook_commits_no_delete BEFORE DELETE ON daybook_commits
    BEGIN SELECT RAISE(ABORT, 'daybook commit log is append-only: rows are never deleted'); END;""",
    # v9: retention (store/retention.py). An append-only gc log; a journal row's data may change
    # only to an erasure mark, of a finished run, once the gc log holds a row for that run.
    """CREATE TABLE IF NOT EXISTS daybook_gc (
        id INTEGER PRIMARY KEY AUTOINCREMENT, gc_id TEXT NOT NULL, run_id TEXT, who TEXT NOT NULL,
        at REAL NOT NULL, cutoff REAL NOT NULL, runs INTEGER NOT NULL, rows INTEGER NOT NULL);
    CREATE INDEX IF NOT EXISTS daybook_gc_run ON daybook_gc (run_id);
    CREATE TRIGGER IF NOT EXISTS daybook_gc_no_update BEFORE UPDATE ON daybook_gc
    BEGIN SELECT RAISE(ABORT, 'daybook gc log is append-only: rows are never updated'); END;
    CREATE TRIGGER IF NOT EXISTS daybook_gc_no_delete BEFORE DELETE ON daybook_gc
    BEGIN SELECT RAISE(ABORT, 'daybook gc log is append-only: rows are never deleted'); END;
    DROP TRIGGER IF EXISTS daybook_events_no_update;
    CREATE TRIGGER IF NOT EXISTS daybook_events_no_update BEFORE UPDATE ON daybook_events
    WHEN NOT (NEW.data LIKE '{"$erased":%' AND NEW.run_id = OLD.run_id AND NEW.seq = OLD.seq
        AND NEW.step IS OLD.step AND NEW.kind = OLD.kind AND NEW.name = OLD.name
        AND NEW.key IS OLD.key AND NEW.status IS OLD.status AND NEW.attempt = OLD.attempt
        AND NEW.fp IS OLD.fp AND NEW.at = OLD.at AND NEW.parent IS OLD.parent
        AND EXISTS (SELECT 1 FROM daybook_gc g WHERE g.run_id = OLD.run_id)
        AND EXISTS (SELECT 1 FROM daybook_runs r WHERE r.run_id = OLD.run_id
            AND r.status IN ('completed', 'failed', 'cancelled', 'expired')))
    BEGIN SELECT RAISE(ABORT, 'daybook journal is append-only: rows are never updated'); END;""",
    # v10: Atomix transactions. One counter row allocates epochs in a total order; one header per
    # transaction attempt (a mutable header like daybook_runs: only status and updated_at change,
    # and a terminal status never changes again); each change is journaled with it.
    """CREATE TABLE IF NOT EXISTS daybook_epochs (
        id INTEGER PRIMARY KEY CHECK (id = 1), last INTEGER NOT NULL);
    INSERT INTO daybook_epochs (id, last) SELECT 1, 0 WHERE NOT EXISTS (SELECT 1 FROM daybook_epochs);
    CREATE TABLE IF NOT EXISTS daybook_transactions (
        tx_id TEXT PRIMARY KEY, run_id TEXT NOT NULL, epoch INTEGER NOT NULL UNIQUE,
        scopes TEXT NOT NULL, status TEXT NOT NULL, attempt INTEGER NOT NULL,
        retries INTEGER NOT NULL, created_at REAL NOT NULL, updated_at REAL NOT NULL);
    CREATE INDEX IF NOT EXISTS daybook_transactions_open ON daybook_transactions (epoch)
        WHERE status IN ('open', 'committing', 'aborting');
    CREATE INDEX IF NOT EXISTS daybook_transactions_run ON daybook_transactions (run_id, epoch);
    CREATE TRIGGER IF NOT EXISTS daybook_transactions_settled BEFORE UPDATE ON daybook_transactions
    WHEN OLD.status IN ('committed', 'aborted', 'stuck') OR NEW.epoch != OLD.epoch
        OR NEW.scopes != OLD.scopes OR NEW.tx_id != OLD.tx_id
    BEGIN SELECT RAISE(ABORT, 'daybook transaction headers change only their status, until it is final'); END;
    CREATE TRIGGER IF NOT EXISTS daybook_transactions_no_delete BEFORE DELETE ON daybook_transactions
    BEGIN SELECT RAISE(ABORT, 'daybook transaction headers are never deleted'); END;""",
    # v11: queues, schedules and run search (daybook.dispatch). A run may wait in a queue (with a
    # priority and a partition key) and belong to a parent run; `dequeued_at` is when a worker
    # first took it from its queue (rate limits count these). Queue and schedule settings are
    # declared in code and kept here so every process agrees; search attributes are an index
    # over the journal rows that set them.
    """ALTER TABLE daybook_runs ADD COLUMN queue TEXT;
    ALTER TABLE daybook_runs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE daybook_runs ADD COLUMN partition_key TEXT;
    ALTER TABLE daybook_runs ADD COLUMN dequeued_at REAL;
    ALTER TABLE daybook_runs ADD COLUMN parent_run TEXT;
    CREATE INDEX IF NOT EXISTS daybook_runs_queued ON daybook_runs (queue, priority, created_at)
        WHERE queue IS NOT NULL AND status IN ('pending', 'running', 'suspended');
    CREATE INDEX IF NOT EXISTS daybook_runs_dequeued ON daybook_runs (queue, dequeued_at)
        WHERE queue IS NOT NULL;
    CREATE INDEX IF NOT EXISTS daybook_runs_leased ON daybook_runs (queue, lease_expires)
        WHERE queue IS NOT NULL AND lease_owner IS NOT NULL;
    CREATE INDEX IF NOT EXISTS daybook_runs_partition ON daybook_runs (queue, partition_key)
        WHERE partition_key IS NOT NULL AND status NOT IN ('completed', 'failed', 'cancelled', 'expired');
    CREATE INDEX IF NOT EXISTS daybook_runs_created ON daybook_runs (created_at, run_id);
    CREATE INDEX IF NOT EXISTS daybook_runs_workflow ON daybook_runs (workflow, created_at);
    CREATE INDEX IF NOT EXISTS daybook_runs_parent ON daybook_runs (parent_run)
        WHERE parent_run IS NOT NULL;
    CREATE TABLE IF NOT EXISTS daybook_queues (
        name TEXT PRIMARY KEY, concurrency INTEGER, per_worker INTEGER, rate_limit INTEGER,
        rate_period REAL, updated_at REAL NOT NULL);
    CREATE TABLE IF NOT EXISTS daybook_schedules (
        name TEXT PRIMARY KEY, workflow TEXT NOT NULL, ref TEXT NOT NULL, cron TEXT NOT NULL,
        input TEXT NOT NULL, queue TEXT, catchup TEXT NOT NULL, grace REAL NOT NULL,
        paused INTEGER NOT NULL DEFAULT 0, last_fired REAL NOT NULL, created_at REAL NOT NULL,
        updated_at REAL NOT NULL);
    CREATE TABLE IF NOT EXISTS daybook_attributes (
        run_id TEXT NOT NULL, name TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (run_id, name));
    CREATE INDEX IF NOT EXISTS daybook_attributes_value ON daybook_attributes (name, value);""",
    # v12: the `tx_left` journal row (a run left an open transaction on purpose). No DDL here:
    # the version tells an older daybook that the journal may hold a kind it does not know.
    # (PostgreSQL also gets its NOTIFY trigger; on SQLite waiters poll.)
    "",
    # v13: durable streams (`ctx.stream`, store/chunks.py): chunks keyed by (run, stream, act, n),
    # at most one divergent re-send beside each; `pos` is the reader's cursor. Append-only, but
    # for gc's erasure of a finished run's payloads (as the journal, v9).
    """CREATE TABLE IF NOT EXISTS daybook_chunks (
        run_id TEXT NOT NULL, pos INTEGER NOT NULL, stream TEXT NOT NULL, act TEXT NOT NULL,
        n INTEGER NOT NULL, divergent INTEGER NOT NULL, data TEXT NOT NULL, at REAL NOT NULL,
        PRIMARY KEY (run_id, pos)) WITHOUT ROWID;
    CREATE UNIQUE INDEX IF NOT EXISTS daybook_chunks_key
        ON daybook_chunks (run_id, stream, act, n, divergent);
    CREATE TRIGGER IF NOT EXISTS daybook_chunks_no_update BEFORE UPDATE ON daybook_chunks
    WHEN NOT (NEW.data LIKE '{"$erased":%' AND NEW.run_id = OLD.run_id AND NEW.pos = OLD.pos
        AND NEW.stream = OLD.stream AND NEW.act = OLD.act AND NEW.n = OLD.n
        AND NEW.divergent = OLD.divergent AND NEW.at = OLD.at
        AND EXISTS (SELECT 1 FROM daybook_gc g WHERE g.run_id = OLD.run_id)
        AND EXISTS (SELECT 1 FROM daybook_runs r WHERE r.run_id = OLD.run_id
            AND r.status IN ('completed', 'failed', 'cancelled', 'expired')))
    BEGIN SELECT RAISE(ABORT, 'daybook stream chunks are append-only: rows are never updated'); END;
    CREATE TRIGGER IF NOT EXISTS daybook_chunks_no_delete BEFORE DELETE ON daybook_chunks
    BEGIN SELECT RAISE(ABORT, 'daybook stream chunks are append-only: rows are never deleted'); END;
    CREATE TRIGGER IF NOT EXISTS daybook_chunks_no_replace BEFORE INSERT ON daybook_chunks
    WHEN EXISTS (SELECT 1 FROM daybook_chunks WHERE run_id = NEW.run_id AND pos = NEW.pos)
    BEGIN SELECT RAISE(ABORT, 'daybook stream chunks are append-only: rows are never replaced'); END;""",
    # v14: the `run_replayed` journal row kind (an execution's replayed model calls, for the
    # cost ledger). No DDL: the version tells an older daybook the journal may hold it.
    "",
    # v15: gc erases approval requests (store/erasure.py). An entity log row may change only if
    # it is an outbox entry's `request`, only to an erasure mark naming the run that owns the
    # entry, once the gc log holds a row for that run and the run is finished. A mark without
    # a run (NULL) is refused too: NOT COALESCE(NULL, 0).
    """DROP TRIGGER IF EXISTS daybook_entity_log_no_update;
    CREATE TRIGGER IF NOT EXISTS daybook_entity_log_no_update BEFORE UPDATE ON daybook_entity_log
    WHEN NOT COALESCE((NEW.data LIKE '{"$erased":%' AND json_valid(NEW.data)
        AND NEW.id = OLD.id AND NEW.name = OLD.name AND NEW.at = OLD.at AND NEW.agent = OLD.agent
        AND NEW.action = OLD.action AND OLD.action = 'request'
        AND substr(OLD.name, 1, length(json_extract(NEW.data, '$.run_id')) + 16)
            = 'daybook.outbox/' || json_extract(NEW.data, '$.run_id') || '/'
        AND EXISTS (SELECT 1 FROM daybook_gc g WHERE g.run_id = json_extract(NEW.data, '$.run_id'))
        AND EXISTS (SELECT 1 FROM daybook_runs r WHERE r.run_id = json_extract(NEW.data, '$.run_id')
            AND r.status IN ('completed', 'failed', 'cancelled', 'expired'))), 0)
    BEGIN SELECT RAISE(ABORT, 'daybook entity log is append-only: rows are never updated'); END;""",
    # v16: REPLACE through a second unique index. An intent that takes an existing intent's key
    # under a new seq, or a chunk that takes an existing chunk's key under a new position, made
    # REPLACE delete the older row: v8 looked at the primary key only. The journal's trigger is
    # one program run per row (two triggers cost two), its seq refusal first;
    # the key refusal names the index as SQLite's own would, so a daybook insert refused on a
    # taken key is still told from one refused on a taken seq (`SQLiteDialect.conflict`).
    """DROP TRIGGER IF EXISTS daybook_events_no_replace;
    CREATE TRIGGER IF NOT EXISTS daybook_events_no_replace BEFORE INSERT ON daybook_events
    BEGIN
    SELECT RAISE(ABORT, 'daybook journal is append-only: rows are never replaced')
        WHERE EXISTS (SELECT 1 FROM daybook_events WHERE run_id = NEW.run_id AND seq = NEW.seq);
    SELECT RAISE(ABORT, 'daybook journal is append-only: rows are never replaced (daybook_events.key)')
        WHERE NEW.kind = 'intent'
        AND EXISTS (SELECT 1 FROM daybook_events WHERE key = NEW.key AND kind = 'intent');
    END;
    CREATE TRIGGER IF NOT EXISTS daybook_chunks_no_replace_key BEFORE INSERT ON daybook_chunks
    WHEN EXISTS (SELECT 1 FROM daybook_chunks WHERE run_id = NEW.run_id AND stream = NEW.stream
        AND act = NEW.act AND n = NEW.n AND divergent = NEW.divergent)
    BEGIN SELECT RAISE(ABORT, 'daybook stream chunks are append-only: rows are never replaced'); END;""",
]


def stamp(db: sqlite3.Connection, url: str) -> int | None:
    """The store's schema version; None if the file holds no daybook store at all."""
    if db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'daybook_meta'").fetchone():
        row = db.execute("SELECT value FROM daybook_meta WHERE key = 'schema_version'").fetchone()
        return parse_stamp(row[0], url) if row else 0
    return None


def migrate(db: sqlite3.Connection, url: str) -> None:
    """Create or upgrade the store to SCHEMA_VERSION. A current store is only read: the write
    lock is taken (and the stamp read again under it) only when there is something to do."""
    found = stamp(db, url)
    if found is not None:
        check_version(found, SCHEMA_VERSION, url)
        if found == SCHEMA_VERSION:
            return
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute("CREATE TABLE IF NOT EXISTS daybook_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        found = stamp(db, url) or 0
        check_version(found, SCHEMA_VERSION, url)
        if found == 0:
            for stmt in statements(SCHEMA_V1):
                db.execute(stmt)
            found = 1
        for i in range(found - 1, len(MIGRATIONS)):
            for stmt in statements(MIGRATIONS[i]):
                if not _has_column_already(db, stmt):
                    db.execute(stmt)
        db.execute(
            "INSERT INTO daybook_meta (key, value) VALUES ('schema_version', ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (str(SCHEMA_VERSION),),
        )
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


def open_read_only(path: str, url: str, timeout: float) -> sqlite3.Connection:
    """A `mode=ro` connection to an existing daybook store: nothing is created, migrated or
    written (the file's bytes and time stay as they are). In a directory this process cannot
    write, a store with no write-ahead log left is opened as immutable."""
    if not os.path.isfile(path):
        raise ConfigError(
            f"no daybook store at {os.path.abspath(path)!r} ({url}): the file does not exist, and "
            "reading never creates one; check --db (or $DAYBOOK_DB)"
        )
    if os.path.getsize(path) == 0:
        raise ConfigError(
            f"{os.path.abspath(path)!r} is an empty file, not a daybook store (a store is never "
            "empty: it may have been truncated); check --db, or restore it from a backup"
        )
    uri = "file:" + quote(os.path.abspath(path)) + "?mode=ro"
    try:
        try:
            db = _connect_ro(uri, timeout)
            found = stamp(db, url)
        except sqlite3.OperationalError as exc:
            # No -shm can be made next to the file (a read-only directory); with no -wal
            # either, everything is in the file itself and it can be read as immutable.
            if "readonly" not in str(exc) or os.path.exists(path + "-wal"):
                raise
            db = _connect_ro(uri + "&immutable=1", timeout)
            found = stamp(db, url)
    except sqlite3.DatabaseError as exc:
        raise ConfigError(f"cannot read {path!r} as a SQLite store: {exc}") from None
    if found is None:
        raise ConfigError(
            f"{os.path.abspath(path)!r} is a SQLite file but not a daybook store (no "
            "daybook_meta table); check --db"
        )
    check_version(found, SCHEMA_VERSION, url, read_only=True)
    return db


def _connect_ro(uri: str, timeout: float) -> sqlite3.Connection:
    db = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=timeout, check_same_thread=False)
    db.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
    return db


def locked(path: str, timeout: float, exc: Exception) -> StoreUnavailable | None:
    """What a driver error that means "another process holds the lock" is for a person."""
    text = str(exc)
    if "locked" not in text and "busy" not in text:
        return None
    return StoreUnavailable(
        f"the SQLite store {path!r} is locked by another process ({text}) and stayed locked "
        f"for {timeout:g}s: a long write, a backup, or an open sqlite3 shell holds it. Let it "
        "finish (or close it) and try again; read commands do not need the lock"
    )


def _has_column_already(db: sqlite3.Connection, stmt: str) -> bool:
    """SQLite has no ADD COLUMN IF NOT EXISTS; a re-run upgrade must not fail on it."""
    words = stmt.split()
    if [w.upper() for w in words[:2]] != ["ALTER", "TABLE"] or "ADD" not in stmt.upper():
        return False
    table, column = words[2], words[5] if words[4].upper() == "COLUMN" else words[4]
    return any(row[1] == column for row in db.execute(f"PRAGMA table_info({table})"))


def statements(script: str) -> list[str]:
    """A script's statements (triggers contain ';' inside BEGIN...END, so not a plain split)."""
    out: list[str] = []
    buf: list[str] = []
    depth = 0
    for line in script.strip().splitlines():
        buf.append(line)
        upper = line.upper()
        if "BEGIN" in upper and "CREATE TRIGGER" in " ".join(buf).upper():
            depth = 1
        if depth and upper.rstrip().endswith("END;"):
            depth = 0
        if not depth and line.rstrip().endswith(";"):
            out.append("\n".join(buf))
            buf = []
    if buf:
        out.append("\n".join(buf))
    return out
