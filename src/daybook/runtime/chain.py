"""Continue-as-new chains: a long-lived run goes on as segments `R`, `R~2`, `R~3`, ...

A segment that continues completes with the result `{CONTINUED: next id}`; the next segment is
created first (already leased to its creator), so closing is safe to repeat after a crash. Signals
the closing segment never read are carried to the next one. Readers follow the chain to its live
segment (`live`) or read every segment's journal in order (`chain_events`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..journal.execution import Execution
from ..journal.stop import ContinueAsNew, Stop
from ..records import Event, RunStatus
from ..store import Store
from .claim import Claims
from .finish import stop_beat, write_completed
from .start import check_same, new_run
from .workflow import Workflow

CONTINUED = "daybook.continued_as"  # the result of a run segment that continued as a new run


@dataclass
class Next:
    """A segment ended with continue_as_new; the chain goes on at `run_id`."""

    run_id: str


def next_segment(run_id: str) -> str:
    """`R` -> `R~2` -> `R~3`: the id of the run that continues `run_id`."""
    base, sep, n = run_id.rpartition("~")
    return f"{base}~{int(n) + 1}" if sep and n.isdigit() else f"{run_id}~2"


def next_id(result: Any) -> str | None:
    """The segment a result hands on to, if it is a continuation."""
    if isinstance(result, Next):
        return result.run_id
    if isinstance(result, dict) and set(result) == {CONTINUED}:
        return str(result[CONTINUED])
    return None


def live(claims: Claims, run_id: str) -> str:
    """The segment of a continue_as_new chain that is current (the run itself otherwise)."""
    while True:
        info = claims.get_run(run_id)
        following = next_id(info.result) if info.status == RunStatus.COMPLETED else None
        if following is None:
            return run_id
        run_id = following


def chain_events(claims: Claims, run_id: str) -> list[Event]:
    """The journals of `run_id` and of every later segment of its chain, in order."""
    events: list[Event] = []
    current: str | None = run_id
    while current is not None:
        info = claims.get_run(current)
        events.extend(claims.store.load(current))
        current = next_id(info.result) if info.status == RunStatus.COMPLETED else None
    return events


def close_segment(claims: Claims, exe: Execution, wf: Workflow[Any], cont: ContinueAsNew) -> str:
    """Close this segment and create the next; safe to repeat after a crash in between (the next
    run is created first, and creating it twice is a no-op). Returns the next segment's id."""
    store, owner = claims.store, claims.owner
    new_id = next_segment(exe.run_id)
    try:
        try:
            exe.flush()  # the held outcomes before anything of the next segment
        except Stop as stop:
            raise stop.error from None
        # Created already leased to this process, so no worker takes it before we go on.
        info, first = new_run(wf, new_id, cont.args, cont.kwargs, owner=owner, lease_ttl=claims.lease_ttl)
        if not store.create_run(info, first):
            check_same(claims.get_run(new_id), wf, info.input)  # a retry after a crash
        carry_signals(store, exe, new_id)
        write_completed(store, owner, exe, {CONTINUED: new_id})
        carry_signals(store, exe, new_id)  # any that arrived while this segment was closing
    finally:
        # Whatever failed, this handle lets the segment go (its lease lapses if it was not
        # finished), so a later resume here is not refused as "this process".
        stop_beat(exe)
        claims.unreserve(exe.run_id)
    return new_id


def carry_signals(store: Store, exe: Execution, new_id: str) -> None:
    """Copy the signals this segment never read (updates, raises, verdicts) to the next one.
    Idempotent: a copy keeps the original's time, so a repeat (after a crash) skips it."""
    there = {(n, p, s, a) for _, n, p, s, a in store.inbox(new_id)}
    for inbox_id, name, payload, sender, at in store.inbox(exe.run_id):
        if inbox_id not in exe.consumed and (name, payload, sender, at) not in there:
            store.signal(new_id, name, payload, sender, at)
