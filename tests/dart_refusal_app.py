"""Workflows for the DART refusal tests (issue 25 item 12: audit T3, D-2), with counterparties
that count their executions in a SQLite ledger ($DART_LEDGER): importable by the tests and by
`daybook recover --app`.

- `buy`: an order whose reply is lost (outcome unknown): every recovery refuses until it is
  settled, and a dry run must say so (T3).
- `pair`: s1 derives its hour from s0's through a Python variable; whether s1 declares its reads
  (`reads=[]`) or not (D-2) decides whether s0 may be restored alone.
- `announce_then_confirm`: an announcement (irreversible) of a value re-derived on a re-run, then
  a confirmation that fails once: a whole-task re-run parks rather than announce a second time.
"""

from __future__ import annotations

import http.client
import os
import sqlite3
from typing import Any

import daybook

SLOT = daybook.Skeleton("PairSlot")


def _ledger() -> sqlite3.Connection:
    db = sqlite3.connect(os.environ["DART_LEDGER"], timeout=60, isolation_level=None)
    db.execute("CREATE TABLE IF NOT EXISTS ex (op TEXT, key TEXT, value TEXT)")
    db.execute("CREATE TABLE IF NOT EXISTS knobs (name TEXT PRIMARY KEY, value INTEGER)")
    return db


def log(op: str, key: str, value: object = "") -> None:
    _ledger().execute("INSERT INTO ex VALUES (?, ?, ?)", (op, key, str(value)))


def executions(path: str) -> list[tuple[str, str, str]]:
    with sqlite3.connect(path) as db:
        return [tuple(r) for r in db.execute("SELECT op, key, value FROM ex ORDER BY rowid")]


def knob(name: str, default: int = 0) -> int:
    row = _ledger().execute("SELECT value FROM knobs WHERE name = ?", (name,)).fetchone()
    return int(row[0]) if row else default


def set_knob(path: str, name: str, value: int) -> None:
    os.environ["DART_LEDGER"] = path
    _ledger().execute("INSERT OR REPLACE INTO knobs VALUES (?, ?)", (name, value))


def _fails_once(name: str) -> bool:
    if knob(name):
        set_knob(os.environ["DART_LEDGER"], name, 0)
        return True
    return False


@daybook.tool(irreversible=True)
def refusal_place_order(*, po: str, idempotency_key: str = "") -> dict[str, Any]:
    log("order", idempotency_key, po)
    raise http.client.RemoteDisconnected("taken, reply lost")


@daybook.workflow
def buy(ctx: daybook.Context) -> None:
    with ctx.subtask("Order", "po1") as u:
        u.commit(terms="net30")
        ctx.effect(refusal_place_order, po="po1")
        u.exit()


@daybook.tool(idempotent=True, irreversible=False)
def refusal_confirm(*, hour: int, idempotency_key: str) -> str:
    if _fails_once("refuse"):
        raise RuntimeError("calendar refused: stale cache")
    log("confirm", idempotency_key, hour)
    return f"confirmed {hour}"


@daybook.workflow
def pair(ctx: daybook.Context, declared: bool) -> dict[str, int]:
    hours: dict[str, int] = {}
    with ctx.subtask(SLOT, "s0"):
        hours["s0"] = ctx.decide("pick0", lambda: knob("s0", 9)).value
    reads: list[str] | None = [] if declared else None
    with ctx.subtask(SLOT, "s1", reads=reads) as v:  # consumes s0 through `hours`
        hours["s1"] = ctx.decide("pick1", lambda: hours["s0"] + 1).value
        v.exit()
    with ctx.subtask(SLOT, "s0") as u:
        ctx.effect(refusal_confirm, hour=hours["s0"])
        u.exit()
    return hours


@daybook.tool(irreversible=True)
def refusal_announce(*, text: str, idempotency_key: str) -> None:
    log("announce", idempotency_key, text)


@daybook.workflow
def announce_then_confirm(ctx: daybook.Context) -> str:
    with ctx.subtask(SLOT, "a") as u:
        hour = ctx.decide("pick", lambda: knob("s0", 9)).value
        ctx.effect(refusal_announce, text=f"meeting at {hour}")
        done: str = ctx.effect(refusal_confirm, hour=hour)
        u.exit()
    return done
