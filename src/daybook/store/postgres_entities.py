"""The coordination entities on PostgreSQL (`daybook.entity`): leases with a log, each write
one statement that is the compare-and-set and its log entry. A mixin of `PostgresStore`, kept
apart so each module stays one noun."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .postgres_link import Link


class PostgresEntities:
    """Entity methods over the store's connection (`_db`, re-established when it drops)."""

    if TYPE_CHECKING:  # given by PostgresStore
        _db: Link

    def entity_claim(self, name: str, agent: str, ttl: float, now: float) -> bool:
        # One round trip: the upsert is the compare-and-set (the conflicting row is locked, so
        # racing claims queue and each re-checks the lease it then finds); the log row is
        # inserted only if the upsert wrote. A claim that waited behind a later entry takes
        # effect at that entry's time, so the log's times never go backwards.
        cur = self._db.execute(
            "WITH c AS (INSERT INTO daybook_entities AS e (name, holder, deadline, updated_at) "
            "VALUES (%(name)s, %(agent)s, %(now)s + %(ttl)s, %(now)s) "
            "ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, "
            "deadline = GREATEST(%(now)s, e.updated_at) + %(ttl)s, "
            "updated_at = GREATEST(%(now)s, e.updated_at) "
            "WHERE e.holder IS NULL OR e.deadline < GREATEST(%(now)s, e.updated_at) "
            "OR e.holder = excluded.holder RETURNING name, updated_at, deadline) "
            "INSERT INTO daybook_entity_log (name, at, agent, action, data) "
            "SELECT name, updated_at, %(agent)s, 'claim', "
            "json_build_object('ttl', %(ttl)s, 'deadline', deadline) FROM c",
            {"name": name, "agent": agent, "now": now, "ttl": ttl},
            retry=False,  # a log entry written twice
        )
        return cur.rowcount == 1

    def entity_release(self, name: str, agent: str, now: float) -> bool:
        cur = self._db.execute(
            "WITH r AS (UPDATE daybook_entities SET holder = NULL, deadline = NULL, "
            "updated_at = GREATEST(%(now)s, updated_at) WHERE name = %(name)s AND holder = %(agent)s "
            "AND deadline >= GREATEST(%(now)s, updated_at) RETURNING name, updated_at) "
            "INSERT INTO daybook_entity_log (name, at, agent, action, data) "
            "SELECT name, updated_at, %(agent)s, 'release', 'null'::json FROM r",
            {"name": name, "agent": agent, "now": now},
            retry=False,  # a log entry written twice
        )
        return cur.rowcount == 1

    def entity_record(self, name: str, agent: str, action: str, data_json: str, now: float) -> bool:
        # The UPDATE locks the entity row: a claim racing this record waits for it (or it for
        # the claim, then re-checks and finds the new holder), so the log never shows a record
        # after its writer lost the lease.
        cur = self._db.execute(
            "WITH h AS (UPDATE daybook_entities SET updated_at = GREATEST(%(now)s, updated_at) "
            "WHERE name = %(name)s AND holder = %(agent)s "
            "AND deadline >= GREATEST(%(now)s, updated_at) RETURNING name, updated_at) "
            "INSERT INTO daybook_entity_log (name, at, agent, action, data) "
            "SELECT name, updated_at, %(agent)s, %(action)s, %(data)s::json FROM h",
            {"name": name, "agent": agent, "now": now, "action": action, "data": data_json},
            retry=False,  # a log entry written twice
        )
        return cur.rowcount == 1

    def entity_view(
        self, name: str
    ) -> tuple[str | None, float | None, list[tuple[int, float, str, str, str]]] | None:
        # One statement, so the lease and the log come from the same snapshot.
        rows = self._db.execute(
            "SELECT e.holder, e.deadline, l.id, l.at, l.agent, l.action, l.data::text "
            "FROM daybook_entities e LEFT JOIN daybook_entity_log l ON l.name = e.name "
            "WHERE e.name = %s ORDER BY l.id",
            (name,),
        ).fetchall()
        if not rows:
            return None
        holder, deadline = rows[0][0], rows[0][1]
        log = [(int(r[2]), float(r[3]), str(r[4]), str(r[5]), str(r[6])) for r in rows if r[2] is not None]
        return holder, None if deadline is None else float(deadline), log

    def entity_list(self) -> list[tuple[str, str | None, float | None]]:
        sql = "SELECT name, holder, deadline FROM daybook_entities ORDER BY name"
        rows = self._db.execute(sql).fetchall()
        return [(str(r[0]), r[1], None if r[2] is None else float(r[2])) for r in rows]
