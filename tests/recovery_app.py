"""A semantic recovery against a counterparty that keeps its own ledger (a SQLite file, $REC_CPTY):
every reservation, release (the inverse), invitation and confirmation it executes is a row.

The release has a status query (did an execution with this key happen?) and waits at two gates
the test opens by creating files next to the ledger: `go` before it executes (having written
`started`), `go2` after (having written `logged`), so a test can hold a recovery inside its undo,
race other recoveries against it, or SIGKILL it on either side of the counterparty's execution.
With `lost` the release's reply is lost after it executed; with `status_down` its status query
cannot say: the undo's outcome is then unknown.

    recovery_app.py DB start RUN_ID     the first run (its confirmation fails once)
    recovery_app.py DB complete RUN_ID  a run that completes
"""

from __future__ import annotations

import http.client
import os
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import daybook

SLOT = daybook.Skeleton("RecSlot", outputs=("{entity}",))


def ledger() -> sqlite3.Connection:
    db = sqlite3.connect(os.environ["REC_CPTY"], timeout=60, isolation_level=None)
    db.execute("CREATE TABLE IF NOT EXISTS ex (op TEXT, key TEXT, pid INTEGER)")
    return db


def executions(path: str) -> list[tuple[str, str]]:
    with sqlite3.connect(path) as db:
        return [(op, key) for op, key in db.execute("SELECT op, key FROM ex ORDER BY rowid")]


def _log(op: str, key: str) -> None:
    ledger().execute("INSERT INTO ex VALUES (?, ?, ?)", (op, key, os.getpid()))


def _gate(name: str) -> None:
    flag = Path(os.environ["REC_CPTY"] + "." + name)
    deadline = time.monotonic() + 120
    while not flag.exists() and time.monotonic() < deadline:
        time.sleep(0.02)


def _mark(name: str) -> None:
    Path(os.environ["REC_CPTY"] + "." + name).touch()


def rec_release_status(key: str, args: dict[str, Any]) -> Any:
    if Path(os.environ["REC_CPTY"] + ".status_down").exists():
        return daybook.StillUnknown()
    found = ledger().execute("SELECT 1 FROM ex WHERE key = ?", (key,)).fetchone()
    return daybook.Confirmed("released") if found else daybook.NotFound()


@daybook.tool(irreversible=False, status=rec_release_status)
def rec_release(original: dict[str, Any], result: str, idempotency_key: str) -> str:
    _mark("started")
    _gate("go")
    _log("release", idempotency_key)
    _mark("logged")
    _gate("go2")
    if Path(os.environ["REC_CPTY"] + ".lost").exists():  # executed, but the reply is lost
        raise http.client.RemoteDisconnected("release taken, reply lost")
    return "released"


@daybook.tool(inverse=rec_release)
def rec_reserve(room: str, idempotency_key: str) -> str:
    _log("reserve", idempotency_key)
    return f"{room}:{idempotency_key}"


@daybook.tool(irreversible=True)
def rec_invite(hours: dict[str, int], idempotency_key: str) -> None:
    _log("invite", idempotency_key)


@daybook.tool(irreversible=False)
def rec_confirm(slot: str, hour: int, idempotency_key: str) -> str:
    refuse = Path(os.environ["REC_CPTY"] + ".refuse")
    if refuse.exists():
        refuse.unlink()
        raise RuntimeError("calendar refused (once)")
    _log("confirm", idempotency_key)
    return f"{slot}@{hour}"


@daybook.workflow
def rec_schedule(ctx: daybook.Context) -> dict[str, Any]:
    hours: dict[str, int] = {}
    with ctx.subtask(SLOT, "slot[0]") as u:
        hours["slot[0]"] = ctx.decide("pick", lambda: 9).value
        u.commit(**{"slot[0]": hours["slot[0]"]})
    with ctx.subtask(SLOT, "slot[1]", reads=["slot[0]"]) as u:
        hours["slot[1]"] = ctx.decide("pick", lambda: hours["slot[0]"] + 1).value
        u.exit(**{"slot[1]": hours["slot[1]"]})
    ctx.effect(rec_invite, hours=hours)
    with ctx.subtask(SLOT, "slot[0]") as u:
        room = ctx.effect(rec_reserve, room="R1")
        done = ctx.effect(rec_confirm, slot="slot[0]", hour=hours["slot[0]"])
        u.exit()
    return {"hours": hours, "room": room, "confirmed": done}


if __name__ == "__main__":
    db, action, run_id = sys.argv[1:4]
    if action == "start":  # "complete": a run that does not fail
        Path(os.environ["REC_CPTY"] + ".refuse").touch()
    with daybook.Daybook(db) as book:
        try:
            book.run(rec_schedule, run_id=run_id)
        except daybook.RunFailed as exc:
            print("failed:", exc)
        else:
            print("completed")
