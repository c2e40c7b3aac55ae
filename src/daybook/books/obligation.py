"""The obligation ledger: what runs owe (a refund promised, a quote that expires).

`ctx.obligation` opens one as a recorded row; `ctx.fulfil` / `ctx.cancel` settle it with new rows
(nothing is edited). `obligations` reads them across runs, open past due counting as breached.
"""

from __future__ import annotations

import time
from typing import Any

from ..errors import ConfigError
from ..journal.decision import Decision
from ..journal.execution import step_fingerprint
from ..journal.facet import Facet
from ..records import JSON, Kind
from ..store import Store


class Obligations(Facet):
    """`ctx.obligation`, `ctx.fulfil`, `ctx.cancel`."""

    def obligation(
        self,
        kind: str,
        *,
        owner: str,
        due_in: float,
        about: JSON = None,
        decision: Decision[Any] | None = None,
    ) -> str:
        """Record something this run owes (a refund promised, a quote that expires, an approval
        pending): open until `fulfil`/`cancel`, shown as `breached` by `daybook obligations` once
        `due_in` seconds have passed. It outlives a suspend of days, and the run itself. Returns
        its id (`<run id>/<step>`)."""
        exe = self._exe
        step = exe.alloc()
        label = f"obligation:{kind}"
        fp = step_fingerprint({"kind": kind, "owner": owner, "due_in": due_in, "about": about}, step, label)
        recs = exe.expect(step, Kind.OBLIGATION, label, fp)
        if recs is None:
            exe.append(
                Kind.OBLIGATION,
                step,
                label,
                status="open",
                fp=fp,
                data={
                    "kind": kind,
                    "owner": owner,
                    "due": exe.clock() + due_in,
                    "about": about,
                    "decision": decision.id if decision else exe.last_decision,
                },
            )
        return self._exe.id_of(step)

    def fulfil(self, obligation_id: str, note: str = "") -> None:
        """Mark an obligation fulfilled (a new row; the open one stays as history)."""
        self._settle(obligation_id, "fulfilled", note)

    def cancel(self, obligation_id: str, note: str = "") -> None:
        """Mark an obligation cancelled (nothing is owed any more)."""
        self._settle(obligation_id, "cancelled", note)

    def _settle(self, obligation_id: str, status: str, note: str) -> None:
        exe = self._exe
        step = exe.alloc()
        label = f"obligation:{status}"
        fp = step_fingerprint({"id": obligation_id, "note": note}, step, label)
        if exe.expect(step, Kind.OBLIGATION, label, fp) is None:
            exe.append(
                Kind.OBLIGATION,
                step,
                label,
                status=status,
                fp=fp,
                data={"obligation": obligation_id, "note": note},
            )


def obligations(store: Store, status: str | None = None) -> list[dict[str, JSON]]:
    """Every obligation across runs with its state: open, fulfilled, cancelled, or breached
    (open past its due time). `status` filters on that state."""
    if status not in (None, "open", "fulfilled", "cancelled", "breached"):
        raise ConfigError("status must be open, fulfilled, cancelled or breached")
    found: dict[str, dict[str, JSON]] = {}
    now = time.time()
    for ev in store.events_of_kind(Kind.OBLIGATION.value):
        if ev.status == "open":
            found[f"{ev.run_id}/{ev.step}"] = {
                "id": f"{ev.run_id}/{ev.step}",
                "run_id": ev.run_id,
                **ev.data,
                "state": "open",
                "opened": ev.at,
            }
            continue
        target = found.get(str(ev.data.get("obligation")))
        if target is not None:
            target["state"] = ev.status
            target["settled"] = ev.at
    rows = list(found.values())
    for row in rows:
        due = row.get("due")
        if row["state"] == "open" and isinstance(due, float) and due < now:
            row["state"] = "breached"
    return [r for r in rows if status is None or r["state"] == status]
