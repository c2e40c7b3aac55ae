"""The SQLite backend: the embedded default, one file, WAL, every record its own durable commit.

Durability (`?synchronous=` in the URL):
- `full` (default): each intent and outcome is fsynced before daybook goes on. Survives a process
  crash and a power cut.
- `normal`: WAL without an fsync per commit. Survives a process crash (SIGKILL) with nothing lost;
  a power cut may lose the last few records. Lost intents are re-sent under the same key and lost
  outcomes become `unknown` and are reconciled, so with counterparties that honour keys no effect
  happens twice; without keys, a power cut can repeat the last effect.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ..errors import ConfigError, LeaseLost
from ..records import TERMINAL, Event, RunInfo, bounded, check_text, dumps, settles
from . import retention
from .group import GroupCommit
from .rows import (
    EVENT_COLUMNS,
    RAW_TABLES,
    RUN_ALL,
    RUN_COLUMNS,
    conflict_error,
    event_from_row,
    event_params,
    events_from_rows,
    events_skipping,
    foreign_tables,
    run_from_row,
    run_params,
    runs_from_rows,
    unencodable,
)
from .sqlite_dispatch import SQLiteDispatch
from .sqlite_entities import SQLiteEntities
from .sqlite_schema import locked, migrate, open_read_only
from .tx_rows import TERMINAL as TX_ENDED
from .tx_rows import TX_COLUMNS, TxRow, as_rows, mark_sql, select_sql
from .tx_signal import TxSignal
from .wal import WalWatch

_SYNC = {"full": "FULL", "normal": "NORMAL", "extra": "EXTRA"}


def _path_of(url: str) -> tuple[str, dict[str, list[str]]]:
    if "://" not in url and not url.startswith("sqlite:"):
        return url, {}
    parts = urlsplit(url)
    if parts.scheme != "sqlite":
        raise ConfigError(f"not a SQLite URL: {url!r}")
    # sqlite:///rel.db -> "rel.db"; sqlite:////abs.db -> "/abs.db"
    path = parts.path[1:] if parts.path.startswith("/") else parts.path
    if parts.netloc:
        path = parts.netloc + parts.path
    if not path:
        raise ConfigError(f"SQLite URL {url!r} names no file: use sqlite:///daybook.db")
    return path, parse_qs(parts.query)


def _timeout_of(query: dict[str, list[str]], url: str) -> float:
    """`?timeout=SECONDS`: how long a write waits for another process's lock (default 30)."""
    raw = query.get("timeout", ["30"])[0]
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"timeout={raw!r} in {url!r}: give seconds, e.g. timeout=30") from None
    return bounded(value, f"timeout in {url!r}", low=0.0, high=3600.0)


def _qmarks(db: sqlite3.Connection) -> retention.Exec:
    """Run retention's statements (written with %s) on SQLite."""
    return lambda sql, params: db.execute(sql.replace("%s", "?"), tuple(params))


