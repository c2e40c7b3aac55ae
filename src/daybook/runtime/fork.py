"""Forks: edit a past turn by starting a new run that shares an old run's journal up to a step.

The fork's first row (`run_started`, with `fork_of` and `at`) names the run and step it branches
from; its journal is that run's rows up to the step (read from it at load time, never copied:
nothing is duplicated, edited or deleted) followed by its own. Decisions and effects of the shared
steps keep the ids and keys they were made under, so replaying them in the fork re-fires nothing;
steps after the fork point are the fork's own, under its own keys. The original run is untouched.
The effects the original made after the fork point are listed by class: a fork does not undo
them, so any that cannot be undone (irreversible, no inverse, or a tool this process has not
imported) needs `confirm`; compensable ones are listed.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from typing import Any

from ..errors import ConfigError, RunNotFound
from ..journal.execution import Execution
from ..journal.tool import lookup as lookup_tool
from ..records import JSON, Event, Kind, RunInfo, RunStatus, check_json, check_text, settles, shown
from ..store import Store

FORK_OF = "fork_of"


def expand(store: Store, events: list[Event]) -> list[Event]:
    """A run's journal with the shared prefix of the run it was forked from (recursively) in
    front of its own rows; a run that is not a fork is returned as is."""
    if not events or events[0].kind != Kind.RUN_STARTED or FORK_OF not in events[0].data:
        return events
    parent, at = str(events[0].data[FORK_OF]), int(events[0].data["at"])
    # The parent's current branch only, as its cursor reads it: rows a semantic recovery
    # superseded are history.
    current = Execution(store, parent, expand(store, store.load(parent)), None, read_only=True).steps
    shared = [ev for step in sorted(current) if step <= at for ev in current[step]]
    return shared + events


def fork(
    store: Store,
    run_id: str,
    at: int,
    *,
    new_id: str | None,
    run_input: dict[str, Any] | None,
    confirm: bool,
    by: str,
) -> tuple[str, list[dict[str, JSON]]]:
    """Create the fork of `run_id` at step `at` (a `pending` run; `resume` or a worker runs it)
    with the same input or `run_input` ({"args": [...], "kwargs": {...}}). Returns its id and the
    effects the original made after `at`, each with its step, tool, key, status and class."""
    info = store.get_run(run_id)
    if info is None:
        raise RunNotFound(run_id, store.url)
    events = expand(store, store.load(run_id))
    last = max((ev.step for ev in events if ev.step is not None), default=0)
    if isinstance(at, bool) or not isinstance(at, int) or not 0 <= at <= last:
        raise ConfigError(f"--at must be a step of run {run_id!r}, from 0 to {last}, not {shown(at)}")
    _check_settled(run_id, events, at)
    later = _later_effects(events, at)
    blocking = [e for e in later if e["class"] != "compensable" and e["status"] != "failed"]
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
    header, first = _header(info, fork_id, new_input, at, by)
    if not store.create_run(header, first):
        raise ConfigError(f"run {fork_id!r} exists already: give the fork another id")
    return fork_id, later


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
    if tool.irreversible:
        return "irreversible"
    return "compensable" if tool.inverse is not None else "no inverse"


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
    info: RunInfo, fork_id: str, run_input: dict[str, Any], at: int, by: str
) -> tuple[RunInfo, Event]:
    now = time.time()
    header = derived_header(info, fork_id, RunStatus.PENDING, run_input, now)
    data: dict[str, JSON] = {"input": run_input, "ref": info.ref, "by": by, FORK_OF: info.run_id, "at": at}
    first = Event(run_id=fork_id, seq=1, kind=Kind.RUN_STARTED.value, name=info.workflow, data=data, at=now)
    return header, first
