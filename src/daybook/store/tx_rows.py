"""Transaction headers (Atomix epochs and frontiers) on every backend: their SQL and the row shape
they return.

`daybook_transactions` holds one header per transaction attempt: its epoch (from the store's
totally ordered allocator, the dialect's `epoch_sql`: one counter row on SQLite, a sequence
drawn under a transaction lock on PostgreSQL, so a smaller epoch is always visible before a
larger one), its scopes and its status. It is a header like `daybook_runs`, documented as
mutable: only `status` and `updated_at` ever change, a terminal status (committed, aborted,
stuck) never changes again (a trigger refuses it), and every change is written in the same
database transaction as the journal row that records it, so the header never says what the
journal does not.
"""

from __future__ import annotations

from typing import Any

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
