"""Retention of runs and their environments (S5): past the window a run is `expired`, and only
then is its environment destroyed.

A paused run keeps its journal and its workspace for the whole window (most resumes come within
two days; the default window is 30 days); so does a finished run that declared an environment
(`ctx.environment`): completed, failed (its state kept for inspection and `daybook retry`) or
cancelled. Past the window the run ends as `expired` (journaled with who, the cutoff and the
status it left), after which resuming raises `RunExpired`. The same pass runs from `gc` by hand
and from every worker on its schedule (`Worker(retention=...)`), so the window holds whether or not
anyone runs gc. Its environment is destroyed then, and only then: by the workflow's
`destroy` hook (`ctx.environment(..., destroy=)`) when the expiring process has the workflow's
code (`--app`, `$DAYBOOK_APP`, `gc(app=)`; `environment.destroy_hook`), then its directory
deleted if the workflow declared it `ctx.environment(path, remove_on_expiry=True)`. A run whose
hook this process cannot find is expired all the same, its environment kept and listed as
awaiting destroy (`destroy_awaiting` in its log), and the next pass by a process with the code
destroys it; so does the next pass after a hook that raised (`destroy_failed`) or a kill between
the hook and its `destroyed` entry (the hook runs again: it must be idempotent). An environment
with no destroy hook and no `remove_on_expiry` is listed for the operator, never touched.
What to destroy is read from the run's environment log (`environment.Log`), which gc's erasure of
payloads leaves alone; a run declared before that log existed is read from its journal.
"""

from __future__ import annotations

import shutil
import time
import traceback
from typing import Any

from ..coordination.entity import ENVIRONMENT_PREFIX, Entity
from ..errors import ConfigError
from ..records import JSON, Kind, RunInfo, RunStatus, safe_text
from ..runtime import operator
from ..runtime.workflow import Apps
from ..store import Store
from .environment import ENVIRONMENT, Log, destroy_hook

MAX_LISTED = 1_000_000
# The longest wait of a worker before it tries a destroy hook that failed again.
MAX_BACKOFF = 3600.0
# Finished runs whose environment outlives them by the window (a paused run expires with or without one).
ENDED = (RunStatus.COMPLETED.value, RunStatus.FAILED.value, RunStatus.CANCELLED.value)


def expire(
    store: Store, cutoff: float, by: str, dry_run: bool, app: Apps = None, backoff: bool = False
) -> list[dict[str, JSON]]:
    """Expire every run paused before `cutoff`, and every finished run with an environment last
    updated before it (only count them with `dry_run`): one entry each, with the status it
    left, the workspace it declared, whether its destroy hook ran (`destroyed`) or waits for a
    process with the workflow's code (`awaiting_destroy`, `again` if an earlier pass said so
    already) and whether its directory was removed. `app`: the code the operator names for
    this process (with `$DAYBOOK_APP`), where destroy hooks are found. `backoff` (a worker's
    passes): a hook that failed is tried again only after a wait doubling from 2 s to an hour,
    so a hook that keeps failing does not grow its append-only log at every pass."""
    done: list[dict[str, JSON]] = []
    for info in _due(store, cutoff):
        entry = _expire_one(store, info, cutoff, by, dry_run, app, backoff)
        if entry is not None:
            done.append(entry)
    return done


