"""The coordination entities on SQLite (`daybook.entity`): leases with a log, each write one
compare-and-set that commits with its log entry. A mixin of `SQLiteStore`, kept apart so each
module stays one noun."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..records import dumps


class SQLiteEntities:
    """Entity methods over the store's write (group commit) and read paths."""

    if TYPE_CHECKING:  # given by SQLiteStore

        def _write(self, fn: Callable[[sqlite3.Connection], Any], atomic: bool = False) -> Any: ...

        def _read(self, sql: str, params: tuple[Any, ...]) -> list[Any]: ...

    def entity_claim(self, name: str, agent: str, ttl: float, now: float) -> bool:
        # One upsert is the compare-and-set: it writes only if the lease is free, expired or
        # already the agent's. The write lock (BEGIN IMMEDIATE) serialises it across processes.
        # A request that waited behind a later entry takes effect at that entry's time, so the
        # log's times never go backwards (`updated_at` is the time of the entity's last entry).
        upsert = (
            "INSERT INTO daybook_entities AS e (name, holder, deadline, updated_at) "
            "VALUES (?1, ?2, ?3 + ?4, ?3) "
            "ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, "
            "deadline = max(?3, e.updated_at) + ?4, updated_at = max(?3, e.updated_at) "
            "WHERE e.holder IS NULL OR e.deadline < max(?3, e.updated_at) OR e.holder = excluded.holder "
            "RETURNING updated_at, deadline"
        )

        def write(db: sqlite3.Connection) -> bool:
            won = db.execute(upsert, (name, agent, now, ttl)).fetchall()
            if not won:
                return False
            at, deadline = won[0]
            data = dumps({"ttl": ttl, "deadline": deadline}, f"claim of entity {name!r}")
            db.execute(_ENTITY_LOG, (name, at, agent, "claim", data))
            return True

        claimed: bool = self._write(write, atomic=True)
        return claimed

    def entity_release(self, name: str, agent: str, now: float) -> bool:
        update = (
            "UPDATE daybook_entities SET holder = NULL, deadline = NULL, updated_at = max(?1, updated_at) "
            "WHERE name = ?2 AND holder = ?3 AND deadline >= max(?1, updated_at) RETURNING updated_at"
        )

        def write(db: sqlite3.Connection) -> bool:
            done = db.execute(update, (now, name, agent)).fetchall()
            if not done:
                return False
            db.execute(_ENTITY_LOG, (name, done[0][0], agent, "release", "null"))
            return True

        released: bool = self._write(write, atomic=True)
        return released

    def entity_record(self, name: str, agent: str, action: str, data_json: str, now: float) -> bool:
        # The lease check and the append commit together: nothing is written unless it holds.
        update = (
            "UPDATE daybook_entities SET updated_at = max(?1, updated_at) "
            "WHERE name = ?2 AND holder = ?3 AND deadline >= max(?1, updated_at) RETURNING updated_at"
        )

        def write(db: sqlite3.Connection) -> bool:
            held = db.execute(update, (now, name, agent)).fetchall()
            if not held:
                return False
            db.execute(_ENTITY_LOG, (name, held[0][0], agent, action, data_json))
            return True

        recorded: bool = self._write(write, atomic=True)
        return recorded

    def entity_view(
        self, name: str
    ) -> tuple[str | None, float | None, list[tuple[int, float, str, str, str]]] | None:
        # One statement, so the lease and the log come from the same snapshot.
        rows = self._read(
            "SELECT e.holder, e.deadline, l.id, l.at, l.agent, l.action, l.data "
            "FROM daybook_entities e LEFT JOIN daybook_entity_log l ON l.name = e.name "
            "WHERE e.name = ? ORDER BY l.id",
            (name,),
        )
        return _entity_from_rows(rows)

    def entity_list(self) -> list[tuple[str, str | None, float | None]]:
        rows = self._read("SELECT name, holder, deadline FROM daybook_entities ORDER BY name", ())
        return [(str(r[0]), r[1], None if r[2] is None else float(r[2])) for r in rows]


_ENTITY_LOG = "INSERT INTO daybook_entity_log (name, at, agent, action, data) VALUES (?, ?, ?, ?, ?)"


def _entity_from_rows(
    rows: list[Any],
) -> tuple[str | None, float | None, list[tuple[int, float, str, str, str]]] | None:
    if not rows:
        return None
    holder, deadline = rows[0][0], rows[0][1]
    log = [(int(r[2]), float(r[3]), str(r[4]), str(r[5]), str(r[6])) for r in rows if r[2] is not None]
    return holder, None if deadline is None else float(deadline), log
