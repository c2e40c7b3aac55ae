"""Queues, schedules and run search on PostgreSQL (`daybook.dispatch`; the SQL is
`dispatch_sql`). A mixin of `PostgresStore`. A queued claim runs in a transaction that first
locks the queue's row: claims on one queue queue behind each other for a moment, and each then
counts (in a snapshot taken after the lock) what the one before it committed, so the limits
hold across processes and hosts; candidate runs are taken with SKIP LOCKED."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..records import Event, RunInfo
from . import dispatch_sql as q
from .dispatch_sql import current
from .rows import EVENT_COLUMNS, conflict_error, event_params, runs_from_rows

if TYPE_CHECKING:
    from .postgres_link import Link

P = q.POSTGRES

try:
    import psycopg
except ImportError:  # pragma: no cover - the store refuses to open without it
    psycopg = None  # type: ignore[assignment]


class PostgresDispatch:
    """Queue, schedule and search methods over the store's connection (`_db`)."""

    if TYPE_CHECKING:  # given by PostgresStore
        _db: Link
        damage: dict[str, str]
        url: str
        _run_cols: str

    def _has_queue_column(self) -> bool:
        row = self._db.execute(
            "SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = 'daybook_runs' AND column_name = 'queue'"
        ).fetchone()
        return row is not None

    # -- queues ---------------------------------------------------------------------------------

    def ensure_queue(self, name: str, now: float) -> None:
        self._db.execute(q.ensure_queue(P), {"name": name, "now": now})

    def declare_queue(
        self,
        name: str,
        concurrency: int | None,
        per_worker: int | None,
        rate_limit: int | None,
        rate_period: float | None,
        now: float,
    ) -> None:
        params = {
            "name": name, "concurrency": concurrency, "per_worker": per_worker,
            "rate_limit": rate_limit, "rate_period": rate_period, "now": now,
        }  # fmt: skip
        self._db.execute(q.declare_queue(P), params)

    def queue_rows(self, now: float) -> list[tuple[Any, ...]]:
        current(self._run_cols, self.url)
        return [tuple(r) for r in self._db.execute(q.queue_rows(P), {"now": now}).fetchall()]

    def queue_names(self) -> list[str]:
        current(self._run_cols, self.url)
        return [str(r[0]) for r in self._db.execute("SELECT name FROM daybook_queues ORDER BY name")]

    def claim_queued(
        self, queue: str, owner: str, ttl: float, now: float, version: str | None = None
    ) -> str | None:
        params = {
            "queue": queue, "owner": owner, "until": now + ttl, "now": now, "version": version,
            "worker": owner.rsplit(":", 1)[0] + ":",
        }  # fmt: skip
        with self._db.transaction() as db:
            # The queue's row lock: held to the commit, so the next claim on this queue counts
            # this one (Read Committed gives the claim a snapshot taken after the lock). Both
            # statements go in one pipeline: one round trip while the lock is held.
            with db.pipeline():
                db.execute("SELECT 1 FROM daybook_queues WHERE name = %s FOR UPDATE", (queue,))
                cur = db.execute(q.claim_queued(P, " FOR UPDATE OF r SKIP LOCKED"), params)
            row = cur.fetchone()
        return None if row is None else str(row[0])

    # -- search -----------------------------------------------------------------------------------

    def search_runs(
        self, filters: dict[str, Any], limit: int, after: tuple[float, str] | None = None
    ) -> list[RunInfo]:
        current(self._run_cols, self.url)
        sql, params = q.search(P, filters, after)
        rows = self._db.execute(sql, {**params, "limit": limit}).fetchall()
        return runs_from_rows(rows, self.damage, parsed=True)

    def set_attributes(self, event: Event, attributes: dict[str, Any]) -> None:
        """Append `event` (the journal row that sets them) and index `attributes` with it, in
        one statement."""
        marks = ", ".join(["%s"] * 9 + ["%s::json", "%s", "%s"])
        sql = (
            f"WITH e AS (INSERT INTO daybook_events ({EVENT_COLUMNS}) VALUES ({marks}) RETURNING run_id) "
            "INSERT INTO daybook_attributes (run_id, name, value) "
            "SELECT e.run_id, x.name, x.value FROM e, unnest(%s::text[], %s::text[]) AS x(name, value) "
            "ON CONFLICT (run_id, name) DO UPDATE SET value = excluded.value"
        )
        names = list(attributes)
        values = [q.attr_text(attributes[k]) for k in names]
        try:
            self._db.execute(sql, (*event_params(event), names, values), retry=False)
        except psycopg.errors.UniqueViolation as exc:
            constraint = getattr(getattr(exc, "diag", None), "constraint_name", "") or ""
            raise conflict_error(event, constraint == "daybook_events_key") from None

    def attributes(self, run_id: str) -> dict[str, Any]:
        current(self._run_cols, self.url)
        rows = self._db.execute(
            "SELECT name, value FROM daybook_attributes WHERE run_id = %s ORDER BY name", (run_id,)
        ).fetchall()
        return {str(r[0]): json.loads(r[1]) for r in rows}

    # -- schedules --------------------------------------------------------------------------------

    def put_schedule(self, row: dict[str, Any]) -> None:
        self._db.execute(q.put_schedule(P), row)

    def schedule_rows(self) -> list[dict[str, Any]]:
        current(self._run_cols, self.url)
        names = [c.strip() for c in q.SCHEDULE_COLUMNS.split(",")]
        rows = self._db.execute(
            f"SELECT {q.SCHEDULE_COLUMNS} FROM daybook_schedules ORDER BY name"
        ).fetchall()
        return [dict(zip(names, r, strict=True)) for r in rows]

    def drop_schedule(self, name: str) -> bool:
        cur = self._db.execute("DELETE FROM daybook_schedules WHERE name = %s", (name,))
        return cur.rowcount == 1

    def pause_schedule(self, name: str, paused: bool, now: float) -> bool:
        cur = self._db.execute(q.pause_schedule(P), {"name": name, "paused": int(paused), "now": now})
        return cur.rowcount == 1

    def advance_schedule(self, name: str, fired: float) -> None:
        self._db.execute(q.advance_schedule(P), {"name": name, "fired": fired})
