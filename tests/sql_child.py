"""The SQL adapter's workflows, and an agent process for its crash tests that runs or resumes one
and SIGKILLs itself at a chosen point.

    sql_child.py STORE start RUN_ID WORKFLOW ARGS_JSON [KILL]
    sql_child.py STORE resume RUN_ID

KILL is `--kill-after KIND:N` / `--kill-before KIND:N` (the N-th journal row of that kind this
process writes) or `--kill-at-statement N` (right after the N-th user statement ran inside the
database transaction, before it commits). Imported by the tests for the same workflows.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from crashpoint import kill_at_call, kill_at_journal_write, report, take

import daybook
from daybook.adapters.sql import MARKER_TABLE, Database, _Session


def _transfer(ctx: daybook.Context, db: Database, amount: int, ref: str) -> None:
    p = db.placeholder
    db.execute(
        ctx,
        f"UPDATE accounts SET balance = balance + {p} WHERE id = 'b'",
        [amount],
        inverse=(f"UPDATE accounts SET balance = balance - {p} WHERE id = 'b'", [amount]),
    )
    db.execute(
        ctx,
        f"UPDATE accounts SET balance = balance - {p} WHERE id = 'a'",
        [amount],
        inverse=(f"UPDATE accounts SET balance = balance + {p} WHERE id = 'a'", [amount]),
    )
    db.execute(
        ctx,
        f"INSERT INTO ledger (ref, amount) VALUES ({p}, {p})",
        [ref, amount],
        inverse=(f"DELETE FROM ledger WHERE ref = {p}", [ref]),
    )


@daybook.workflow
def sql_transfer(ctx: daybook.Context, url: str, amount: int) -> Any:
    db = Database(url)
    _transfer(ctx, db, amount, f"{ctx.run_id}/t")
    return db.commit(ctx)


@daybook.workflow
def sql_transfer_then_undo(ctx: daybook.Context, url: str, amount: int) -> Any:
    db = Database(url)
    _transfer(ctx, db, amount, f"{ctx.run_id}/t")
    done = db.commit(ctx)
    report = ctx.compensate()
    return {"commit": done, "compensated": report.compensated}


def main() -> None:
    store, action, run_id = sys.argv[1:4]
    rest = sys.argv[4:]
    book = daybook.Daybook(store, lease_ttl=2.0)
    kill_at_journal_write(book, rest)
    statement = take(rest, "--kill-at-statement")
    if statement is not None:
        # A user statement counts, not the adapter's bookkeeping in the marker table.
        _Session.run = kill_at_call(  # type: ignore[method-assign]
            _Session.run, int(statement), counts=lambda session, sql, params: MARKER_TABLE not in sql
        )
    try:
        if action == "start":
            wf = {"transfer": sql_transfer, "transfer_then_undo": sql_transfer_then_undo}[rest[0]]
            report(lambda: book.run(wf, *json.loads(rest[1]), run_id=run_id))
        else:
            report(lambda: book.resume(run_id, wait=10))
    finally:
        book.close()


if __name__ == "__main__":
    main()
