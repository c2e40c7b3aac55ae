"""Retention for paused runs (S5): a run paused longer than the window is `expired` by `gc`.

A paused run keeps its journal and its workspace for the whole window (most resumes come within
two days; the default window is 30 days); past it, `gc` ends it as `expired` (journaled with who
and the cutoff), after which resuming raises `RunExpired`. Its workspace is deleted only if the
workflow declared it `ctx.environment(path, remove_on_expiry=True)` as a directory; any other is
listed for the operator, never touched.
"""

from __future__ import annotations

import shutil
from typing import Any

from ..records import JSON, Kind, RunStatus
from ..runtime import operator
from ..store import Store
from .checkpoint import ENVIRONMENT

MAX_LISTED = 1_000_000


def expire(store: Store, cutoff: float, by: str, dry_run: bool) -> list[dict[str, JSON]]:
    """Expire every run paused before `cutoff` (only count them with `dry_run`): one entry each,
    with the workspace it declared and whether gc removed it."""
    done: list[dict[str, JSON]] = []
    for info in store.list_runs(RunStatus.PAUSED.value, MAX_LISTED):
        if info.updated_at >= cutoff:
            continue
        env = _declared(store, info.run_id)
        remove = bool(env and env.get("remove_on_expiry") and env.get("kind") == "directory")
        handle = str(env["handle"]) if env else None
        entry: dict[str, JSON] = {"run_id": info.run_id, "environment": handle, "removed": False}
        if not dry_run:
            operator.expire(store, info.run_id, by, cutoff, handle if remove else None)
            if remove and handle:
                shutil.rmtree(handle, ignore_errors=True)
                entry["removed"] = True
        done.append(entry)
    return done


def _declared(store: Store, run_id: str) -> dict[str, Any] | None:
    found = [
        ev.data.get("value")
        for ev in store.load(run_id)
        if ev.kind == Kind.DECISION and ev.name == ENVIRONMENT
    ]
    return found[-1] if found and isinstance(found[-1], dict) else None
