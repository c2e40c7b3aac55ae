"""Unknowns: effects whose outcome is not settled (unknown, in flight, or waiting to retry).

`unknowns` lists them across runs for an operator; `ctx.barrier` holds a closing step while any
effect of other runs is open, each check a recorded step and each wait a durable timer.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import CorruptJournal
from ..journal.decision import Decisions
from ..journal.execution import Execution
from ..journal.facet import Facet
from ..journal.wait import Waits
from ..records import JSON, RunInfo
from ..store import Store, flag

log = logging.getLogger("daybook")


class Barriers(Facet):
    """`ctx.barrier`."""

    def __init__(self, exe: Execution, decisions: Decisions, waits: Waits) -> None:
        super().__init__(exe)
        self._decisions = decisions
        self._waits = waits

    def barrier(self, *, runs: Sequence[str] | None = None, poll: float = 5.0) -> None:
        """Hold a closing step (post to the ledger, file the report) until no effect's outcome is
        open: unknown, in flight or awaiting a retry, in `runs` (default: every other run in the
        book; this run's own effects are settled before it gets here). Each check is a recorded
        step, and the wait between checks a durable timer, so replay passes the same way."""
        if poll <= 0:
            raise ValueError(f"ctx.barrier(poll={poll}): poll must be > 0 seconds")
        scope = None if runs is None else sorted(set(runs))
        while True:
            still: list[dict[str, Any]] = self._decisions.decide("barrier", self._open_unknowns, scope).value
            if not still:
                return
            log.warning(
                "run %s: barrier waits for %d open effect(s): %s",
                self.run_id,
                len(still),
                ", ".join(str(u["key"]) for u in still[:5]),
            )
            self._waits.sleep(poll)

    def _open_unknowns(self, scope: list[str] | None) -> list[dict[str, Any]]:
        found = []
        for ev in self._exe.store.open_effects():
            if ev.run_id == self.run_id or (scope is not None and ev.run_id not in scope):
                continue
            found.append({"run_id": ev.run_id, "step": ev.step, "key": ev.key, "tool": ev.name})
        return found


def unknowns(store: Store, get_run: Callable[[str], RunInfo]) -> list[dict[str, JSON]]:
    """Effects whose outcome is not settled: unknown, in flight (its run's lease is live), or
    waiting to retry, with the status of their run."""
    out: list[dict[str, JSON]] = []
    now = time.time()
    runs: dict[str, RunInfo] = {}
    for ev in store.open_effects(skip_damaged=True):
        try:
            info = runs.get(ev.run_id) or get_run(ev.run_id)
        except CorruptJournal as exc:
            flag(store.damage, ev.run_id, str(exc))  # its header: listed as damaged, not here
            continue
        runs[ev.run_id] = info
        live = bool(info.lease_owner and (info.lease_expires or 0) > now)
        out.append(
            {
                "run_id": ev.run_id,
                "step": ev.step,
                "tool": ev.name,
                "key": ev.key,
                "state": "in flight" if live else (ev.status or "unknown (no outcome)"),
                "run_status": info.status,
                "since": ev.at,
            }
        )
    return out
