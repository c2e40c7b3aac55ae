"""Forks: edit a past turn by starting a new run that shares an old run's journal up to a step.

The fork's first row (`run_started`, with `fork_of` and `at`) names the run and step it branches
from; its journal is that run's rows up to the step (read from it at load time, never copied:
nothing is duplicated, edited or deleted) followed by its own. Decisions and effects of the shared
steps keep the ids and keys they were made under, so replaying them in the fork re-fires nothing;
steps after the fork point are the fork's own, under its own keys. The original's journal is
untouched. The effects the original made after the fork point are listed by class; any that
cannot be undone (irreversible, no inverse, an unsettled outcome, or a tool this process has not
imported) needs `confirm`. With an `undo` (the facade's, `recovery/forking.py`), the compensable
ones are undone first and the fork's first row supersedes the original's later steps, a journal
branch: the fork runs them again as its own, and replays an act that was not undone when it
asks for the same one (never repeating it).
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable
from typing import Any

from ..errors import ConfigError, RunNotFound
from ..journal.execution import Execution
from ..journal.tool import lookup as lookup_tool
from ..records import JSON, Event, Kind, RunInfo, RunStatus, check_json, check_text, settles, shown
from ..store import Store

FORK_OF = "fork_of"
SUPERSEDE = "supersede"
# What a fork does with the parent's later acts: undone by the facade's recovery layer (their
# inverses, once), given the listing; returns the keys it undid. None: a fork that leaves them.
Undo = Callable[[RunInfo, list[dict[str, JSON]]], list[str]]


def expand(store: Store, events: list[Event]) -> list[Event]:
    """A run's journal with the shared prefix of the run it was forked from (recursively) in
    front of its own rows; a run that is not a fork is returned as is."""
    if not events or events[0].kind != Kind.RUN_STARTED or FORK_OF not in events[0].data:
        return events
    parent, at = str(events[0].data[FORK_OF]), int(events[0].data["at"])
    # The parent's current branch only, as its cursor reads it: rows a semantic recovery
    # superseded are history. A fork that took over the parent's later acts (its first row
    # lists them in `supersede`) sees those steps too, as a journal branch sees its own.
    upto = None if SUPERSEDE in events[0].data else at
    return current_branch(store, parent, upto) + events


def current_branch(store: Store, run_id: str, upto: int | None = None) -> list[Event]:
    """The rows of a run's current branch (as its cursor reads them), up to step `upto`."""
    steps = Execution(store, run_id, expand(store, store.load(run_id)), None, read_only=True).steps
    return [ev for step in sorted(steps) if upto is None or step <= upto for ev in steps[step]]


def fork(
    store: Store,
    run_id: str,
    at: int,
    *,
    new_id: str | None,
    run_input: dict[str, Any] | None,
    confirm: bool,
    by: str,
    undo: Undo | None = None,
    identity: JSON = None,
) -> tuple[str, list[dict[str, JSON]]]:
    """Create the fork of `run_id` at step `at` (a `pending` run; `resume` or a worker runs it)
    with the same input or `run_input` ({"args": [...], "kwargs": {...}}). Returns its id and the
    effects the original made after `at`, each with its step, tool, key, status, class and
    whether it was undone. With `undo`, the original's later compensable acts are undone first
    and the fork takes over its later steps as a journal branch (see `book.fork`)."""
    info = store.get_run(run_id)
    if info is None:
        raise RunNotFound(run_id, store.url)
    events = current_branch(store, run_id)
    last = max((ev.step for ev in events if ev.step is not None), default=0)
    if isinstance(at, bool) or not isinstance(at, int) or not 0 <= at <= last:
        raise ConfigError(f"--at must be a step of run {run_id!r}, from 0 to {last}, not {shown(at)}")
    _check_settled(run_id, events, at)
    later = _later_effects(events, at)
    blocking = [
        e
        for e in later
        if e["status"] != "failed" and (e["class"] != "compensable" or e["status"] != "confirmed")
    ]
    if blocking and not confirm:
        listed = ", ".join(f"step {e['step']} {e['tool']} ({e['class']}, {e['status']})" for e in blocking)
        raise ConfigError(
            f"run {run_id!r} made effects after step {at} that a fork does not undo: {listed}. "
            "They stay done in the world; fork anyway with confirm=True (CLI: --confirm)"
        )
    fork_id = new_id or f"{run_id}~fork-{uuid.uuid4().hex[:8]}"
    check_text(fork_id, "the fork's run id")
    new_input = run_input if run_input is not None else info.input
    check_json(new_input, f"fork {fork_id!r} input")
    if store.get_run(fork_id) is not None:
        raise ConfigError(f"run {fork_id!r} exists already: give the fork another id")
    data: dict[str, JSON] = {}
    if undo is not None:
        undone = set(undo(info, later))
        for e in later:
            e["undone"] = e["key"] in undone
        data = _branch(events, at, later)
    if identity is not None:  # who forked it, as `gates.identity` could tell
        data["identity"] = identity
    header, first = _header(info, fork_id, new_input, at, by, data)
    if not store.create_run(header, first):
        raise ConfigError(f"run {fork_id!r} exists already: give the fork another id")
    return fork_id, later


