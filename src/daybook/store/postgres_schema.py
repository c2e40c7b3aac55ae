"""The PostgreSQL schema: the version-1 tables, created whole, and one migration per later version
(index i upgrades a store from v(i+1) to v(i+2)). Every journal-like table is append-only,
enforced by triggers. `migrate` applies them, under a lock that serialises upgraders."""

from __future__ import annotations

from typing import Any

from ..records import SCHEMA_VERSION
from .rows import check_version, parse_stamp

SCHEMA_V1 = [
    """CREATE TABLE IF NOT EXISTS daybook_runs (
        run_id TEXT PRIMARY KEY,
        workflow TEXT NOT NULL,
        ref TEXT NOT NULL,
        status TEXT NOT NULL,
        input JSON,
        result JSON,
        error JSON,
        created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL,
        lease_owner TEXT,
        lease_expires DOUBLE PRECISION,
        schema_version INTEGER NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS daybook_runs_status ON daybook_runs (status, updated_at)",
    """CREATE TABLE IF NOT EXISTS daybook_events (
        run_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        step INTEGER,
        kind TEXT NOT NULL,
        name TEXT NOT NULL,
        key TEXT,
        status TEXT,
        attempt INTEGER NOT NULL,
        fp TEXT,
        data JSON NOT NULL,
        at DOUBLE PRECISION NOT NULL,
        parent TEXT,
        PRIMARY KEY (run_id, seq))""",
    """CREATE UNIQUE INDEX IF NOT EXISTS daybook_events_key ON daybook_events (key)
        WHERE kind = 'intent'""",
    """CREATE OR REPLACE FUNCTION daybook_append_only() RETURNS trigger AS $$
        BEGIN RAISE EXCEPTION 'daybook journal is append-only: rows are never %', lower(TG_OP);
        END $$ LANGUAGE plpgsql""",
    """CREATE OR REPLACE TRIGGER daybook_events_append_only BEFORE UPDATE OR DELETE ON daybook_events
        FOR EACH ROW EXECUTE FUNCTION daybook_append_only()""",
]

# The refusal every append-only table's triggers raise (row UPDATE/DELETE, statement TRUNCATE).
_APPEND_ONLY_FUNCTION = """CREATE OR REPLACE FUNCTION {name}() RETURNS trigger AS $$
    BEGIN RAISE EXCEPTION '% is append-only: rows are never %',
        CASE TG_TABLE_NAME WHEN 'daybook_events' THEN 'daybook journal'
            WHEN 'daybook_inbox' THEN 'daybook inbox' WHEN 'daybook_entity_log' THEN 'daybook entity log'
            WHEN 'daybook_commits' THEN 'daybook commit log' ELSE TG_TABLE_NAME END,
        CASE TG_OP WHEN 'UPDATE' THEN 'updated' WHEN 'DELETE' THEN 'deleted' ELSE 'truncated' END;
    END $$ LANGUAGE plpgsql"""

# Index i upgrades a store from schema v(i+1) to v(i+2); v1 is created whole, then upgraded.
MIGRATIONS: list[list[str]] = [
    # v2: workers find runnable runs (pending, or running with a lapsed lease) oldest first.
    [
        """CREATE INDEX IF NOT EXISTS daybook_runs_runnable ON daybook_runs (created_at)
            WHERE status IN ('pending', 'running')""",
    ],
    # v3: durable waits. Suspended runs wake at `wake_at`; signals wait in an append-only inbox.
    [
        "ALTER TABLE daybook_runs ADD COLUMN IF NOT EXISTS wake_at DOUBLE PRECISION",
        """CREATE INDEX IF NOT EXISTS daybook_runs_waking ON daybook_runs (wake_at)
            WHERE status = 'suspended'""",
        """CREATE TABLE IF NOT EXISTS daybook_inbox (
            id BIGSERIAL PRIMARY KEY,
            run_id TEXT NOT NULL,
            name TEXT NOT NULL,
            payload JSON NOT NULL,
            sender TEXT NOT NULL,
            at DOUBLE PRECISION NOT NULL)""",
        "CREATE INDEX IF NOT EXISTS daybook_inbox_run ON daybook_inbox (run_id, id)",
        """CREATE OR REPLACE TRIGGER daybook_inbox_append_only BEFORE UPDATE ON daybook_inbox
            FOR EACH ROW EXECUTE FUNCTION daybook_append_only()""",
    ],
    # v4: approvers, each with the hash of a secret token, for approval gates. No longer read or
    # written: approvers' public keys live in the approvers file, outside the store (gates.roster);
    # the table stays for old stores (owner-only in the README's role recipe).
    [
        """CREATE TABLE IF NOT EXISTS daybook_approvers (
            name TEXT PRIMARY KEY,
            token_hash TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL)""",
    ],
    # v5: coordination entities. One row per shared resource holds its lease; the log of every
    # claim, release and record is append-only, like the journal.
    [
        """CREATE TABLE IF NOT EXISTS daybook_entities (
            name TEXT PRIMARY KEY,
            holder TEXT,
            deadline DOUBLE PRECISION,
            updated_at DOUBLE PRECISION NOT NULL)""",
        """CREATE TABLE IF NOT EXISTS daybook_entity_log (
            id BIGSERIAL PRIMARY KEY,
            name TEXT NOT NULL,
            at DOUBLE PRECISION NOT NULL,
            agent TEXT NOT NULL,
            action TEXT NOT NULL,
            data JSON NOT NULL)""",
        "CREATE INDEX IF NOT EXISTS daybook_entity_log_name ON daybook_entity_log (name, id)",
        """CREATE OR REPLACE FUNCTION daybook_entity_log_append_only() RETURNS trigger AS $$
            BEGIN RAISE EXCEPTION 'daybook entity log is append-only: rows are never %', lower(TG_OP);
            END $$ LANGUAGE plpgsql""",
        # Re-running the upgrade (a store stamped with an older version) must not fail.
        "DROP TRIGGER IF EXISTS daybook_entity_log_append_only ON daybook_entity_log",
        """CREATE TRIGGER daybook_entity_log_append_only BEFORE UPDATE OR DELETE ON daybook_entity_log
            FOR EACH ROW EXECUTE FUNCTION daybook_entity_log_append_only()""",
    ],
    # v6: runs remember the code version they started on, so workers can be pinned to one.
    ["ALTER TABLE daybook_runs ADD COLUMN IF NOT EXISTS code_version TEXT"],
    # v7: multi-record transactions: staged writes, the visible records, one audit row per commit.
    [
        """CREATE TABLE IF NOT EXISTS daybook_staging (
            txid TEXT NOT NULL, collection TEXT NOT NULL, record_id TEXT NOT NULL,
            data JSON NOT NULL, at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (txid, collection, record_id))""",
        """CREATE TABLE IF NOT EXISTS daybook_records (
            collection TEXT NOT NULL, record_id TEXT NOT NULL, data JSON NOT NULL,
            commit_id TEXT NOT NULL, PRIMARY KEY (collection, record_id))""",
        """CREATE TABLE IF NOT EXISTS daybook_commits (
            commit_id TEXT PRIMARY KEY, key TEXT UNIQUE, message TEXT NOT NULL,
            author TEXT NOT NULL, at DOUBLE PRECISION NOT NULL, records JSON NOT NULL)""",
        """CREATE OR REPLACE TRIGGER daybook_commits_append_only BEFORE UPDATE OR DELETE
            ON daybook_commits FOR EACH ROW EXECUTE FUNCTION daybook_append_only()""",
    ],
    # v8: append-only on every path. Row triggers do not fire on TRUNCATE, so a statement
    # trigger refuses it; inbox rows are never deleted; the refusals read as sentences.
    [
        _APPEND_ONLY_FUNCTION.format(name="daybook_append_only"),
        _APPEND_ONLY_FUNCTION.format(name="daybook_entity_log_append_only"),
        "DROP TRIGGER IF EXISTS daybook_inbox_append_only ON daybook_inbox",
        """CREATE TRIGGER daybook_inbox_append_only BEFORE UPDATE OR DELETE ON daybook_inbox
            FOR EACH ROW EXECUTE FUNCTION daybook_append_only()""",
        *(
            stmt
            for table in ("daybook_events", "daybook_inbox", "daybook_entity_log", "daybook_commits")
            for stmt in (
                f"DROP TRIGGER IF EXISTS {table}_no_truncate ON {table}",
                f"""CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table}
                    FOR EACH STATEMENT EXECUTE FUNCTION daybook_append_only()""",
            )
        ),
    ],
    # v9: retention (store/retention.py). An append-only gc log; a journal row's data may change
    # only to an erasure mark, of a finished run, once the gc log holds a row for that run.
    [
        """CREATE TABLE IF NOT EXISTS daybook_gc (
            id BIGSERIAL PRIMARY KEY, gc_id TEXT NOT NULL, run_id TEXT, who TEXT NOT NULL,
            at DOUBLE PRECISION NOT NULL, cutoff DOUBLE PRECISION NOT NULL,
            runs INTEGER NOT NULL, rows INTEGER NOT NULL)""",
        "CREATE INDEX IF NOT EXISTS daybook_gc_run ON daybook_gc (run_id)",
        "DROP TRIGGER IF EXISTS daybook_gc_append_only ON daybook_gc",
        """CREATE TRIGGER daybook_gc_append_only BEFORE UPDATE OR DELETE ON daybook_gc
            FOR EACH ROW EXECUTE FUNCTION daybook_append_only()""",
        "DROP TRIGGER IF EXISTS daybook_gc_no_truncate ON daybook_gc",
        """CREATE TRIGGER daybook_gc_no_truncate BEFORE TRUNCATE ON daybook_gc
            FOR EACH STATEMENT EXECUTE FUNCTION daybook_append_only()""",
        """CREATE OR REPLACE FUNCTION daybook_events_erase_only() RETURNS trigger AS $$
            BEGIN
                IF TG_OP = 'UPDATE' AND NEW.data::text LIKE '{"$erased":%'
                    AND NEW.run_id = OLD.run_id AND NEW.seq = OLD.seq
                    AND NEW.step IS NOT DISTINCT FROM OLD.step AND NEW.kind = OLD.kind
                    AND NEW.name = OLD.name AND NEW.key IS NOT DISTINCT FROM OLD.key
                    AND NEW.status IS NOT DISTINCT FROM OLD.status AND NEW.attempt = OLD.attempt
                    AND NEW.fp IS NOT DISTINCT FROM OLD.fp AND NEW.at = OLD.at
                    AND NEW.parent IS NOT DISTINCT FROM OLD.parent
                    AND EXISTS (SELECT 1 FROM daybook_gc g WHERE g.run_id = OLD.run_id)
                    AND EXISTS (SELECT 1 FROM daybook_runs r WHERE r.run_id = OLD.run_id
                        AND r.status IN ('completed', 'failed', 'cancelled', 'expired')) THEN
                    RETURN NEW;
                END IF;
                RAISE EXCEPTION 'daybook journal is append-only: rows are never %',
                    CASE TG_OP WHEN 'UPDATE' THEN 'updated' ELSE 'deleted' END;
            END $$ LANGUAGE plpgsql""",
        "DROP TRIGGER IF EXISTS daybook_events_append_only ON daybook_events",
        """CREATE TRIGGER daybook_events_append_only BEFORE UPDATE OR DELETE ON daybook_events
            FOR EACH ROW EXECUTE FUNCTION daybook_events_erase_only()""",
    ],
    # v10: Atomix transactions. A sequence allocates epochs (drawn under a transaction lock, so
    # they become visible in order); one header per transaction attempt (a mutable header like
    # daybook_runs: only status and updated_at change, and a terminal status never changes again).
    [
        "CREATE SEQUENCE IF NOT EXISTS daybook_epoch_seq",
        """CREATE TABLE IF NOT EXISTS daybook_transactions (
            tx_id TEXT PRIMARY KEY, run_id TEXT NOT NULL, epoch BIGINT NOT NULL UNIQUE,
            scopes TEXT NOT NULL, status TEXT NOT NULL, attempt INTEGER NOT NULL,
            retries INTEGER NOT NULL, created_at DOUBLE PRECISION NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL)""",
        """CREATE INDEX IF NOT EXISTS daybook_transactions_open ON daybook_transactions (epoch)
            WHERE status IN ('open', 'committing', 'aborting')""",
        "CREATE INDEX IF NOT EXISTS daybook_transactions_run ON daybook_transactions (run_id, epoch)",
        """CREATE OR REPLACE FUNCTION daybook_transactions_settled() RETURNS trigger AS $$
            BEGIN
                IF TG_OP = 'DELETE' OR OLD.status IN ('committed', 'aborted', 'stuck')
                    OR NEW.epoch <> OLD.epoch OR NEW.tx_id <> OLD.tx_id
                    OR NEW.scopes <> OLD.scopes THEN
                    RAISE EXCEPTION 'daybook transaction headers change only their status, until it is final';
                END IF;
                RETURN NEW;
            END $$ LANGUAGE plpgsql""",
        "DROP TRIGGER IF EXISTS daybook_transactions_settled ON daybook_transactions",
        """CREATE TRIGGER daybook_transactions_settled BEFORE UPDATE OR DELETE
            ON daybook_transactions FOR EACH ROW EXECUTE FUNCTION daybook_transactions_settled()""",
    ],
    # v11: queues, schedules and run search (daybook.dispatch): as in sqlite_schema. A worker
    # takes a queued run holding its queue's row lock, so limits hold across hosts.
    [
        "ALTER TABLE daybook_runs ADD COLUMN IF NOT EXISTS queue TEXT",
        "ALTER TABLE daybook_runs ADD COLUMN IF NOT EXISTS priority INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE daybook_runs ADD COLUMN IF NOT EXISTS partition_key TEXT",
        "ALTER TABLE daybook_runs ADD COLUMN IF NOT EXISTS dequeued_at DOUBLE PRECISION",
        "ALTER TABLE daybook_runs ADD COLUMN IF NOT EXISTS parent_run TEXT",
        """CREATE INDEX IF NOT EXISTS daybook_runs_queued ON daybook_runs (queue, priority, created_at)
            WHERE queue IS NOT NULL AND status IN ('pending', 'running', 'suspended')""",
        """CREATE INDEX IF NOT EXISTS daybook_runs_dequeued ON daybook_runs (queue, dequeued_at)
            WHERE queue IS NOT NULL""",
        """CREATE INDEX IF NOT EXISTS daybook_runs_leased ON daybook_runs (queue, lease_expires)
            WHERE queue IS NOT NULL AND lease_owner IS NOT NULL""",
        """CREATE INDEX IF NOT EXISTS daybook_runs_partition ON daybook_runs (queue, partition_key)
            WHERE partition_key IS NOT NULL
            AND status NOT IN ('completed', 'failed', 'cancelled', 'expired')""",
        "CREATE INDEX IF NOT EXISTS daybook_runs_created ON daybook_runs (created_at, run_id)",
        "CREATE INDEX IF NOT EXISTS daybook_runs_workflow ON daybook_runs (workflow, created_at)",
        """CREATE INDEX IF NOT EXISTS daybook_runs_parent ON daybook_runs (parent_run)
            WHERE parent_run IS NOT NULL""",
        """CREATE TABLE IF NOT EXISTS daybook_queues (
            name TEXT PRIMARY KEY, concurrency INTEGER, per_worker INTEGER, rate_limit INTEGER,
            rate_period DOUBLE PRECISION, updated_at DOUBLE PRECISION NOT NULL)""",
        """CREATE TABLE IF NOT EXISTS daybook_schedules (
            name TEXT PRIMARY KEY, workflow TEXT NOT NULL, ref TEXT NOT NULL, cron TEXT NOT NULL,
            input TEXT NOT NULL, queue TEXT, catchup TEXT NOT NULL,
            grace DOUBLE PRECISION NOT NULL, paused INTEGER NOT NULL DEFAULT 0,
            last_fired DOUBLE PRECISION NOT NULL, created_at DOUBLE PRECISION NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL)""",
        """CREATE TABLE IF NOT EXISTS daybook_attributes (
            run_id TEXT NOT NULL, name TEXT NOT NULL, value TEXT NOT NULL,
            PRIMARY KEY (run_id, name))""",
        "CREATE INDEX IF NOT EXISTS daybook_attributes_value ON daybook_attributes (name, value)",
    ],
    # v12: a transaction header that ends (committed, aborted, stuck) sends NOTIFY daybook_tx
    # (payload: the schema) from the database transaction that ends it, so a transaction waiting
    # for its frontier wakes when it can go on (LISTEN, store/tx_signal.py) instead of polling;
    # and the `tx_left` journal row kind (a run left an open transaction on purpose).
    [
        """CREATE OR REPLACE FUNCTION daybook_transactions_ended() RETURNS trigger AS $$
            BEGIN
                PERFORM pg_notify('daybook_tx', TG_TABLE_SCHEMA);
                RETURN NULL;
            END $$ LANGUAGE plpgsql""",
        "DROP TRIGGER IF EXISTS daybook_transactions_ended ON daybook_transactions",
        """CREATE TRIGGER daybook_transactions_ended AFTER UPDATE OF status ON daybook_transactions
            FOR EACH ROW WHEN (NEW.status IN ('committed', 'aborted', 'stuck'))
            EXECUTE FUNCTION daybook_transactions_ended()""",
    ],
    # v13: durable streams (`ctx.stream`, store/chunks.py): chunks keyed by (run, stream, act, n),
    # at most one divergent re-send beside each; `pos` is the reader's cursor. Append-only, but
    # for gc's erasure of a finished run's payloads (as the journal, v9).
    [
        """CREATE TABLE IF NOT EXISTS daybook_chunks (
            run_id TEXT NOT NULL, pos BIGINT NOT NULL, stream TEXT NOT NULL, act TEXT NOT NULL,
            n INTEGER NOT NULL, divergent INTEGER NOT NULL, data JSON NOT NULL,
            at DOUBLE PRECISION NOT NULL, PRIMARY KEY (run_id, pos))""",
        """CREATE UNIQUE INDEX IF NOT EXISTS daybook_chunks_key
            ON daybook_chunks (run_id, stream, act, n, divergent)""",
        """CREATE OR REPLACE FUNCTION daybook_chunks_erase_only() RETURNS trigger AS $$
            BEGIN
                IF TG_OP = 'UPDATE' AND NEW.data::text LIKE '{"$erased":%'
                    AND NEW.run_id = OLD.run_id AND NEW.pos = OLD.pos AND NEW.stream = OLD.stream
                    AND NEW.act = OLD.act AND NEW.n = OLD.n AND NEW.divergent = OLD.divergent
                    AND NEW.at = OLD.at
                    AND EXISTS (SELECT 1 FROM daybook_gc g WHERE g.run_id = OLD.run_id)
                    AND EXISTS (SELECT 1 FROM daybook_runs r WHERE r.run_id = OLD.run_id
                        AND r.status IN ('completed', 'failed', 'cancelled', 'expired')) THEN
                    RETURN NEW;
                END IF;
                RAISE EXCEPTION 'daybook stream chunks are append-only: rows are never %',
                    CASE TG_OP WHEN 'UPDATE' THEN 'updated' ELSE 'deleted' END;
            END $$ LANGUAGE plpgsql""",
        "DROP TRIGGER IF EXISTS daybook_chunks_append_only ON daybook_chunks",
        """CREATE TRIGGER daybook_chunks_append_only BEFORE UPDATE OR DELETE ON daybook_chunks
            FOR EACH ROW EXECUTE FUNCTION daybook_chunks_erase_only()""",
        "DROP TRIGGER IF EXISTS daybook_chunks_no_truncate ON daybook_chunks",
        """CREATE TRIGGER daybook_chunks_no_truncate BEFORE TRUNCATE ON daybook_chunks
            FOR EACH STATEMENT EXECUTE FUNCTION daybook_append_only()""",
    ],
    # v14: the `run_replayed` journal row kind (an execution's replayed model calls, for the
    # cost ledger). No DDL: the version tells an older daybook the journal may hold it.
    [],
    # v15: gc erases approval requests (store/erasure.py): as in sqlite_schema. An entity log
    # row may change only if it is an outbox entry's `request`, only to an erasure mark naming
    # the run that owns the entry, once the gc log holds that run and the run is finished.
    [
        """CREATE OR REPLACE FUNCTION daybook_entity_log_erase_only() RETURNS trigger AS $$
            BEGIN
                IF TG_OP = 'UPDATE' AND NEW.data::text LIKE '{"$erased":%'
                    AND NEW.id = OLD.id AND NEW.name = OLD.name AND NEW.at = OLD.at
                    AND NEW.agent = OLD.agent AND NEW.action = OLD.action
                    AND OLD.action = 'request'
                    AND left(OLD.name, length(NEW.data->>'run_id') + 16)
                        = 'daybook.outbox/' || (NEW.data->>'run_id') || '/'
                    AND EXISTS (SELECT 1 FROM daybook_gc g WHERE g.run_id = NEW.data->>'run_id')
                    AND EXISTS (SELECT 1 FROM daybook_runs r WHERE r.run_id = NEW.data->>'run_id'
                        AND r.status IN ('completed', 'failed', 'cancelled', 'expired')) THEN
                    RETURN NEW;
                END IF;
                RAISE EXCEPTION 'daybook entity log is append-only: rows are never %',
                    CASE TG_OP WHEN 'UPDATE' THEN 'updated' ELSE 'deleted' END;
            END $$ LANGUAGE plpgsql""",
        "DROP TRIGGER IF EXISTS daybook_entity_log_append_only ON daybook_entity_log",
        """CREATE TRIGGER daybook_entity_log_append_only BEFORE UPDATE OR DELETE ON daybook_entity_log
            FOR EACH ROW EXECUTE FUNCTION daybook_entity_log_erase_only()""",
    ],
    # v16: SQLite's REPLACE through a second unique index (sqlite_schema). PostgreSQL has no
    # REPLACE: an insert that collides is refused (ON CONFLICT needs an UPDATE, refused too).
    [],
]


_LOCK_ID = 0x6461796230  # arbitrary constant: serialises schema setup across processes


def stamp(db: Any, url: str) -> int | None:
    """The store's schema version; None if there is no daybook store here."""
    if db.execute("SELECT to_regclass('daybook_meta')").fetchone()[0] is None:
        return None
    row = db.execute("SELECT value FROM daybook_meta WHERE key = 'schema_version'").fetchone()
    return parse_stamp(row[0], url) if row else 0


def schema_exists(db: Any, schema: str | None) -> bool:
    return db.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone() is not None


def migrate(db: Any, schema: str | None, url: str) -> None:
    """Create or upgrade the store to SCHEMA_VERSION, in the transaction `db`. Only a store
    older than the code gets here, so a current store needs no DDL rights (the least-privilege
    role of the README). The advisory lock serialises upgraders, and two processes opening a new
    store at once do not race."""
    db.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_ID,))
    if schema and not schema_exists(db, schema):
        # Only when missing: CREATE SCHEMA needs a right the least-privilege owner lacks.
        db.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
    db.execute("CREATE TABLE IF NOT EXISTS daybook_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    found = stamp(db, url) or 0
    check_version(found, SCHEMA_VERSION, url)
    if found == SCHEMA_VERSION:
        return  # another process upgraded it while this one waited for the lock
    if found == 0:
        for stmt in SCHEMA_V1:
            db.execute(stmt)
        found = 1
    for i in range(found - 1, len(MIGRATIONS)):
        for stmt in MIGRATIONS[i]:
            db.execute(stmt)
    db.execute(
        "INSERT INTO daybook_meta (key, value) VALUES ('schema_version', %s) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (str(SCHEMA_VERSION),),
    )
