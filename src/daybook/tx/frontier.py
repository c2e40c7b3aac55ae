"""Frontiers and the commit rule, derived from the store's transaction headers (never given by a
caller).

`frontier[r]` is the smallest epoch of a transaction that is still open (open, committing or
aborting) on a scope overlapping `r`; no open transaction means no bound (shown as None). A
transaction at epoch `e` may proceed on its scopes iff `frontier[r] >= e` for every `r` in its
scopes, counting every transaction but itself: no transaction with a smaller epoch on an
overlapping scope is still open (Atomix Algorithm 1). Because epochs are allocated in a total
order that becomes visible in order, and an ended transaction never opens again, the set of
earlier open transactions only shrinks: once the rule holds, it holds for good. The first look
is the store's, in the database transaction that drew the epoch (`Store.tx_seen`): when it
shows no blocker, the transaction goes on without reading the headers again.

Waiting for the rule is event-driven (store/tx_signal.py): the waiter sleeps on its store
handle's signal, which moves when a header ends, in this process at once and on PostgreSQL in any
process (a NOTIFY sent by the database transaction that ends the header, heard by LISTEN); it
looks at the headers again only then, or after a safety-net poll backing off from 5 ms to the
store's `poll` (1 s on PostgreSQL; 0.1 s on SQLite, where that poll is how another process's end
is seen). Between looks it checks the run's lease.

The wait stays in the process only for a short spin (`inline_wait`); past it, or at once when a
blocker's owner is dead (a takeover is due and needs a slot), the run suspends with its attempt
open and its epoch kept, due again after `SUSPENDED_POLL`: a waiting run never fills a worker's
slots. Its `wait=` deadline is wall-clock time from its epoch, so it holds across suspensions.
A blocker whose run has ended is released by the waiter (store/tx_release.py): a run that
ended never holds a scope, even if a crash cut its own release.
"""

from __future__ import annotations

import functools
import json
import math
import time
from collections.abc import Sequence
from typing import Any

from ..errors import FrontierTimeout, LeaseLost
from ..journal.execution import Execution
from ..journal.stop import Stop, Suspend
from ..records import TERMINAL, RunStatus
from ..runtime.lease import is_dead_here
from ..store import Store
from ..store.tx_release import release_row
from ..store.tx_rows import TxRow
from .scope import Scope, any_overlap, overlaps, parse_all

FIRST_POLL = 0.005
MAX_POLL = 1.0  # the longest sleep between two looks, whatever the store
# How long a run suspended on a frontier sleeps before its next look (a worker, or `daybook
# resume`, runs it again then); its wait= deadline wakes it earlier.
SUSPENDED_POLL = 1.0
# The spin of a wait resumed after such a suspension: short, so that runs still blocked hold a
# worker slot for a look only, and the one that can go on is claimed within a poll.
RESUMED_SPIN = 0.2


def scopes_of(row: TxRow) -> tuple[Scope, ...]:
    return _parsed(row[3])


@functools.lru_cache(maxsize=4096)
def _parsed(text: str) -> tuple[Scope, ...]:
    """A header's scopes JSON, parsed (the same few texts recur on every look)."""
    return parse_all(json.loads(text))


def blockers(
    store: Store,
    scopes: Sequence[Scope],
    epoch: int,
    tx_id: str,
    group: str | None = None,
    rows: Sequence[TxRow] | None = None,
) -> list[TxRow]:
    """Open transactions with a smaller epoch on a scope overlapping `scopes` (siblings of one
    speculation, whose ids share the prefix `group`, do not block each other), among `rows`
    (the open headers below `epoch`; default: read now)."""
    if rows is None:
        rows = store.tx_rows(open_only=True, before=epoch)
    return [
        row
        for row in rows
        if row[0] != tx_id
        and not (group and row[0].startswith(group))
        and any_overlap(scopes, scopes_of(row))
    ]


def can_commit(store: Store, scopes: Sequence[Scope], epoch: int, tx_id: str) -> bool:
    """The commit rule: `frontier[r] >= epoch` for every `r` in `scopes`."""
    return not blockers(store, scopes, epoch, tx_id)


