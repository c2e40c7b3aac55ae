"""Transaction headers (Atomix epochs and frontiers) on both backends: the SQL they share and the
row shape they return.

`daybook_transactions` holds one header per transaction attempt: its epoch (from the store's
totally ordered allocator: one counter row on SQLite, a sequence drawn under a transaction lock
on PostgreSQL, so a smaller epoch is always visible before a larger one), its scopes and its
status. It is a header like `daybook_runs`, documented as mutable: only `status` and
`updated_at` ever change, a terminal status (committed, aborted, stuck) never changes again
(a trigger refuses it), and every change is written in the same database transaction as the
journal row that records it, so the header never says what the journal does not.
"""

from __future__ import annotations

from typing import Any

from .rows import EVENT_COLUMNS

TX_COLUMNS = "tx_id, run_id, epoch, scopes, status, attempt, retries, created_at, updated_at"
# Statuses that hold the frontier of every resource in the scopes.
OPEN = ("open", "committing", "aborting")
TERMINAL = ("committed", "aborted", "stuck")
_OPEN_SQL = "('open', 'committing', 'aborting')"

TxRow = tuple[str, str, int, str, str, int, int, float, float]


def select_sql(mark: str, run_id: str | None, open_only: bool, before: int | None) -> tuple[str, list[Any]]:
    """The header query: all, one run's, the open ones, those with an epoch below `before`."""
    where: list[str] = []
    params: list[Any] = []
    if run_id is not None:
        where.append(f"run_id = {mark}")
        params.append(run_id)
    if open_only:
        where.append(f"status IN {_OPEN_SQL}")
    if before is not None:
        where.append(f"epoch < {mark}")
        params.append(before)
    sql = f"SELECT {TX_COLUMNS} FROM daybook_transactions"
    if where:
        sql += " WHERE " + " AND ".join(where)
    return sql + " ORDER BY epoch", params


def as_rows(rows: list[Any]) -> list[TxRow]:
    return [
        (
            str(r[0]),
            str(r[1]),
            int(r[2]),
            str(r[3]),
            str(r[4]),
            int(r[5]),
            int(r[6]),
            float(r[7]),
            float(r[8]),
        )
        for r in rows
    ]


def mark_sql(mark: str) -> str:
    """Set a header's status, only while it is not terminal (0 rows: it already ended)."""
    return (
        f"UPDATE daybook_transactions SET status = {mark}, updated_at = {mark} "
        f"WHERE tx_id = {mark} AND status IN {_OPEN_SQL}"
    )


# PostgreSQL, one statement each. Begin: draw the next epoch from the sequence under a
# transaction lock (so epochs become visible in order), insert the header (open) and the
# journal row, its data given the epoch; returns the epoch. Mark: set the status of a header
# that has not ended and insert the journal row, or nothing (0 rows).
PG_BEGIN = (
    "WITH l AS (SELECT pg_advisory_xact_lock(hashtext(current_schema())) AS ok), "
    "e AS (SELECT nextval('daybook_epoch_seq') AS epoch FROM l), "
    f"h AS (INSERT INTO daybook_transactions ({TX_COLUMNS}) "
    "SELECT %s, %s, e.epoch, %s, 'open', %s, %s, %s, %s FROM e RETURNING epoch) "
    f"INSERT INTO daybook_events ({EVENT_COLUMNS}) SELECT {', '.join(['%s'] * 9)}, "
    "(%s::jsonb || jsonb_build_object('epoch', h.epoch))::json, %s, %s FROM h "
    "RETURNING (data->>'epoch')::bigint"
)
PG_MARK = (
    f"WITH u AS ({mark_sql('%s')} RETURNING tx_id) "
    f"INSERT INTO daybook_events ({EVENT_COLUMNS}) SELECT {', '.join(['%s'] * 9)}, %s::json, %s, %s FROM u"
)
