"""The PostgreSQL backend (psycopg 3): the store for several processes or hosts.

Every journal write is one statement in autocommit mode, so one round trip and one WAL flush
(`synchronous_commit=on`) per record. A `?schema=NAME` URL parameter keeps daybook's tables in
their own schema (created if missing), so one database can hold several isolated books.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..errors import ConfigError, LeaseLost, StoreUnavailable, redact_url
from ..records import SCHEMA_VERSION, Event, RunInfo, check_text, dumps, settles
from . import retention
from .postgres_dispatch import PostgresDispatch
from .postgres_entities import PostgresEntities
from .postgres_schema import MIGRATIONS, SCHEMA_V1
from .rows import (
    EVENT_COLUMNS,
    RAW_TABLES,
    RUN_ALL,
    RUN_COLUMNS,
    check_version,
    conflict_error,
    event_from_row,
    event_params,
    events_from_rows,
    events_skipping,
    foreign_tables,
    parse_stamp,
    run_from_row,
    run_params,
    runs_from_rows,
)
from .tx_rows import PG_BEGIN, PG_MARK, TERMINAL, TxRow, as_rows, select_sql
from .tx_signal import PgTxSignal, TxSignal

try:
    import psycopg

    from .postgres_link import Link
except ImportError:  # pragma: no cover - exercised only without the extra installed
    psycopg = None  # type: ignore[assignment]

# Payloads are `json`, not `jsonb`: jsonb reorders object keys, and replay must hand the workflow
# exactly the value the live run saw (a prompt built from a replayed dict must not change).

_JSON_COLUMNS = frozenset({"input", "result", "error", "data", "payload", "records"})
_LOCK_ID = 0x6461796230  # arbitrary constant: serialises schema setup across processes


def _split(url: str) -> tuple[str, str | None]:
    parts = urlsplit(url)
    query = parse_qsl(parts.query)
    schema = None
    rest = []
    for k, v in query:
        if k == "schema":
            schema = v
        else:
            rest.append((k, v))
    if schema is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,62}", schema):
        raise ConfigError(f"schema={schema!r} in the store URL is not a plain SQL identifier")
    return urlunsplit(parts._replace(query=urlencode(rest))), schema


def _without(text: str, dsn: str) -> str:
    """A driver's message with the URL's password taken out, should the driver quote it."""
    password = urlsplit(dsn).password
    return text.replace(password, "***") if password else text


class PostgresStore(PostgresEntities, PostgresDispatch):
    def __init__(self, url: str, read_only: bool = False) -> None:
        if psycopg is None:
            raise ConfigError(
                "PostgreSQL support needs psycopg 3: pip install 'psycopg[binary]>=3.1' (or the "
                "extra, pip install 'daybook-runtime[postgres]'; from a checkout, pip install '.[postgres]')"
            )
        # `url` is for showing (messages, `daybook` output): its password masked (audit D10);
        # `dsn` is what connects (a heartbeat's own connection is opened with it).
        self.dsn = url
        self.url = url = redact_url(url)
        self.read_only = read_only
        self.damage: dict[str, str] = {}
        conninfo, self.schema = _split(self.dsn)
        self._tx_signal: TxSignal = PgTxSignal(conninfo, self.schema)
        try:
            # One connection per handle, re-established when the server drops it (postgres_link).
            self._db = Link(conninfo, self.schema, read_only=read_only)
        except psycopg.Error as exc:  # unreachable, unknown role or database, a bad URL option
            raise ConfigError(f"cannot connect to {url}: {_without(str(exc).strip(), self.dsn)}") from None
        if read_only and self.schema and not self._schema_exists():
            raise ConfigError(
                f"no schema {self.schema!r} in {url}, so no daybook store there, and "
                "reading never creates one; check --db (or $DAYBOOK_DB)"
            )
        try:
            found = self._stamp()
            if read_only:
                if found is None:
                    raise ConfigError(
                        f"no daybook store in {url} (no daybook_meta table), and reading never "
                        "creates one; check --db (or $DAYBOOK_DB)"
                    )
                check_version(found, SCHEMA_VERSION, url, read_only=True)
            elif found is None or found < SCHEMA_VERSION:
                self._migrate()
            else:
                check_version(found, SCHEMA_VERSION, url)
        except psycopg.errors.UndefinedColumn as exc:
            raise ConfigError(foreign_tables(url, exc)) from None
        # A read-only handle may read a store from before the queue columns (schema v11).
        self._run_cols = RUN_ALL if self._has_queue_column() else RUN_COLUMNS
        marks = ", ".join(["%s"] * 9 + ["%s::json", "%s", "%s"])
        self._insert_event = f"INSERT INTO daybook_events ({EVENT_COLUMNS}) VALUES ({marks})"

    def _schema_exists(self) -> bool:
        sql = "SELECT 1 FROM pg_namespace WHERE nspname = %s"
        return self._db.execute(sql, (self.schema,)).fetchone() is not None

    def _stamp(self) -> int | None:
        """The store's schema version; None if there is no daybook store here."""
        if self._db.execute("SELECT to_regclass('daybook_meta')").fetchone()[0] is None:  # type: ignore[index]
            return None
        row = self._db.execute("SELECT value FROM daybook_meta WHERE key = 'schema_version'").fetchone()
        return parse_stamp(row[0], self.url) if row else 0

    def _migrate(self) -> None:
        # Only a store older than the code gets here, so a current store needs no DDL rights
        # (the least-privilege role of the README). The advisory lock serialises upgraders, and
        # two processes opening a new store at once do not race.
        with self._db.transaction() as db:
            db.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_ID,))
            if self.schema and not self._schema_exists():
                # Only when missing: CREATE SCHEMA needs a right the least-privilege owner lacks.
                db.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
            db.execute("CREATE TABLE IF NOT EXISTS daybook_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            found = self._stamp() or 0
            check_version(found, SCHEMA_VERSION, self.url)
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

    def create_run(self, info: RunInfo, first: Event) -> bool:
        # One round trip: the CTE inserts the header, the event insert runs only if it did.
        marks = ", ".join(["%s"] * 4 + ["%s::json"] * 3 + ["%s"] * 11)
        ev_marks = ", ".join(["%s"] * 9 + ["%s::json", "%s", "%s"])
        sql = (
            f"WITH r AS (INSERT INTO daybook_runs ({RUN_ALL}) VALUES ({marks}) "
            "ON CONFLICT (run_id) DO NOTHING RETURNING run_id) "
            f"INSERT INTO daybook_events ({EVENT_COLUMNS}) SELECT {ev_marks} FROM r"
        )
        cur = self._db.execute(sql, (*run_params(info), *event_params(first)))
        return cur.rowcount == 1

    def get_run(self, run_id: str) -> RunInfo | None:
        row = self._db.execute(
            f"SELECT {self._run_cols} FROM daybook_runs WHERE run_id = %s",
            (run_id,),
        ).fetchone()
        return run_from_row(row, parsed=True) if row else None

    def list_runs(self, status: str | None = None, limit: int = 100) -> list[RunInfo]:
        sql = f"SELECT {self._run_cols} FROM daybook_runs"
        args: tuple[Any, ...] = ()
        if status:
            sql += " WHERE status = %s"
            args = (status,)
        sql += " ORDER BY created_at DESC, run_id LIMIT %s"
        rows = self._db.execute(sql, (*args, limit)).fetchall()
        return runs_from_rows(rows, self.damage, parsed=True)

    def claim(self, run_id: str, owner: str, ttl: float, now: float, expect: str | None) -> bool:
        cur = self._db.execute(
            "UPDATE daybook_runs SET lease_owner = %s, lease_expires = %s, wake_at = NULL, "
            "status = CASE WHEN status IN ('pending', 'suspended', 'needs_attention', 'paused') "
            "THEN 'running' ELSE status END "
            "WHERE run_id = %s AND "
            "(lease_owner IS NULL OR lease_expires < %s OR lease_owner = %s OR lease_owner = %s)",
            (owner, now + ttl, run_id, now, owner, expect),
        )
        return cur.rowcount == 1

    def hold(
        self, run_id: str, owner: str, ttl: float, now: float, expect: str | None, allowed: tuple[str, ...]
    ) -> bool:
        marks = ", ".join(["%s"] * len(allowed))
        cur = self._db.execute(
            "UPDATE daybook_runs SET lease_owner = %s, lease_expires = %s "
            f"WHERE run_id = %s AND status IN ({marks}) AND "
            "(lease_owner IS NULL OR lease_expires < %s OR lease_owner = %s OR lease_owner = %s)",
            (owner, now + ttl, run_id, *allowed, now, owner, expect),
        )
        return cur.rowcount == 1

    def claim_next(self, owner: str, ttl: float, now: float, version: str | None = None) -> str | None:
        # SKIP LOCKED: workers racing for the queue head each take a different run, no waiting.
        row = self._db.execute(
            "UPDATE daybook_runs SET lease_owner = %s, lease_expires = %s, wake_at = NULL, "
            "status = 'running' WHERE run_id = ("
            "SELECT run_id FROM daybook_runs WHERE ((status IN ('pending', 'running') AND "
            "(lease_owner IS NULL OR lease_expires < %s) AND (wake_at IS NULL OR wake_at <= %s)) "
            "OR (status = 'suspended' AND "
            "wake_at <= %s AND (lease_owner IS NULL OR lease_expires < %s))) "
            # Queued runs are taken by `claim_queued`, under their queue's limits.
            "AND (%s::text IS NULL OR code_version = %s) AND queue IS NULL "
            "ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING run_id",
            (owner, now + ttl, now, now, now, now, version, version),
        ).fetchone()
        return None if row is None else str(row[0])

    def renew(self, run_id: str, owner: str, ttl: float, now: float) -> bool:
        cur = self._db.execute(
            "UPDATE daybook_runs SET lease_expires = %s WHERE run_id = %s AND lease_owner = %s",
            (now + ttl, run_id, owner),
        )
        return cur.rowcount == 1

    def release(self, run_id: str, owner: str) -> None:
        self._db.execute(
            "UPDATE daybook_runs SET lease_owner = NULL, lease_expires = NULL "
            "WHERE run_id = %s AND lease_owner = %s",
            (run_id, owner),
        )

    def append(self, event: Event) -> None:
        params = event_params(event)
        try:
            try:
                self._db.execute(self._insert_event, params, retry=False)
            except StoreUnavailable:
                # The connection dropped under the insert, and is back: the row is ours if it
                # landed, else it is written now. (The lease fences everyone else off this seq.)
                if not self._landed(event):
                    self._db.execute(self._insert_event, params, retry=False)
        except psycopg.errors.UniqueViolation as exc:
            raise _conflict(event, exc) from None

    def _landed(self, event: Event) -> bool:
        row = self._db.execute(
            "SELECT kind, name, at FROM daybook_events WHERE run_id = %s AND seq = %s",
            (event.run_id, event.seq),
        ).fetchone()
        if row is None:
            return False
        if (row[0], row[1], float(row[2])) != (event.kind, event.name, event.at):
            raise _conflict(event, Exception("another row holds this seq"))
        return True

    def finish(
        self,
        run_id: str,
        owner: str,
        status: str,
        result: object,
        error: object,
        event: Event | None,
        now: float,
    ) -> None:
        what = f"run {run_id!r}"
        update = (
            "UPDATE daybook_runs SET status = %s, result = %s::json, error = %s::json, "
            "updated_at = %s, lease_owner = NULL, lease_expires = NULL, wake_at = NULL "
            "WHERE run_id = %s AND "
            # A cancelled run stays cancelled: an owner that had not noticed records nothing.
            "(lease_owner = %s OR lease_owner IS NULL) AND status NOT IN ('cancelled', 'expired')"
        )
        params = (status, dumps(result, f"{what} result"), dumps(error, f"{what} error"), now, run_id, owner)
        try:
            if event is None:
                changed = self._db.execute(update, params).rowcount  # idempotent
            else:
                # One round trip: the event is inserted only if the header update took.
                ev_marks = ", ".join(["%s"] * 9 + ["%s::json", "%s", "%s"])
                sql = (
                    f"WITH u AS ({update} RETURNING run_id) "
                    f"INSERT INTO daybook_events ({EVENT_COLUMNS}) SELECT {ev_marks} FROM u"
                )
                changed = self._db.execute(sql, (*params, *event_params(event)), retry=False).rowcount
        except psycopg.errors.UniqueViolation as exc:
            assert event is not None
            raise _conflict(event, exc) from None
        if changed != 1:
            raise LeaseLost(
                f"run {run_id!r}: another process took the run over before this one could "
                "record how it ended; nothing was recorded here"
            )

    def transition(
        self, run_id: str, allowed: tuple[str, ...], status: str, error: object, event: Event, now: float
    ) -> bool:
        marks = ", ".join(["%s"] * len(allowed))
        ev_marks = ", ".join(["%s"] * 9 + ["%s::json", "%s", "%s"])
        sql = (
            "WITH u AS (UPDATE daybook_runs SET status = %s, error = %s::json, updated_at = %s, "
            "lease_owner = NULL, lease_expires = NULL, "
            "wake_at = CASE WHEN %s = 'pending' THEN %s::float8 ELSE NULL END "
            f"WHERE run_id = %s AND status IN ({marks}) RETURNING run_id) "
            f"INSERT INTO daybook_events ({EVENT_COLUMNS}) SELECT {ev_marks} FROM u"
        )
        error_text = dumps(error, f"run {run_id!r} error")
        params = (status, error_text, now, status, now, run_id, *allowed, *event_params(event))
        try:
            changed = self._db.execute(sql, params, retry=False).rowcount
        except psycopg.errors.UniqueViolation as exc:
            raise _conflict(event, exc) from None
        return bool(changed == 1)

    def defer(self, run_id: str, owner: str, wake_at: float, error: str, now: float) -> None:
        self._db.execute(
            "UPDATE daybook_runs SET wake_at = %s, error = %s::json, updated_at = %s, "
            "lease_owner = NULL, lease_expires = NULL WHERE run_id = %s AND lease_owner = %s",
            (wake_at, error, now, run_id, owner),
        )

    def suspend(self, run_id: str, owner: str, wake_at: float | None, now: float) -> None:
        self._db.execute(
            # A signal that arrived while the run executed already set wake_at: keep the earlier.
            "UPDATE daybook_runs SET status = 'suspended', wake_at = CASE WHEN wake_at IS NOT NULL "
            "AND (%s::float8 IS NULL OR wake_at < %s) THEN wake_at ELSE %s END, updated_at = %s, "
            "lease_owner = NULL, lease_expires = NULL WHERE run_id = %s AND lease_owner = %s",
            (wake_at, wake_at, wake_at, now, run_id, owner),
        )

    def signal(
        self,
        run_id: str,
        name: str,
        payload: str,
        sender: str,
        now: float,
        any_status: bool = False,
        wake: bool = True,
    ) -> int | None:
        # One round trip: the insert happens only for a live run, and wakes it if suspended.
        row = self._db.execute(
            "WITH r AS (SELECT run_id FROM daybook_runs WHERE run_id = %s AND "
            "(%s OR status NOT IN ('completed', 'failed', 'cancelled', 'expired'))), "
            "w AS (UPDATE daybook_runs SET wake_at = %s WHERE run_id IN (SELECT run_id FROM r) "
            "AND %s AND status NOT IN ('completed', 'failed', 'cancelled', 'expired')) "
            "INSERT INTO daybook_inbox (run_id, name, payload, sender, at) "
            "SELECT run_id, %s, %s::json, %s, %s FROM r RETURNING id",
            (run_id, any_status, now, wake, name, payload, sender, now),
            retry=False,  # a signal sent twice would be read twice
        ).fetchone()
        return None if row is None else int(row[0])

    def inbox(self, run_id: str) -> list[tuple[int, str, str, str, float]]:
        rows = self._db.execute(
            "SELECT id, name, payload::text, sender, at FROM daybook_inbox WHERE run_id = %s ORDER BY id",
            (run_id,),
        ).fetchall()
        return [(int(r[0]), r[1], r[2], r[3], float(r[4])) for r in rows]

    def set_approver(self, name: str, token_hash: str, now: float) -> None:
        check_text(name, "the approver name")  # the same rule on both stores
        self._db.execute(
            "INSERT INTO daybook_approvers (name, token_hash, created_at) VALUES (%s, %s, %s) "
            "ON CONFLICT (name) DO UPDATE SET token_hash = excluded.token_hash, "
            "created_at = excluded.created_at",
            (name, token_hash, now),
        )

    def approvers(self) -> dict[str, str]:
        rows = self._db.execute("SELECT name, token_hash FROM daybook_approvers").fetchall()
        return {r[0]: r[1] for r in rows}

    def current_role(self) -> str | None:
        """The database role this handle connects as (journaled beside a claimed name)."""
        row = self._db.execute("SELECT current_user").fetchone()
        return str(row[0]) if row else ""

    def load(self, run_id: str) -> list[Event]:
        rows = self._db.execute(
            f"SELECT {EVENT_COLUMNS} FROM daybook_events WHERE run_id = %s ORDER BY seq",
            (run_id,),
        ).fetchall()
        return events_from_rows(rows, parsed=True)

    def stage(self, txid: str, collection: str, record_id: str, data: str, now: float) -> None:
        self._db.execute(
            "INSERT INTO daybook_staging (txid, collection, record_id, data, at) "
            "VALUES (%s, %s, %s, %s::json, %s) ON CONFLICT (txid, collection, record_id) "
            "DO UPDATE SET data = excluded.data",
            (txid, collection, record_id, data, now),
        )

    def commit_tx(
        self, txid: str, commit_id: str, key: str | None, message: str, author: str, now: float
    ) -> tuple[str, list[list[str]]]:
        with self._db.transaction() as db:
            if key is not None:
                row = db.execute(
                    "SELECT commit_id, records FROM daybook_commits WHERE key = %s", (key,)
                ).fetchone()
                if row is not None:
                    db.execute("DELETE FROM daybook_staging WHERE txid = %s", (txid,))
                    return str(row[0]), list(row[1])
            staged = db.execute(
                "SELECT collection, record_id, data::text FROM daybook_staging WHERE txid = %s "
                "ORDER BY collection, record_id",
                (txid,),
            ).fetchall()
            records = [[c, r] for c, r, _ in staged]
            db.execute(
                "INSERT INTO daybook_commits (commit_id, key, message, author, at, records) "
                "VALUES (%s, %s, %s, %s, %s, %s::json)",
                (commit_id, key, message, author, now, json.dumps(records)),
            )
            for c, r, d in staged:
                db.execute(
                    "INSERT INTO daybook_records (collection, record_id, data, commit_id) "
                    "VALUES (%s, %s, %s::json, %s) ON CONFLICT (collection, record_id) DO UPDATE "
                    "SET data = excluded.data, commit_id = excluded.commit_id",
                    (c, r, d, commit_id),
                )
            db.execute("DELETE FROM daybook_staging WHERE txid = %s", (txid,))
            return commit_id, records

    def abandon_tx(self, txid: str) -> None:
        self._db.execute("DELETE FROM daybook_staging WHERE txid = %s", (txid,))

    def staging(self) -> list[tuple[str, str, str, float]]:
        rows = self._db.execute(
            "SELECT txid, collection, record_id, at FROM daybook_staging ORDER BY at"
        ).fetchall()
        return [(r[0], r[1], r[2], float(r[3])) for r in rows]

    def get_record(self, collection: str, record_id: str) -> tuple[str, str] | None:
        row = self._db.execute(
            "SELECT data::text, commit_id FROM daybook_records WHERE collection = %s AND record_id = %s",
            (collection, record_id),
        ).fetchone()
        return (row[0], row[1]) if row else None

    def commits(self) -> list[tuple[str, str | None, str, str, float, str]]:
        rows = self._db.execute(
            "SELECT commit_id, key, message, author, at, records::text FROM daybook_commits ORDER BY at"
        ).fetchall()
        return [(r[0], r[1], r[2], r[3], float(r[4]), r[5]) for r in rows]

    def events_of_kind(self, kind: str) -> list[Event]:
        rows = self._db.execute(
            f"SELECT {EVENT_COLUMNS} FROM daybook_events WHERE kind = %s ORDER BY run_id, seq",
            (kind,),
        ).fetchall()
        return events_skipping(rows, self.damage, parsed=True)

    def find_intent(self, key: str) -> Event | None:
        # Served by the partial unique index on intent keys.
        rows = self._db.execute(
            f"SELECT {EVENT_COLUMNS} FROM daybook_events WHERE kind = 'intent' AND key = %s", (key,)
        ).fetchall()
        return events_from_rows(rows, parsed=True)[0] if rows else None

    def open_effects(self, skip_damaged: bool = False) -> list[Event]:
        cols = ", ".join("e." + c.strip() for c in EVENT_COLUMNS.split(","))
        rows = self._db.execute(
            f"SELECT {cols} FROM daybook_events e JOIN (SELECT run_id, step, MAX(seq) AS seq "
            "FROM daybook_events WHERE kind IN ('intent', 'attempt', 'outcome') "
            "GROUP BY run_id, step) last ON e.run_id = last.run_id AND e.seq = last.seq "
            "WHERE e.kind != 'outcome' OR e.status IN ('unknown', 'failed') ORDER BY e.at"
        ).fetchall()
        events = (
            events_skipping(rows, self.damage, parsed=True)
            if skip_damaged
            else [event_from_row(r, parsed=True) for r in rows]
        )
        return [e for e in events if not settles(e)]

    # -- integrity ----------------------------------------------------------------------------

    # -- Atomix transactions (daybook.tx; what each does: the Store protocol) ------------------
    # One statement each, so one database transaction: a handle is shared by threads, and one
    # statement never interleaves with another thread's.

    def tx_begin(
        self, tx_id: str, run_id: str, scopes: str, attempt: int, retries: int, event: Event, now: float
    ) -> int:
        header = (tx_id, run_id, scopes, attempt, retries, now, now)
        try:
            row = self._db.execute(PG_BEGIN, (*header, *event_params(event)), retry=False).fetchone()
        except psycopg.errors.UniqueViolation as exc:
            raise _conflict(event, exc) from None
        event.data["epoch"] = epoch = int(row[0])  # type: ignore[index]
        return epoch

    def tx_mark(self, tx_id: str, status: str, event: Event, now: float) -> bool:
        params = (status, now, tx_id, *event_params(event))
        try:
            changed = self._db.execute(PG_MARK, params, retry=False).rowcount
        except psycopg.errors.UniqueViolation as exc:
            raise _conflict(event, exc) from None
        if status in TERMINAL:
            self._tx_signal.bump()  # this handle's waiters need not wait for the NOTIFY
        return changed == 1

    def tx_signal(self) -> TxSignal:
        return self._tx_signal

    def tx_rows(
        self, run_id: str | None = None, open_only: bool = False, before: int | None = None
    ) -> list[TxRow]:
        sql, params = select_sql("%s", run_id, open_only, before)
        return as_rows(self._db.execute(sql, params).fetchall())

    def raw_rows(self, table: str, run_id: str | None = None) -> list[tuple[Any, ...]]:
        # JSON columns as text: a row is shown exactly as stored, whatever it holds.
        columns = ", ".join(
            f"{c}::text" if c in _JSON_COLUMNS else c for c in RAW_TABLES[table].replace(" ", "").split(",")
        )
        sql = f"SELECT {columns} FROM daybook_{table}"
        if run_id is not None:
            sql += " WHERE run_id = %s"
        key = RAW_TABLES[table].split(",")[0]
        sql += " ORDER BY run_id, seq" if table == "events" else f" ORDER BY {key}"
        rows = self._db.execute(sql, () if run_id is None else (run_id,)).fetchall()
        return [tuple(r) for r in rows]

    def journal_run_ids(self) -> list[str]:
        rows = self._db.execute("SELECT DISTINCT run_id FROM daybook_events ORDER BY run_id").fetchall()
        return [r[0] for r in rows]

    def quick_check(self) -> list[str]:
        return []  # PostgreSQL checks its pages itself (checksums, amcheck are the DBA's tools)

    def gc(
        self, cutoff: float, now: float, who: str, gc_id: str, key: bytes, dry_run: bool
    ) -> dict[str, Any]:
        """Erase the payloads of finished runs updated before `cutoff` (store/retention.py)."""
        with self._db.transaction() as db:
            return retention.collect(
                db.execute, cutoff=cutoff, now=now, who=who, gc_id=gc_id, key=key, dry_run=dry_run,
                cast="::json",
            )  # fmt: skip

    def gc_log(self) -> list[dict[str, Any]]:
        return retention.history(self._db.execute)

    def meta_value(self, key: str, default: str) -> str:
        """The store setting `key`, set to `default` first if it has none (read-only: only read)."""
        if not self.read_only:
            sql = "INSERT INTO daybook_meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO NOTHING"
            self._db.execute(sql, (key, default))
        row = self._db.execute("SELECT value FROM daybook_meta WHERE key = %s", (key,)).fetchone()
        return str(row[0]) if row else default

    def meta_items(self, prefix: str) -> dict[str, str]:
        sql = "SELECT key, value FROM daybook_meta WHERE left(key, %s) = %s"
        return {str(k): str(v) for k, v in self._db.execute(sql, (len(prefix), prefix)).fetchall()}

    def close(self) -> None:
        self._tx_signal.close()
        self._db.close()

    def now(self) -> float:
        return time.time()


def _conflict(event: Event, exc: Exception) -> Exception:
    constraint = getattr(getattr(exc, "diag", None), "constraint_name", "") or ""
    return conflict_error(event, constraint == "daybook_events_key")
