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
import os
import signal
import sys
from typing import Any

import daybook
from daybook.adapters.sql import MARKER_TABLE, Database, Params, _Session


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
    kill: tuple[str, str, int] | None = None
    for flag in ("--kill-before", "--kill-after", "--kill-at-statement"):
        if flag in rest:
            i = rest.index(flag)
            what, _, count = rest[i + 1].rpartition(":")
            kill = (flag, what, int(count))
            del rest[i : i + 2]
    book = daybook.Daybook(store, lease_ttl=2.0)
    if kill is not None and kill[0] == "--kill-at-statement":
        real_run = _Session.run
        ran = {"n": 0}
        nth = kill[2]

        def run(self: _Session, sql: str, params: Params | None) -> int:
            rowcount = real_run(self, sql, params)
            if MARKER_TABLE not in sql:  # a user statement, not the adapter's bookkeeping
                ran["n"] += 1
                if ran["n"] == nth:
                    os.kill(os.getpid(), signal.SIGKILL)
            return rowcount

        _Session.run = run  # type: ignore[method-assign]
    elif kill is not None:
        flag, kind, n = kill
        real_append = book.store.append
        seen = {"n": 0}

        def append(event: daybook.Event) -> None:
            mine = 0
            if event.kind == kind:
                seen["n"] += 1
                mine = seen["n"]
            if mine == n and flag == "--kill-before":
                os.kill(os.getpid(), signal.SIGKILL)
            real_append(event)
            if mine == n and flag == "--kill-after":
                os.kill(os.getpid(), signal.SIGKILL)

        book.store.append = append  # type: ignore[method-assign]
    try:
        if action == "start":
            wf = {"transfer": sql_transfer, "transfer_then_undo": sql_transfer_then_undo}[rest[0]]
            result = book.run(wf, *json.loads(rest[1]), run_id=run_id)
        else:
            result = book.resume(run_id, wait=10)
    except daybook.DaybookError as exc:
        print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
        sys.exit(3)
    finally:
        book.close()
    print(json.dumps({"result": result}))


if __name__ == "__main__":
    main()
