"""A run's checkpoint as one document (S1): what a person or another process needs to pick the
run up, in three parts, each from where it lives.

- `executor`: the whole step history (every journal row), the reasoning and tool-call trace
  (decisions and effects, step by step), and the scratchpad (each named decision's latest value).
- `environment`: the workspace the workflow declared with `ctx.environment(handle)` (a
  directory, a sandbox id) and whether it is `running` (a process executes the run) or
  `stopped` (paused, suspended, parked, finished: stopped, never destroyed by daybook), with its
  `log` (each start, stop with its snapshot, and expiry: `environment.Log`).
- `progress`: the current step, each step's status (`committed`, `running`: an act with no
  outcome yet, `pending`) and the committed boundary (every step up to it is committed).

With `schema_version` and `saved_at` (ISO-8601); `docs/checkpoint.schema.json` is its JSON Schema.
The store keeps every checkpoint at every step boundary already (the journal is the checkpoint);
this document is a view of it, never a second copy that could disagree.
"""

from __future__ import annotations

import datetime
from typing import Any

from ..errors import RunNotFound
from ..records import JSON, Event, Kind, RunStatus, settles
from ..store import Store
from .environment import ENVIRONMENT, Log

CHECKPOINT_VERSION = 1


def checkpoint(store: Store, run_id: str, now: float) -> dict[str, JSON]:
    """The checkpoint document of `run_id` as of `now`."""
    info = store.get_run(run_id)
    if info is None:
        raise RunNotFound(run_id, store.url)
    events = store.load(run_id)
    statuses = _step_statuses(events)
    boundary = 0
    for step in sorted(statuses):
        if statuses[step] != "committed" or step != boundary + 1:
            break
        boundary = step
    return {
        "schema_version": CHECKPOINT_VERSION,
        "saved_at": datetime.datetime.fromtimestamp(now, datetime.UTC).isoformat(),
        "run_id": run_id,
        "executor": {
            "workflow": info.workflow,
            "status": info.status,
            "input": info.input,
            "history": [ev.as_dict() for ev in events],
            "trace": _trace(events),
            "scratchpad": _scratchpad(events),
        },
        "environment": _with_log(_environment(events, info.status), Log(store, run_id).entries()),
        "progress": {
            "current_step_id": max(statuses, default=0),
            "step_status": {str(step): status for step, status in sorted(statuses.items())},
            "committed_boundary": boundary,
        },
    }


def _step_statuses(events: list[Event]) -> dict[int, str]:
    status: dict[int, str] = {}
    for ev in events:
        if ev.step is None:
            continue
        if ev.kind == Kind.INTENT or (ev.kind == Kind.SIGNAL and ev.status == "waiting"):
            status[ev.step] = "running" if ev.kind == Kind.INTENT else "pending"
        elif (
            settles(ev)
            or ev.kind in (Kind.DECISION, Kind.OBLIGATION)
            or ev.status in ("received", "timeout", "fired")
        ):
            status[ev.step] = "committed"
        else:
            status.setdefault(ev.step, "pending")
    return status


def _trace(events: list[Event]) -> list[JSON]:
    """Reasoning and tool calls in order: each decision with its value and reasons, each act's
    request (intent) and each outcome."""
    trace: list[JSON] = []
    for ev in events:
        entry: dict[str, JSON] = {"step": ev.step, "name": ev.name}
        if ev.kind == Kind.DECISION and ev.status == "reserved":
            continue  # a model call's reservation: its completion is the decision
        if ev.kind == Kind.DECISION:
            entry.update(decision=ev.data.get("value"), why=ev.data.get("why"))
        elif ev.kind == Kind.INTENT:
            entry.update(key=ev.key, request=ev.data.get("args"))
        elif ev.kind == Kind.OUTCOME:
            entry.update(key=ev.key, outcome=ev.status, result=ev.data.get("result"))
        else:
            continue
        trace.append(entry)
    return trace


def _scratchpad(events: list[Event]) -> dict[str, Any]:
    decided = (ev for ev in events if ev.kind == Kind.DECISION and ev.name != ENVIRONMENT)
    return {ev.name: ev.data.get("value") for ev in decided}


def _with_log(env: dict[str, JSON], log: list[dict[str, Any]]) -> dict[str, JSON]:
    """The status its expiry left (`destroyed`, `awaiting destroy`), else the run's own."""
    actions = [e["action"] for e in log]
    if "destroyed" in actions:
        env["status"] = "destroyed"
    elif "expired" not in actions and any(a.startswith("destroy_") for a in actions):
        env["status"] = "awaiting destroy"
    return {**env, "log": log}


def _environment(events: list[Event], status: str) -> dict[str, JSON]:
    declared = [ev.data.get("value") for ev in events if ev.kind == Kind.DECISION and ev.name == ENVIRONMENT]
    if not declared or not isinstance(declared[-1], dict):
        return {"kind": None, "handle": None, "status": "none"}
    running = status == RunStatus.RUNNING
    return {**declared[-1], "status": "running" if running else "stopped"}
