"""Three parts of `SqlStore`, each statement written once (see `dialect`): coordination entities
(`daybook.entity`: leases with a log, each write a compare-and-set committed with its log
entry), record commits (`book.transaction`: staged records made visible with one audit row),
and dispatch (`daybook.dispatch`: queues, schedules, run search; the SQL in `dispatch_sql`).
Mixins of `SqlStore`, kept apart so each module stays one noun."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..records import Event, RunInfo, dumps
from . import dispatch_sql as q
from .dispatch_sql import current
from .rows import INSERT_EVENT, event_params, runs_from_rows

if TYPE_CHECKING:
    from .dialect import Db, Dialect, Then

P = q.POSTGRES  # named marks; the dialect renders them
# An entity's log entry, at the time its lease row's write took effect (the chain's `g`).
_ENTITY_DATA_LOG = (
    "INSERT INTO daybook_entity_log (name, at, agent, action, data) "
    "SELECT %s, g.updated_at, %s, %s, %s::json FROM g RETURNING id"
)
# A claim's entry: its data's text completed with the deadline the claim set, written with every
# digit it has (the dialect's `real_text`), so the log's deadline is the lease's to the last bit.
_ENTITY_LOG = _ENTITY_DATA_LOG.replace("%s::json", "(CAST(%s AS TEXT) || {deadline} || '}')::json")
_HELD = "name = %s AND holder = %s AND deadline >= {g}(%s, updated_at)"


class _Part:
    if TYPE_CHECKING:  # given by SqlStore
        dialect: Dialect
        damage: dict[str, str]
        url: str
        _run_cols: str
        # The dialect's own `read` and `write`, bound once (the journal's hot path).
        _read: Callable[..., list[Any]]
        _write: Callable[..., Any]

        def _chained(
            self,
            event: Event | None,
            guard: str,
            params: Any,
            names: str,
            then: Sequence[Then],
            retry: bool = False,
        ) -> Any: ...

        def _changed(self, sql: str, params: Any) -> bool: ...


class SqlEntities(_Part):
    def entity_claim(self, name: str, agent: str, ttl: float, now: float) -> bool:
        # One upsert is the compare-and-set: it writes only if the lease is free, expired or
        # already the agent's (the conflicting row is locked, so racing claims queue and each
        # re-checks). A claim that waited behind a later entry takes effect at that entry's
        # time, so the log's times never go backwards (`updated_at`: the last entry's time).
        most = self.dialect.greatest
        upsert = (
            "INSERT INTO daybook_entities AS e (name, holder, deadline, updated_at) "
            "VALUES (%s, %s, %s + %s, %s) "
            "ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, "
            f"deadline = {most}(%s, e.updated_at) + %s, updated_at = {most}(%s, e.updated_at) "
            f"WHERE e.holder IS NULL OR e.deadline < {most}(%s, e.updated_at) "
            "OR e.holder = excluded.holder RETURNING updated_at, deadline"
        )
        # The entry's data is {"ttl": ttl, "deadline": the deadline the upsert set}, its JSON
        # text completed by the statement.
        ttl_text = dumps({"ttl": ttl}, f"claim of entity {name!r}")[:-1]
        entry = _ENTITY_LOG.replace("{deadline}", self.dialect.real_text.format("g.deadline"))
        log = (entry, (name, agent, "claim", f'{ttl_text},"deadline":'))
        params = (name, agent, now, ttl, now, now, ttl, now, now)
        # Never retried: a log entry written twice.
        return self._chained(None, upsert, params, "updated_at, deadline", [log]) is not None

    def entity_release(self, name: str, agent: str, now: float) -> bool:
        most = self.dialect.greatest
        update = (
            f"UPDATE daybook_entities SET holder = NULL, deadline = NULL, updated_at = {most}(%s, "
            f"updated_at) WHERE {_HELD.format(g=most)} RETURNING updated_at"
        )
        return self._logged(name, agent, update, now, "release", "null")

    def entity_record(self, name: str, agent: str, action: str, data_json: str, now: float) -> bool:
        # The lease check and the append commit together: nothing is written unless it holds
        # (the UPDATE locks the entity, so a racing claim waits for it, or it for the claim).
        most = self.dialect.greatest
        update = (
            f"UPDATE daybook_entities SET updated_at = {most}(%s, updated_at) "
            f"WHERE {_HELD.format(g=most)} RETURNING updated_at"
        )
        return self._logged(name, agent, update, now, action, data_json)

    def _logged(self, name: str, agent: str, update: str, now: float, action: str, data: str) -> bool:
        log = (_ENTITY_DATA_LOG, (name, agent, action, data))
        return self._chained(None, update, (now, name, agent, now), "updated_at", [log]) is not None

    def entity_view(
        self, name: str
    ) -> tuple[str | None, float | None, list[tuple[int, float, str, str, str]]] | None:
        # One statement, so the lease and the log come from the same snapshot.
        rows = self._read(
            "SELECT e.holder, e.deadline, l.id, l.at, l.agent, l.action, l.data "
            "FROM daybook_entities e LEFT JOIN daybook_entity_log l ON l.name = e.name "
            "WHERE e.name = %s ORDER BY l.id",
            (name,),
        )
        if not rows:
            return None
        holder, deadline = rows[0][0], rows[0][1]
        log = [(int(r[2]), float(r[3]), str(r[4]), str(r[5]), str(r[6])) for r in rows if r[2] is not None]
        return holder, None if deadline is None else float(deadline), log

    def entity_list(self) -> list[tuple[str, str | None, float | None]]:
        rows = self._read("SELECT name, holder, deadline FROM daybook_entities ORDER BY name")
        return [(str(r[0]), r[1], None if r[2] is None else float(r[2])) for r in rows]


class SqlCommits(_Part):
    def stage(self, txid: str, collection: str, record_id: str, data: str, now: float) -> None:
        sql = (
            "INSERT INTO daybook_staging (txid, collection, record_id, data, at) "
            "VALUES (%s, %s, %s, %s::json, %s) "
            "ON CONFLICT (txid, collection, record_id) DO UPDATE SET data = excluded.data"
        )
        self._changed(sql, (txid, collection, record_id, data, now))

    def commit_tx(
        self, txid: str, commit_id: str, key: str | None, message: str, author: str, now: float
    ) -> tuple[str, list[list[str]]]:
        def write(db: Db) -> tuple[str, list[list[str]]]:
            if key is not None:
                sql = "SELECT commit_id, records FROM daybook_commits WHERE key = %s"
                row = db.execute(sql, (key,)).fetchone()
                if row is not None:
                    db.execute("DELETE FROM daybook_staging WHERE txid = %s", (txid,))
                    return str(row[0]), json.loads(row[1])
            staged = db.execute(
                "SELECT collection, record_id, data FROM daybook_staging WHERE txid = %s "
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

        result: tuple[str, list[list[str]]] = self._write(write, atomic=True, retry=False)
        return result

    def abandon_tx(self, txid: str) -> None:
        self._changed("DELETE FROM daybook_staging WHERE txid = %s", (txid,))

    def staging(self) -> list[tuple[str, str, str, float]]:
        rows = self._read("SELECT txid, collection, record_id, at FROM daybook_staging ORDER BY at")
        return [(r[0], r[1], r[2], float(r[3])) for r in rows]

    def get_record(self, collection: str, record_id: str) -> tuple[str, str] | None:
        sql = "SELECT data, commit_id FROM daybook_records WHERE collection = %s AND record_id = %s"
        rows = self._read(sql, (collection, record_id))
        return (rows[0][0], rows[0][1]) if rows else None

    def commits(self) -> list[tuple[str, str | None, str, str, float, str]]:
        rows = self._read(
            "SELECT commit_id, key, message, author, at, records FROM daybook_commits ORDER BY at"
        )
        return [(r[0], r[1], r[2], r[3], float(r[4]), r[5]) for r in rows]


class SqlDispatch(_Part):
    def ensure_queue(self, name: str, now: float) -> None:
        self._changed(q.ensure_queue(P), {"name": name, "now": now})

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
        self._changed(q.declare_queue(P), params)

    def queue_rows(self, now: float) -> list[tuple[Any, ...]]:
        current(self._run_cols, self.url)
        return [tuple(r) for r in self._read(q.queue_rows(P), {"now": now})]

    def queue_names(self) -> list[str]:
        current(self._run_cols, self.url)
        return [str(r[0]) for r in self._read("SELECT name FROM daybook_queues ORDER BY name")]

    def claim_queued(
        self, queue: str, owner: str, ttl: float, now: float, version: str | None = None
    ) -> str | None:
        sql = q.claim_queued(P, self.dialect.skip_locked("r"))
        params = {
            "queue": queue, "owner": owner, "until": now + ttl, "now": now, "version": version,
            "worker": owner.rsplit(":", 1)[0] + ":",
        }  # fmt: skip
        row = self._write(lambda db: self.dialect.claim_in_queue(db, queue, sql, params), atomic=True)
        return None if row is None else str(row[0])

    def search_runs(
        self, filters: dict[str, Any], limit: int, after: tuple[float, str] | None = None
    ) -> list[RunInfo]:
        current(self._run_cols, self.url)
        sql, params = q.search(P, filters, after)
        return runs_from_rows(self._read(sql, {**params, "limit": limit}), self.damage)

    def set_attributes(self, event: Event, attributes: dict[str, Any]) -> None:
        """Append `event` (the journal row that sets them) and index `attributes` with it."""
        then: list[Then] = []
        if attributes:
            rows = ", ".join(["(%s, %s)"] * len(attributes))
            upsert = (
                "INSERT INTO daybook_attributes (run_id, name, value) SELECT g.run_id, a.column1, "
                f"a.column2 FROM g, (VALUES {rows}) AS a WHERE true "  # WHERE: SQLite's upsert parse
                "ON CONFLICT (run_id, name) DO UPDATE SET value = excluded.value RETURNING 1"
            )
            then.append((upsert, [x for k, v in attributes.items() for x in (k, q.attr_text(v))]))
        self._chained(event, INSERT_EVENT + " RETURNING run_id", event_params(event), "run_id", then)

    def attributes(self, run_id: str) -> dict[str, Any]:
        current(self._run_cols, self.url)
        rows = self._read(
            "SELECT name, value FROM daybook_attributes WHERE run_id = %s ORDER BY name", (run_id,)
        )
        return {str(r[0]): json.loads(r[1]) for r in rows}

    def put_schedule(self, row: dict[str, Any]) -> None:
        self._changed(q.put_schedule(P), row)

    def schedule_rows(self) -> list[dict[str, Any]]:
        current(self._run_cols, self.url)
        names = [c.strip() for c in q.SCHEDULE_COLUMNS.split(",")]
        rows = self._read(f"SELECT {q.SCHEDULE_COLUMNS} FROM daybook_schedules ORDER BY name")
        return [dict(zip(names, r, strict=True)) for r in rows]

    def drop_schedule(self, name: str) -> bool:
        return self._changed("DELETE FROM daybook_schedules WHERE name = %s", (name,))

    def pause_schedule(self, name: str, paused: bool, now: float) -> bool:
        return self._changed(q.pause_schedule(P), {"name": name, "paused": int(paused), "now": now})

    def advance_schedule(self, name: str, fired: float) -> None:
        self._changed(q.advance_schedule(P), {"name": name, "fired": fired})