def _expire_one(
    store: Store, info: RunInfo, cutoff: float, by: str, dry_run: bool, app: Apps, backoff: bool
) -> dict[str, JSON] | None:
    """Expire one run, then destroy its environment and log it: in that order, so a crash
    between them leaves an expired run whose log has no `expired` entry, which the next pass
    finishes (`_due`). None if the run went on meanwhile (a retry, a resume): not expired."""
    env = _declared(store, info.run_id)
    remove = bool(env and env.get("remove_on_expiry") and env.get("kind") == "directory")
    handle = str(env["handle"]) if env else None
    hook = str(env["destroy"]) if env and env.get("destroy") else None
    entry: dict[str, JSON] = {
        "run_id": info.run_id,
        "from": info.status,
        "environment": handle,
        "destroy": hook,
        "destroyed": False,
        "awaiting_destroy": False,
        "removed": False,
    }
    if dry_run:
        return entry
    if info.status != RunStatus.EXPIRED:
        try:
            operator.expire(store, info.run_id, by, cutoff, handle if remove else None)
        except ConfigError:
            return None  # it is no longer paused or finished: someone resumed or retried it
    if hook is not None and handle is not None:
        state = _destroy(Log(store, info.run_id), info.run_id, handle, hook, by, app, store, backoff)
        if state != "destroyed":
            # Kept whole, its directory too (the sandbox may still run in it): the next pass, by
            # a process with the workflow's code, destroys it, and only then writes `expired`.
            entry.update(awaiting_destroy=True, again=state == "still awaiting")
            if state.startswith("failed"):
                entry["error"] = state.split(":", 1)[1].strip()
            return entry
        entry["destroyed"] = True
    if remove and handle:
        shutil.rmtree(handle, ignore_errors=True)
        entry["removed"] = True
    if env is not None:
        done = {"by": by, "removed": bool(entry["removed"]), "destroyed": bool(entry["destroyed"])}
        Log(store, info.run_id).write("expired", done)
    return entry


def _destroy(
    log: Log, run_id: str, handle: str, name: str, by: str, app: Apps, store: Store, backoff: bool
) -> str:
    """Run the destroy hook once per pass until it is logged `destroyed`: "destroyed", "awaiting"
    (this process lacks the workflow's code; logged once), "still awaiting" (said before, or a
    failed hook's backoff not over), or "failed: <error>"."""
    entries = log.entries()
    if any(e["action"] == "destroyed" for e in entries):
        return "destroyed"  # a crash after the hook's entry and before `expired`
    failures = [e for e in entries if e["action"] == "destroy_failed"]
    if backoff and failures and entries[-1]["action"] == "destroy_failed":
        wait = min(2.0 ** len(failures), MAX_BACKOFF)
        if time.time() - float(entries[-1].get("at") or 0.0) < wait:
            return "still awaiting"
    found = destroy_hook(store, run_id, name, app)
    if found is None:
        if entries and entries[-1]["action"] == "destroy_awaiting":
            return "still awaiting"
        why = "the workflow's code is not loaded in the expiring process (pass it with --app)"
        log.write("destroy_awaiting", {"by": by, "destroy": name, "why": why})
        return "awaiting"
    log.write("destroy_requested", {"by": by, "destroy": name})
    try:
        found(handle)
    except Exception as exc:
        error = safe_text("".join(traceback.format_exception_only(exc)))[-2000:]
        log.write("destroy_failed", {"by": by, "error": error})
        return f"failed: {error}"
    log.write("destroyed", {"by": by})
    return "destroyed"


def _due(store: Store, cutoff: float) -> list[RunInfo]:
    due = [i for i in store.list_runs(RunStatus.PAUSED.value, MAX_LISTED) if i.updated_at < cutoff]
    for name, _holder, _deadline in store.entity_list():
        if not name.startswith(ENVIRONMENT_PREFIX):
            continue
        log = Entity(store, name).view().log
        declared = [e.data for e in log if e.action == "declared"]
        run_id = declared[-1].get("run_id") if declared and isinstance(declared[-1], dict) else None
        info = store.get_run(run_id) if isinstance(run_id, str) else None
        if info is None or any(e.action == "expired" for e in log):
            continue  # done with: its environment was destroyed (or kept) at its expiry
        if info.status == RunStatus.EXPIRED or (info.status in ENDED and info.updated_at < cutoff):
            due.append(info)
    return due


def _declared(store: Store, run_id: str) -> dict[str, Any] | None:
    logged = Log(store, run_id).declared()
    if logged is not None:
        return logged
    found = [
        ev.data.get("value")
        for ev in store.load(run_id)
        if ev.kind == Kind.DECISION and ev.name == ENVIRONMENT
    ]
    return found[-1] if found and isinstance(found[-1], dict) else None
