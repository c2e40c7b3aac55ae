"""The tree of runs: a child run (`ctx.child`) names its parent in its header (`parent_run`).

Reads only; what composes over the tree (budgets, approvals, cancel, `show`) asks here.
"""

from __future__ import annotations

from ..records import RunInfo
from ..store import DispatchReads, JournalReads


def descendants(store: DispatchReads, run_id: str, limit: int = 10_000) -> list[RunInfo]:
    """Every run below `run_id` in its tree, parents before their children."""
    out: list[RunInfo] = []
    todo = [run_id]
    while todo and len(out) < limit:
        kids = store.search_runs({"parent": todo.pop(0)}, limit)
        out.extend(sorted(kids, key=lambda r: r.created_at))
        todo.extend(k.run_id for k in kids)
    return out


def ancestors(store: JournalReads, run_id: str) -> list[str]:
    """The parent, grandparent, ... of `run_id`, nearest first."""
    chain: list[str] = []
    info = store.get_run(run_id)
    while info is not None and info.parent_run is not None and info.parent_run not in chain:
        chain.append(info.parent_run)
        info = store.get_run(info.parent_run)
    return chain


def root_of(store: JournalReads, run_id: str) -> str:
    """The top of `run_id`'s tree (itself when it has no parent)."""
    chain = ancestors(store, run_id)
    return chain[-1] if chain else run_id
