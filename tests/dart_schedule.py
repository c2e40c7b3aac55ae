"""The schedule domain of the DART tests (seed 004's commit-sensitive witness), on real parts: a
calendar in its own SQLite file (the counterparty: it counts every confirmation and hold), and
invitations through the email outbox to an SMTP server on 127.0.0.1 (the irreversible effect).

    dart_schedule.py DB CAL HOST PORT start RUN_ID [--kill-after KIND:N]
    dart_schedule.py DB CAL HOST PORT recover RUN_ID POLICY [--kill-after KIND:N]

`ResolveSlot::slot[0]::0` picks the first slot; `slot[1]` reads it; slots 2-4 are independent;
`FinalizeSchedule::final::0` reads slots 0 and 1 and sends the invitations. Then slot[0] goes on
to confirm its slot with the calendar, which fails once (a stale cache): the failure is in the
producer, after both its consumers committed.
"""

from __future__ import annotations

import socket
import sqlite3
import sys
from typing import Any

from aiosmtpd.controller import Controller
from crashpoint import kill_at_journal_write, report

import daybook
from daybook import Context, Daybook, Skeleton
from daybook.adapters.email import Outbox

SENDER = "scheduler@daybook.test"
RESOLVE = Skeleton("ResolveSlot", outputs=("{entity}",))
FINAL = Skeleton("FinalizeSchedule", inputs=("slot[0]", "slot[1]"), outputs=("schedule",))
SLOTS = 5


class Sink:
    """An SMTP server on 127.0.0.1 that keeps every message it accepts (aiosmtpd)."""

    def __init__(self) -> None:
        self.messages: list[bytes] = []
        self.port = 0

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append(envelope.content)
        return "250 2.0.0 queued"

    def start(self) -> Sink:
        # A free port stays free only until somebody binds it: pick again if it was taken.
        for attempt in range(5):
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                self.port = int(s.getsockname()[1])
            self.controller = Controller(self, hostname="127.0.0.1", port=self.port)
            try:
                self.controller.start()
                return self
            except OSError:
                if attempt == 4:
                    raise
        return self

    def stop(self) -> None:
        self.controller.stop()


def calendar(path: str) -> None:
    """A calendar with free hours 9..17 for each slot, a confirmation log and a fault switch."""
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE free (slot INTEGER, hour INTEGER)")
        db.execute("CREATE TABLE confirmed (slot INTEGER, hour INTEGER, key TEXT)")
        db.execute("CREATE TABLE holds (slot INTEGER, hour INTEGER, key TEXT, released INTEGER DEFAULT 0)")
        db.execute("CREATE TABLE faults (site TEXT, remaining INTEGER)")
        db.execute("CREATE TABLE notes (text TEXT, key TEXT)")
        db.executemany("INSERT INTO free VALUES (?, ?)", [(s, h) for s in range(SLOTS) for h in range(9, 18)])


def arm(path: str, site: str, times: int = 1) -> None:
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO faults VALUES (?, ?)", (site, times))