def _branch(events: list[Event], at: int, later: list[dict[str, JSON]]) -> dict[str, JSON]:
    """The fork's journal branch over the parent's later steps: all superseded, and the
    confirmed acts that were not undone kept `soft` (replayed if the fork asks for the same act
    again, never repeated; an irreversible one asked for otherwise parks the fork)."""
    steps = sorted({ev.step for ev in events if ev.step is not None and ev.step > at})
    soft = [e["step"] for e in later if e["status"] == "confirmed" and not e.get("undone")]
    return {SUPERSEDE: list(steps), "soft": soft}


def _check_settled(run_id: str, events: list[Event], at: int) -> None:
    open_steps = {
        ev.step for ev in events if ev.kind == Kind.INTENT and ev.step is not None and ev.step <= at
    }
    open_steps -= {ev.step for ev in events if settles(ev)}
    if open_steps:
        raise ConfigError(
            f"run {run_id!r} has effects with no settled outcome at steps {sorted(open_steps)} "
            f"(up to step {at}): a fork would share an act nobody knows the outcome of. Settle "
            "them first (`daybook unknowns`, `daybook resolve`), or fork at an earlier step"
        )


def _later_effects(events: list[Event], at: int) -> list[dict[str, JSON]]:
    found: dict[int, dict[str, JSON]] = {}
    for ev in events:
        if ev.step is None or ev.step <= at:
            continue
        if ev.kind == Kind.INTENT:
            tool = lookup_tool(ev.name)
            kind = _effect_class(tool)
            found[ev.step] = {
                "step": ev.step,
                "tool": ev.name,
                "key": ev.key,
                "status": "in flight",
                "class": kind,
            }
        elif ev.kind == Kind.OUTCOME and ev.step in found:
            found[ev.step]["status"] = ev.status
    return [found[step] for step in sorted(found)]


def _effect_class(tool: Any) -> str:
    if tool is None:
        return "unknown class"  # its tool is not imported here: nobody can say it is undoable
    return str(tool.effect.on_fork)


def derived_header(
    info: RunInfo, run_id: str, status: RunStatus, run_input: JSON, now: float, **more: Any
) -> RunInfo:
    """The header of a new run made from `info` (a fork, a recovery run): its own id, status and
    input, no result, error, lease or timer of the original's; `more` sets other fields."""
    return dataclasses.replace(
        info,
        run_id=run_id,
        status=status.value,
        input=run_input,
        result=None,
        error=None,
        created_at=now,
        updated_at=now,
        lease_owner=None,
        lease_expires=None,
        wake_at=None,
        **more,
    )


def _header(
    info: RunInfo, fork_id: str, run_input: dict[str, Any], at: int, by: str, branch: dict[str, JSON]
) -> tuple[RunInfo, Event]:
    now = time.time()
    header = derived_header(info, fork_id, RunStatus.PENDING, run_input, now)
    data: dict[str, JSON] = {
        "input": run_input,
        "ref": info.ref,
        "by": by,
        FORK_OF: info.run_id,
        "at": at,
        **branch,
    }
    first = Event(run_id=fork_id, seq=1, kind=Kind.RUN_STARTED.value, name=info.workflow, data=data, at=now)
    return header, first
