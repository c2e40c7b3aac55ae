"""Versions of workflow code under live runs: which unfinished runs still need which code path.

Runs remember the code version they started on (`@workflow(version=...)`) and every patch
marker (`ctx.patched`) they recorded; a marker that no unfinished run lacks can be deleted.
"""

from __future__ import annotations

from ..records import JSON, TERMINAL, Kind
from ..store import ReadStore, load_listed


def versions(store: ReadStore) -> list[dict[str, JSON]]:
    """In-flight runs by workflow and code version, and for each patch marker seen in a
    workflow's runs, how many unfinished runs lack it (they still need the old code path; at 0
    the marker can be deleted)."""
    known: dict[str, set[str]] = {}
    in_flight: dict[tuple[str, str], list[set[str]]] = {}
    for info in store.list_runs(None, 1_000_000):
        events = load_listed(store, info.run_id)
        if events is None:
            continue  # flagged in store.damage; the other runs are still counted
        markers = {
            e.name.removeprefix("patch:")
            for e in events
            if e.kind == Kind.DECISION and e.name.startswith("patch:")
        }
        known.setdefault(info.workflow, set()).update(markers)
        if info.status not in TERMINAL:
            version = str(events[0].data.get("version", "")) if events else ""
            in_flight.setdefault((info.workflow, version), []).append(markers)
    out: list[dict[str, JSON]] = []
    for workflow in sorted(known):
        groups = {v: runs for (w, v), runs in in_flight.items() if w == workflow} or {"": []}
        for version, runs in sorted(groups.items()):
            out.append(
                {
                    "workflow": workflow,
                    "version": version,
                    "in_flight": len(runs),
                    "runs_without_marker": {
                        m: sum(1 for have in runs if m not in have) for m in sorted(known[workflow])
                    },
                }
            )
    return out