class SQLiteStore(SQLiteEntities, SQLiteDispatch):
    def __init__(self, url: str, read_only: bool = False) -> None:
        self.url = url
        self.read_only = read_only
        self.damage: dict[str, str] = {}
        self._tx_signal = TxSignal()
        path, query = _path_of(url)
        sync = query.get("synchronous", ["full"])[0].lower()
        if sync not in _SYNC:
            raise ConfigError(f"synchronous={sync!r} in {url!r}: use full or normal")
        self.path = path
        self.synchronous = sync
        self.timeout = _timeout_of(query, url)
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            raise ConfigError(f"directory {parent!r} for SQLite store {url!r} does not exist")
        if os.path.isdir(path):
            raise ConfigError(f"SQLite store {url!r} names a directory; give a file path")
        if read_only:
            self._db = self._reader = open_read_only(path, url, self.timeout)
        else:
            self._db = self._open_for_writing()
            self._reader = self._connect()
        # A read-only handle may read a store from before the queue columns (schema v11).
        has_extra = any(r[1] == "queue" for r in self._reader.execute("PRAGMA table_info(daybook_runs)"))
        self._run_cols = RUN_ALL if has_extra else RUN_COLUMNS
        self._group = GroupCommit(self._db, WalWatch(self.path) if not read_only else None)
        self._read_lock = threading.Lock()
        ev_marks = ", ".join("?" * 12)
        self._insert_event = f"INSERT INTO daybook_events ({EVENT_COLUMNS}) VALUES ({ev_marks})"

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, isolation_level=None, timeout=self.timeout, check_same_thread=False)
        db.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
        return db

    def _open_for_writing(self) -> sqlite3.Connection:
        try:
            db = self._connect()
            mode = db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise ConfigError(f"could not switch {self.path!r} to WAL mode (got {mode})")
            db.execute(f"PRAGMA synchronous = {_SYNC[self.synchronous]}")
            migrate(db, self.url)
        except sqlite3.OperationalError as exc:
            if "column" in str(exc):
                raise ConfigError(foreign_tables(self.url, exc)) from None
            raise locked(self.path, self.timeout, exc) or ConfigError(
                f"cannot open {self.path!r} as a SQLite store: {exc}"
            ) from None
        except sqlite3.DatabaseError as exc:
            raise locked(self.path, self.timeout, exc) or ConfigError(
                f"cannot open {self.path!r} as a SQLite store: {exc}"
            ) from None
        return db

    def _write(self, fn: Callable[[sqlite3.Connection], Any], atomic: bool = False) -> Any:
        """One durable write (group commit); a lock held too long by another process is a
        StoreUnavailable that says so."""
        try:
            return self._group.write(fn, atomic)
        except sqlite3.OperationalError as exc:
            raise locked(self.path, self.timeout, exc) or exc from None

    # -- runs -------------------------------------------------------------------------------

    def create_run(self, info: RunInfo, first: Event) -> bool:
        run_sql = (
            f"INSERT INTO daybook_runs ({RUN_ALL}) VALUES ({', '.join('?' * 18)}) "
            "ON CONFLICT (run_id) DO NOTHING"
        )
        run_row, event_row = run_params(info), event_params(first)

        def write(db: sqlite3.Connection) -> bool:
            if db.execute(run_sql, run_row).rowcount == 0:
                return False
            db.execute(self._insert_event, event_row)
            return True

        created: bool = self._write(write, atomic=True)
        return created

    def get_run(self, run_id: str) -> RunInfo | None:
        row = self._read(f"SELECT {self._run_cols} FROM daybook_runs WHERE run_id = ?", (run_id,))
        return run_from_row(row[0]) if row else None

    def list_runs(self, status: str | None = None, limit: int = 100) -> list[RunInfo]:
        sql = f"SELECT {self._run_cols} FROM daybook_runs"
        args: tuple[Any, ...] = ()
        if status:
            sql += " WHERE status = ?"
            args = (status,)
        sql += " ORDER BY created_at DESC, run_id LIMIT ?"
        return runs_from_rows(self._read(sql, (*args, limit)), self.damage)

    def claim(self, run_id: str, owner: str, ttl: float, now: float, expect: str | None) -> bool:
        sql = (
            "UPDATE daybook_runs SET lease_owner = ?, lease_expires = ?, wake_at = NULL, status = CASE WHEN "
            "status IN ('pending', 'suspended', 'needs_attention', 'paused') THEN 'running' ELSE status END "
            "WHERE run_id = ? AND "
            "(lease_owner IS NULL OR lease_expires < ? OR lease_owner = ? OR lease_owner = ?)"
        )
        params = (owner, now + ttl, run_id, now, owner, expect)
        return bool(self._write(lambda db: db.execute(sql, params).rowcount == 1))

    def hold(
        self, run_id: str, owner: str, ttl: float, now: float, expect: str | None, allowed: tuple[str, ...]
    ) -> bool:
        marks = ", ".join("?" * len(allowed))
        sql = (
            "UPDATE daybook_runs SET lease_owner = ?, lease_expires = ? "
            f"WHERE run_id = ? AND status IN ({marks}) AND "
            "(lease_owner IS NULL OR lease_expires < ? OR lease_owner = ? OR lease_owner = ?)"
        )
        params = (owner, now + ttl, run_id, *allowed, now, owner, expect)
        return bool(self._write(lambda db: db.execute(sql, params).rowcount == 1))

    def claim_next(self, owner: str, ttl: float, now: float, version: str | None = None) -> str | None:
        sql = (
            "UPDATE daybook_runs SET lease_owner = ?, lease_expires = ?, wake_at = NULL, status = 'running' "
            "WHERE run_id = ("
            "SELECT run_id FROM daybook_runs WHERE ((status IN ('pending', 'running') AND "
            "(lease_owner IS NULL OR lease_expires < ?) AND (wake_at IS NULL OR wake_at <= ?)) "
            "OR (status = 'suspended' AND "
            "wake_at <= ? AND (lease_owner IS NULL OR lease_expires < ?))) "
            # Queued runs are taken by `claim_queued`, under their queue's limits.
            "AND (? IS NULL OR code_version = ?) AND queue IS NULL "
            "ORDER BY created_at LIMIT 1) RETURNING run_id"
        )
        params = (owner, now + ttl, now, now, now, now, version, version)
        row = self._write(lambda db: db.execute(sql, params).fetchone())
        return None if row is None else str(row[0])

    def renew(self, run_id: str, owner: str, ttl: float, now: float) -> bool:
        sql = "UPDATE daybook_runs SET lease_expires = ? WHERE run_id = ? AND lease_owner = ?"
        params = (now + ttl, run_id, owner)
        return bool(self._write(lambda db: db.execute(sql, params).rowcount == 1))

    def release(self, run_id: str, owner: str) -> None:
        sql = (
            "UPDATE daybook_runs SET lease_owner = NULL, lease_expires = NULL "
            "WHERE run_id = ? AND lease_owner = ?"
        )
        self._write(lambda db: db.execute(sql, (run_id, owner)))

    # -- journal ----------------------------------------------------------------------------

    def append(self, event: Event) -> None:
        params = event_params(event)
        try:
            self._write(lambda db: db.execute(self._insert_event, params))
        except sqlite3.IntegrityError as exc:
            raise _conflict(event, str(exc)) from None

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
        event_row = event_params(event) if event is not None else None
        update = (
            "UPDATE daybook_runs SET status = ?, result = ?, error = ?, updated_at = ?, "
            "lease_owner = NULL, lease_expires = NULL, wake_at = NULL WHERE run_id = ? AND "
            # A cancelled run stays cancelled: an owner that had not noticed records nothing.
            "(lease_owner = ? OR lease_owner IS NULL) AND status NOT IN ('cancelled', 'expired')"
        )
        params = (status, dumps(result, f"{what} result"), dumps(error, f"{what} error"), now, run_id, owner)

        def write(db: sqlite3.Connection) -> None:
            if db.execute(update, params).rowcount == 0:
                raise _lost(run_id)
            if event_row is not None:
                db.execute(self._insert_event, event_row)

        try:
            self._write(write, atomic=True)
        except sqlite3.IntegrityError as exc:
            assert event is not None
            raise _conflict(event, str(exc)) from None

    def transition(
        self, run_id: str, allowed: tuple[str, ...], status: str, error: object, event: Event, now: float
    ) -> bool:
        marks = ", ".join("?" * len(allowed))
        update = (
            "UPDATE daybook_runs SET status = ?, error = ?, updated_at = ?, lease_owner = NULL, "
            "lease_expires = NULL, wake_at = CASE WHEN ? = 'pending' THEN ? ELSE NULL END "
            f"WHERE run_id = ? AND status IN ({marks})"
        )
        params = (status, dumps(error, f"run {run_id!r} error"), now, status, now, run_id, *allowed)
        event_row = event_params(event)

        def write(db: sqlite3.Connection) -> bool:
            if db.execute(update, params).rowcount == 0:
                return False
            db.execute(self._insert_event, event_row)
            return True

        try:
            return bool(self._write(write, atomic=True))
        except sqlite3.IntegrityError as exc:
            raise _conflict(event, str(exc)) from None

    def defer(self, run_id: str, owner: str, wake_at: float, error: str, now: float) -> None:
        sql = (
            "UPDATE daybook_runs SET wake_at = ?, error = ?, updated_at = ?, lease_owner = NULL, "
            "lease_expires = NULL WHERE run_id = ? AND lease_owner = ?"
        )
        params = (wake_at, error, now, run_id, owner)
        self._write(lambda db: db.execute(sql, params))

    def suspend(self, run_id: str, owner: str, wake_at: float | None, now: float) -> None:
        sql = (
            # A signal that arrived while the run executed already set wake_at: keep the earlier.
            "UPDATE daybook_runs SET status = 'suspended', wake_at = CASE WHEN wake_at IS NOT NULL "
            "AND (? IS NULL OR wake_at < ?) THEN wake_at ELSE ? END, updated_at = ?, "
            "lease_owner = NULL, lease_expires = NULL WHERE run_id = ? AND lease_owner = ?"
        )
        params = (wake_at, wake_at, wake_at, now, run_id, owner)
        self._write(lambda db: db.execute(sql, params))

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
        def write(db: sqlite3.Connection) -> int | None:
            status = db.execute("SELECT status FROM daybook_runs WHERE run_id = ?", (run_id,)).fetchone()
            if status is None or (status[0] in TERMINAL and not any_status):
                return None
            cur = db.execute(
                "INSERT INTO daybook_inbox (run_id, name, payload, sender, at) VALUES (?, ?, ?, ?, ?)",
                (run_id, name, payload, sender, now),
            )
            db.execute(
                # Also for a run executing now: if it suspends before reading this signal, the
                # wake time survives the suspend and a worker picks the run up again.
                "UPDATE daybook_runs SET wake_at = ? WHERE run_id = ? AND ? AND "
                "status NOT IN ('completed', 'failed', 'cancelled', 'expired')",
                (now, run_id, wake),
            )
            return cur.lastrowid

        result: int | None = self._write(write, atomic=True)
        return result

    def inbox(self, run_id: str) -> list[tuple[int, str, str, str, float]]:
        rows = self._read(
            "SELECT id, name, payload, sender, at FROM daybook_inbox WHERE run_id = ? ORDER BY id",
            (run_id,),
        )
        return [(int(r[0]), r[1], r[2], r[3], float(r[4])) for r in rows]

    def set_approver(self, name: str, token_hash: str, now: float) -> None:
        check_text(name, "the approver name")  # the same rule on both stores
        sql = (
            "INSERT INTO daybook_approvers (name, token_hash, created_at) VALUES (?, ?, ?) "
            "ON CONFLICT (name) DO UPDATE SET token_hash = excluded.token_hash, "
            "created_at = excluded.created_at"
        )
        self._write(lambda db: db.execute(sql, (name, token_hash, now)))

    def approvers(self) -> dict[str, str]:
        return {r[0]: r[1] for r in self._read("SELECT name, token_hash FROM daybook_approvers", ())}

    def load(self, run_id: str) -> list[Event]:
        rows = self._read(
            f"SELECT {EVENT_COLUMNS} FROM daybook_events WHERE run_id = ? ORDER BY seq", (run_id,)
        )
        return events_from_rows(rows)

    def stage(self, txid: str, collection: str, record_id: str, data: str, now: float) -> None:
        sql = (
            "INSERT INTO daybook_staging (txid, collection, record_id, data, at) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (txid, collection, record_id) DO UPDATE SET data = excluded.data"
        )
        self._write(lambda db: db.execute(sql, (txid, collection, record_id, data, now)))

    def commit_tx(
        self, txid: str, commit_id: str, key: str | None, message: str, author: str, now: float
    ) -> tuple[str, list[list[str]]]:
        def write(db: sqlite3.Connection) -> tuple[str, list[list[str]]]:
            if key is not None:
                row = db.execute(
                    "SELECT commit_id, records FROM daybook_commits WHERE key = ?", (key,)
                ).fetchone()
                if row is not None:
                    db.execute("DELETE FROM daybook_staging WHERE txid = ?", (txid,))
                    return str(row[0]), json.loads(row[1])
            staged = db.execute(
                "SELECT collection, record_id, data FROM daybook_staging WHERE txid = ? "
                "ORDER BY collection, record_id",
                (txid,),
            ).fetchall()
            records = [[c, r] for c, r, _ in staged]
            db.execute(
                "INSERT INTO daybook_commits (commit_id, key, message, author, at, records) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (commit_id, key, message, author, now, json.dumps(records)),
            )
            db.executemany(
                "INSERT INTO daybook_records (collection, record_id, data, commit_id) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (collection, record_id) DO UPDATE SET data = excluded.data, "
                "commit_id = excluded.commit_id",
                [(c, r, d, commit_id) for c, r, d in staged],
            )
            db.execute("DELETE FROM daybook_staging WHERE txid = ?", (txid,))
            return commit_id, records

        result: tuple[str, list[list[str]]] = self._write(write, atomic=True)
        return result

    def abandon_tx(self, txid: str) -> None:
        self._write(lambda db: db.execute("DELETE FROM daybook_staging WHERE txid = ?", (txid,)))

    def staging(self) -> list[tuple[str, str, str, float]]:
        rows = self._read("SELECT txid, collection, record_id, at FROM daybook_staging ORDER BY at", ())
        return [(r[0], r[1], r[2], float(r[3])) for r in rows]

    def get_record(self, collection: str, record_id: str) -> tuple[str, str] | None:
        rows = self._read(
            "SELECT data, commit_id FROM daybook_records WHERE collection = ? AND record_id = ?",
            (collection, record_id),
        )
        return (rows[0][0], rows[0][1]) if rows else None

    def commits(self) -> list[tuple[str, str | None, str, str, float, str]]:
        rows = self._read(
            "SELECT commit_id, key, message, author, at, records FROM daybook_commits ORDER BY at", ()
        )
        return [(r[0], r[1], r[2], r[3], float(r[4]), r[5]) for r in rows]

    def events_of_kind(self, kind: str) -> list[Event]:
        rows = self._read(
            f"SELECT {EVENT_COLUMNS} FROM daybook_events WHERE kind = ? ORDER BY run_id, seq", (kind,)
        )
        return events_skipping(rows, self.damage)

    def find_intent(self, key: str) -> Event | None:
        # Served by the partial unique index on intent keys.
        rows = self._read(
            f"SELECT {EVENT_COLUMNS} FROM daybook_events WHERE kind = 'intent' AND key = ?", (key,)
        )
        return events_from_rows(rows)[0] if rows else None

    def open_effects(self, skip_damaged: bool = False) -> list[Event]:
        rows = self._read(
            f"SELECT {', '.join('e.' + c.strip() for c in EVENT_COLUMNS.split(','))} "
            "FROM daybook_events e JOIN (SELECT run_id, step, MAX(seq) AS seq FROM daybook_events "
            "WHERE kind IN ('intent', 'attempt', 'outcome') GROUP BY run_id, step) last "
            "ON e.run_id = last.run_id AND e.seq = last.seq "
            "WHERE e.kind != 'outcome' OR e.status IN ('unknown', 'failed') ORDER BY e.at",
            (),
        )
        events = events_skipping(rows, self.damage) if skip_damaged else list(map(event_from_row, rows))
        return [e for e in events if not settles(e)]

    # -- integrity ----------------------------------------------------------------------------

    # -- Atomix transactions (daybook.tx; what each does: the Store protocol) ------------------

    def tx_begin(
        self, tx_id: str, run_id: str, scopes: str, attempt: int, retries: int, event: Event, now: float
    ) -> int:
        insert = f"INSERT INTO daybook_transactions ({TX_COLUMNS}) VALUES (?, ?, ?, ?, 'open', ?, ?, ?, ?)"

        def write(db: sqlite3.Connection) -> int:
            epoch = int(db.execute("UPDATE daybook_epochs SET last = last + 1 RETURNING last").fetchone()[0])
            db.execute(insert, (tx_id, run_id, epoch, scopes, attempt, retries, now, now))
            event.data["epoch"] = epoch
            db.execute(self._insert_event, event_params(event))
            return epoch

        return int(self._tx_write(write, event))

    def tx_mark(self, tx_id: str, status: str, event: Event, now: float) -> bool:
        def write(db: sqlite3.Connection) -> bool:
            if db.execute(mark_sql("?"), (status, now, tx_id)).rowcount == 0:
                return False
            db.execute(self._insert_event, event_params(event))
            return True

        changed = bool(self._tx_write(write, event))
        if status in TX_ENDED:
            self._tx_signal.bump()  # this handle's waiters look again at once
        return changed

    def tx_signal(self) -> TxSignal:
        return self._tx_signal

    def _tx_write(self, write: Callable[[sqlite3.Connection], Any], event: Event) -> Any:
        try:
            return self._write(write, atomic=True)  # the header and the journal row together
        except sqlite3.IntegrityError as exc:
            raise _conflict(event, str(exc)) from None

    def tx_rows(
        self, run_id: str | None = None, open_only: bool = False, before: int | None = None
    ) -> list[TxRow]:
        sql, params = select_sql("?", run_id, open_only, before)
        return as_rows(self._read(sql, tuple(params)))

    def raw_rows(self, table: str, run_id: str | None = None) -> list[tuple[Any, ...]]:
        sql = f"SELECT {RAW_TABLES[table]} FROM daybook_{table}"
        if run_id is not None:
            sql += " WHERE run_id = ?"
        key = RAW_TABLES[table].split(",")[0]
        sql += " ORDER BY run_id, seq" if table == "events" else f" ORDER BY {key}"
        return [tuple(r) for r in self._read(sql, () if run_id is None else (run_id,))]

    def journal_run_ids(self) -> list[str]:
        return [r[0] for r in self._read("SELECT DISTINCT run_id FROM daybook_events ORDER BY run_id", ())]

    def quick_check(self) -> list[str]:
        found = [str(r[0]) for r in self._read("PRAGMA quick_check", ())]
        return [] if found == ["ok"] else found

    def _read(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        # Reads use their own connection: they must see only committed rows, never a batch
        # that another thread's leader has open.
        with self._read_lock:
            try:
                return self._reader.execute(sql, params).fetchall()
            except UnicodeEncodeError as exc:
                raise unencodable(exc, "SQLite") from None
            except sqlite3.OperationalError as exc:
                raise locked(self.path, self.timeout, exc) or exc from None

    def gc(
        self, cutoff: float, now: float, who: str, gc_id: str, key: bytes, dry_run: bool
    ) -> dict[str, Any]:
        """Erase the payloads of finished runs updated before `cutoff` (store/retention.py)."""

        def work(db: sqlite3.Connection) -> dict[str, Any]:
            # Freed and overwritten content is zeroed, so the erased text leaves the file too.
            db.execute("PRAGMA secure_delete = ON")
            return retention.collect(
                _qmarks(db), cutoff=cutoff, now=now, who=who, gc_id=gc_id, key=key, dry_run=dry_run
            )

        if dry_run:
            with self._read_lock:
                return work(self._reader)
        done: dict[str, Any] = self._write(work, atomic=True)
        # The write-ahead log still holds the pages as they were: fold it in and empty it.
        with contextlib.suppress(sqlite3.Error), self._read_lock:
            self._reader.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return done

    def gc_log(self) -> list[dict[str, Any]]:
        with self._read_lock:
            return retention.history(_qmarks(self._reader))

    def meta_value(self, key: str, default: str) -> str:
        """The store setting `key`, set to `default` first if it has none (read-only: only read)."""
        if not self.read_only:
            sql = "INSERT INTO daybook_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING"
            self._write(lambda db: db.execute(sql, (key, default)))
        row = self._read("SELECT value FROM daybook_meta WHERE key = ?", (key,))
        return str(row[0][0]) if row else default

    def meta_items(self, prefix: str) -> dict[str, str]:
        sql = "SELECT key, value FROM daybook_meta WHERE substr(key, 1, ?) = ?"
        rows = self._read(sql, (len(prefix), prefix))
        return {str(k): str(v) for k, v in rows}

    def current_role(self) -> str | None:
        return None  # no roles: whoever can write the file is the owner

    def close(self) -> None:
        self._db.close()
        if self._reader is not self._db:
            self._reader.close()

    def now(self) -> float:
        return time.time()


def _lost(run_id: str) -> LeaseLost:
    return LeaseLost(
        f"run {run_id!r}: another process took the run over before this one could record how "
        "it ended; nothing was recorded here"
    )


def _conflict(event: Event, message: str) -> Exception:
    return conflict_error(event, "daybook_events.key" in message)