def wait_until_clear(
    exe: Execution,
    scopes: Sequence[Scope],
    epoch: int,
    tx_id: str,
    until: float | None,
    group: str | None = None,
    spin: float | None = None,
) -> None:
    """Block until the commit rule holds for this transaction, woken by the store's signal
    (poll as safety net). Past `spin` seconds (default `exe.settings.frontier_spin`), or at once when what
    blocks it belongs to a run whose owner is dead, the run suspends instead (`Suspend`, woken
    after `SUSPENDED_POLL`): its process or worker slot is free, and the next execution looks
    again. FrontierTimeout once the wall clock passes `until` (None: no limit); Stop if the
    run's lease is lost. Speculation branches (threads of one execution) never suspend."""
    if exe.read_only:
        return  # a pure replay checks history, it does not wait for the present
    signal = exe.store.tx_signal()
    delay = FIRST_POLL
    spin = exe.settings.frontier_spin if spin is None else spin  # None: in this process until `until`
    spin_until = math.inf if spin is None else time.monotonic() + spin
    while True:
        seen = signal.generation()  # read before looking: an end after the look wakes the wait
        found = _live_blockers(exe.store, scopes, epoch, tx_id, group)
        if not found:
            return
        if exe.heartbeat is not None and exe.heartbeat.lost:
            raise Stop(LeaseLost(f"run {exe.run_id!r}: lease lost while waiting for a frontier"), False)
        now = time.time()
        if until is not None and now >= until:
            first = found[0][0]
            raise FrontierTimeout(
                f"transaction {tx_id} (epoch {epoch}) waited past its wait= for transaction "
                f"{first[0]} (epoch {first[2]}, run {first[1]!r}, {first[4]}) on an overlapping "
                f"scope; see `daybook frontiers`, and resume the run that holds it, or release "
                f"it (`daybook tx release {first[0]} --as NAME --reason TEXT`)"
            )
        orphaned = any(dead for _, dead in found)
        if group is None and spin is not None and (orphaned or time.monotonic() >= spin_until):
            wake = now + SUSPENDED_POLL if until is None else min(now + SUSPENDED_POLL, until)
            first = found[0][0]
            raise Suspend(exe.run_id, wake, f"the frontier of transaction {first[0]} (run {first[1]!r})")
        left = MAX_POLL if until is None else max(0.0, until - now)
        signal.wait(seen, min(delay, left))
        delay = min(delay * 2, signal.poll)


def _live_blockers(
    store: Store, scopes: Sequence[Scope], epoch: int, tx_id: str, group: str | None
) -> list[tuple[TxRow, bool]]:
    """The blockers, each with whether its run's owner is dead (its lease lapsed, or its process
    on this machine is gone: a takeover is due, and this waiter should not hold a slot it
    needs). A blocker whose run has ended is released here: a run that ended holds no scope
    (its own release may have been cut by a crash)."""
    found: list[tuple[TxRow, bool]] = []
    for row in blockers(store, scopes, epoch, tx_id, group):
        info = store.get_run(row[1])
        if info is not None and info.status in TERMINAL:
            release_row(store, row, "daybook", f"run {row[1]!r} {info.status}")
            continue
        dead = (
            info is not None
            and info.status == RunStatus.RUNNING
            and (
                (info.lease_expires or 0.0) < time.time()
                or (info.lease_owner is not None and is_dead_here(info.lease_owner))
            )
        )
        found.append((row, dead))
    return found


def frontiers(store: Store) -> list[dict[str, Any]]:
    """Each scope an open transaction holds: its frontier (the smallest open epoch on an
    overlapping scope), the transaction at that epoch (what everything later on it waits for)
    and the later open transactions that wait on it."""
    rows = store.tx_rows(open_only=True)
    parsed = [(row, scopes_of(row)) for row in rows]
    seen: dict[str, Scope] = {}
    for _, scopes in parsed:
        for s in scopes:
            seen.setdefault(s.text, s)
    out: list[dict[str, Any]] = []
    for text in sorted(seen):
        on = [row for row, scopes in parsed if any(overlaps(seen[text], s) for s in scopes)]
        head = on[0]  # rows come in epoch order
        out.append(
            {
                "scope": text,
                "frontier": head[2],
                "held_by": {"tx_id": head[0], "run_id": head[1], "epoch": head[2], "status": head[4]},
                "waiting": [{"tx_id": r[0], "run_id": r[1], "epoch": r[2]} for r in on[1:]],
            }
        )
    return out


def listing(store: Store, run_id: str | None = None) -> list[dict[str, Any]]:
    """Transaction headers as dicts, by epoch (`daybook tx`)."""
    return [
        {
            "tx_id": r[0],
            "run_id": r[1],
            "epoch": r[2],
            "scopes": json.loads(r[3]),
            "status": r[4],
            "attempt": r[5],
            "retries": r[6],
            "created_at": r[7],
            "updated_at": r[8],
        }
        for r in store.tx_rows(run_id=run_id)
    ]
