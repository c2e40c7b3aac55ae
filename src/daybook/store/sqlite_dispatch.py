"""Queues, schedules and run search on SQLite (`daybook.dispatch`; the SQL is `dispatch_sql`).
A mixin of `SQLiteStore`. A queued claim is one UPDATE under the database's write lock, so the
limits it checks cannot change before it commits, whichever process asks."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..records import Event, RunInfo
from . import dispatch_sql as q
from .dispatch_sql import current
from .rows import conflict_error, event_params, runs_from_rows

P = q.SQLITE


class SQLiteDispatch:
    """Queue, schedule and search methods over the store's write (group commit) and read paths."""

    if TYPE_CHECKING:  # given by SQLiteStore
        damage: dict[str, str]
        url: str
        _insert_event: str
        _run_cols: str

        def _write(self, fn: Callable[[sqlite3.Connection], Any], atomic: bool = False) -> Any: ...

        def _read(self, sql: str, params: Any) -> list[Any]: ...

    # -- queues ---------------------------------------------------------------------------------

    def ensure_queue(self, name: str, now: float) -> None:
        sql = q.ensure_queue(P)
        self._write(lambda db: db.execute(sql, {"name": name, "now": now}))

    def declare_queue(
        self,
        name: str,
        concurrency: int | None,
        per_worker: int | None,
        rate_limit: int | None,
        rate_period: float | None,
        now: float,
    ) -> None:
        sql = q.declare_queue(P)
        params = {
            "name": name, "concurrency": concurrency, "per_worker": per_worker,
            "rate_limit": rate_limit, "rate_period": rate_period, "now": now,
        }  # fmt: skip
        self._write(lambda db: db.execute(sql, params))

    def queue_rows(self, now: float) -> list[tuple[Any, ...]]:
        current(self._run_cols, self.url)
        return [tuple(r) for r in self._read(q.queue_rows(P), {"now": now})]

    def queue_names(self) -> list[str]:
        current(self._run_cols, self.url)
        return [str(r[0]) for r in self._read("SELECT name FROM daybook_queues ORDER BY name", ())]

    def claim_queued(
        self, queue: str, owner: str, ttl: float, now: float, version: str | None = None
    ) -> str | None:
        sql = q.claim_queued(P)
        params = {
            "queue": queue, "owner": owner, "until": now + ttl, "now": now, "version": version,
            "worker": owner.rsplit(":", 1)[0] + ":",
        }  # fmt: skip
        row = self._write(lambda db: db.execute(sql, params).fetchone())
        return None if row is None else str(row[0])

    # -- search -----------------------------------------------------------------------------------

    def search_runs(
        self, filters: dict[str, Any], limit: int, after: tuple[float, str] | None = None
    ) -> list[RunInfo]:
        current(self._run_cols, self.url)
        sql, params = q.search(P, filters, after)
        return runs_from_rows(self._read(sql, {**params, "limit": limit}), self.damage)

    def set_attributes(self, event: Event, attributes: dict[str, Any]) -> None:
        """Append `event` (the journal row that sets them) and index `attributes` with it."""
        row = event_params(event)
        upsert = (
            "INSERT INTO daybook_attributes (run_id, name, value) VALUES (?, ?, ?) "
            "ON CONFLICT (run_id, name) DO UPDATE SET value = excluded.value"
        )
        values = [(event.run_id, k, q.attr_text(v)) for k, v in attributes.items()]

        def write(db: sqlite3.Connection) -> None:
            db.execute(self._insert_event, row)
            db.executemany(upsert, values)

        try:
            self._write(write, atomic=True)
        except sqlite3.IntegrityError as exc:
            raise conflict_error(event, "daybook_events.key" in str(exc)) from None

    def attributes(self, run_id: str) -> dict[str, Any]:
        current(self._run_cols, self.url)
        rows = self._read(
            "SELECT name, value FROM daybook_attributes WHERE run_id = ? ORDER BY name", (run_id,)
        )
        return {str(r[0]): json.loads(r[1]) for r in rows}

    # -- schedules --------------------------------------------------------------------------------

    def put_schedule(self, row: dict[str, Any]) -> None:
        sql = q.put_schedule(P)
        self._write(lambda db: db.execute(sql, row))

    def schedule_rows(self) -> list[dict[str, Any]]:
        current(self._run_cols, self.url)
        names = [c.strip() for c in q.SCHEDULE_COLUMNS.split(",")]
        rows = self._read(f"SELECT {q.SCHEDULE_COLUMNS} FROM daybook_schedules ORDER BY name", ())
        return [dict(zip(names, r, strict=True)) for r in rows]

    def drop_schedule(self, name: str) -> bool:
        sql = "DELETE FROM daybook_schedules WHERE name = ?"
        return bool(self._write(lambda db: db.execute(sql, (name,)).rowcount == 1))

    def pause_schedule(self, name: str, paused: bool, now: float) -> bool:
        sql = q.pause_schedule(P)
        params = {"name": name, "paused": int(paused), "now": now}
        return bool(self._write(lambda db: db.execute(sql, params).rowcount == 1))

    def advance_schedule(self, name: str, fired: float) -> None:
        sql = q.advance_schedule(P)
        self._write(lambda db: db.execute(sql, {"name": name, "fired": fired}))