def rows(path: str, table: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as db:
        return list(db.execute(f"SELECT * FROM {table} ORDER BY rowid"))


def _fault(db: sqlite3.Connection, site: str) -> bool:
    left = db.execute("SELECT remaining FROM faults WHERE site = ?", (site,)).fetchone()
    if left and left[0] > 0:
        db.execute("UPDATE faults SET remaining = remaining - 1 WHERE site = ?", (site,))
        return True
    return False


def pick_slot(cal: str, slot: int, after: int | None = None) -> int:
    """The earliest free hour of `slot` (after `after`, when it depends on another slot)."""
    with sqlite3.connect(cal) as db:
        hours = [h for (h,) in db.execute("SELECT hour FROM free WHERE slot = ? ORDER BY hour", (slot,))]
    return next(h for h in hours if after is None or h > after)


@daybook.tool(idempotent=True, irreversible=False)
def sched_confirm_slot(*, cal: str, slot: int, hour: int, idempotency_key: str) -> str:
    with sqlite3.connect(cal) as db:
        if _fault(db, "confirm"):
            db.commit()
            raise RuntimeError("calendar cache stale: confirmation refused")
        db.execute("INSERT INTO confirmed VALUES (?, ?, ?)", (slot, hour, idempotency_key))
    return f"{slot}@{hour}"


def _release_hold(*, original: dict[str, Any], result: Any, idempotency_key: str) -> None:
    with sqlite3.connect(original["cal"]) as db:
        db.execute("UPDATE holds SET released = 1 WHERE key = ?", (result,))


sched_release_hold = daybook.tool(idempotent=True, irreversible=False)(_release_hold)


@daybook.tool(idempotent=True, inverse=sched_release_hold)
def sched_hold_room(*, cal: str, slot: int, hour: int, idempotency_key: str) -> str:
    with sqlite3.connect(cal) as db:
        db.execute("INSERT INTO holds (slot, hour, key) VALUES (?, ?, ?)", (slot, hour, idempotency_key))
    return idempotency_key


@daybook.workflow
def schedule(
    ctx: Context,
    cal: str,
    host: str,
    port: int,
    commit: bool = True,
    hold: bool = False,
    notify: bool = False,
) -> dict[str, Any]:
    """Five slots and the invitations; `commit=False` leaves slot[0] without a commit checkpoint
    (its entry is then its only candidate); `hold=True` holds a room after the commit point
    (compensable); `notify=True` emails the room's owner there (irreversible)."""
    picked: dict[str, int] = {}
    with ctx.subtask(RESOLVE, "slot[0]") as u0:
        picked["slot[0]"] = ctx.decide("pick", pick_slot, cal, 0).value
        if commit:
            u0.commit(**{"slot[0]": picked["slot[0]"]})
    with ctx.subtask(RESOLVE, "slot[1]", reads=["slot[0]"]) as u:
        picked["slot[1]"] = ctx.decide("pick", pick_slot, cal, 1, picked["slot[0]"]).value
        u.exit(**{"slot[1]": picked["slot[1]"]})
    for n in range(2, SLOTS):
        with ctx.subtask(RESOLVE, f"slot[{n}]", reads=[]) as u:  # independent: declared so
            picked[f"slot[{n}]"] = ctx.decide("pick", pick_slot, cal, n).value
            u.exit(**{f"slot[{n}]": picked[f"slot[{n}]"]})
    with ctx.subtask(FINAL, "final") as fin:
        outbox = Outbox(host, port, SENDER)
        outbox.queue(ctx, "team@example.test", "Meeting", f"slots {picked}")
        outbox.release(ctx)
        fin.exit(schedule=picked)
    with ctx.subtask(RESOLVE, "slot[0]") as u0:
        if hold:
            ctx.effect(sched_hold_room, cal=cal, slot=0, hour=picked["slot[0]"])
        if notify:
            rooms = Outbox(host, port, SENDER)
            rooms.queue(ctx, "rooms@example.test", "Room", "slot[0]")
            rooms.release(ctx)
        done = ctx.effect(sched_confirm_slot, cal=cal, slot=0, hour=picked["slot[0]"])
        u0.exit()
    return {"picked": picked, "confirmed": done}


@daybook.tool(idempotent=True, irreversible=False)
def sched_note(*, cal: str, text: str, idempotency_key: str) -> str:
    with sqlite3.connect(cal) as db:
        db.execute("INSERT INTO notes VALUES (?, ?)", (text, idempotency_key))
    return text


@daybook.workflow
def noting(ctx: Context, cal: str) -> str:
    """A reversible note whose text a re-run re-derives differently, then a failing confirmation."""
    with sqlite3.connect(cal) as db:
        seen = ctx.decide("count", lambda: db.execute("SELECT count(*) FROM notes").fetchone()[0]).value
    ctx.effect(sched_note, cal=cal, text=f"after {seen} notes")
    done: str = ctx.effect(sched_confirm_slot, cal=cal, slot=0, hour=9)
    return done


# The same workflow, recovering by itself when it fails (`@workflow(recover=...)`).
schedule_auto = daybook.workflow(schedule.fn, name="schedule_auto", recover="dart")


@daybook.workflow
def booking(ctx: Context, cal: str) -> str:
    """slot[0] (no commit checkpoint) is consumed by a room hold (compensable), then fails."""
    with ctx.subtask(RESOLVE, "slot[0]"):
        hour = ctx.decide("pick", pick_slot, cal, 0).value
    with ctx.subtask(Skeleton("HoldRoom"), "room", reads=["slot[0]"]) as v:
        ctx.effect(sched_hold_room, cal=cal, slot=0, hour=hour)
        v.exit()
    with ctx.subtask(RESOLVE, "slot[0]") as u:
        done: str = ctx.effect(sched_confirm_slot, cal=cal, slot=0, hour=hour)
        u.exit()
    return done


@daybook.workflow
async def confirm_async(ctx: Context, cal: str) -> str:
    async with ctx.subtask(RESOLVE, "slot[0]") as u:
        hour = ctx.decide("pick", pick_slot, cal, 0).value
        u.commit(**{"slot[0]": hour})
        done: str = ctx.effect(sched_confirm_slot, cal=cal, slot=0, hour=hour)
        u.exit()
    return done


def main() -> None:
    db, cal, host, port, action, run_id = sys.argv[1:7]
    rest = sys.argv[7:]
    book = Daybook(db, lease_ttl=2.0)
    kill_at_journal_write(book, rest)
    if action == "start":
        report(lambda: book.run(schedule, cal, host, int(port), hold=True, run_id=run_id))
    elif book.get_run(run_id).status == "failed":
        report(lambda: book.recover(run_id, policy=rest[0]).result)
    else:  # the recovery's transition landed before the kill: its re-run goes on
        report(lambda: book.resume(run_id))


if __name__ == "__main__":
    main()
