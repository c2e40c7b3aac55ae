"""Budgets as a ledger in run state: caps, admit before a spend, charge after it, exactly once.

Caps and charges are recorded steps, so a resumed run restores what was spent and spends nothing
again. A cap is raised from outside (`book.raise_budget`, `daybook budget RUN --raise`) by a
signal that the run consumes, recorded, only when an admission would otherwise be refused, so
replay takes the same path.
"""

from __future__ import annotations

from typing import Any

from ..errors import BudgetExceeded
from ..journal.decision import Decisions
from ..journal.execution import Execution
from ..journal.wait import Waits
from ..runtime.tree import ancestors, descendants
from ..store import Store
from .pool import BudgetPool

SOFT_LIMIT = 0.8  # past this share of a cap, `soft` turns true: time to narrow the work


class Budget:
    """`ctx.budget`: caps, admissions, charges and draws on shared pools, all recorded steps."""

    def __init__(self, exe: Execution, decisions: Decisions, waits: Waits) -> None:
        self._exe = exe
        self._decisions = decisions
        self._waits = waits
        self.caps: dict[str, float] = {}
        self.spent: dict[str, float] = {}

    def cap(self, **caps: float) -> None:
        """Set caps, e.g. `cap(usd=50, tokens=2_000_000)` (recorded; a later call adds or resets)."""
        for name, value in caps.items():
            if value < 0:
                raise ValueError(f"budget cap {name}={value} must be >= 0")
        recorded = self._decisions.decide("budget:cap", lambda: dict(caps)).value
        self.caps.update({k: float(v) for k, v in recorded.items()})

    def admit(self, **estimate: float) -> None:
        """Refuse (BudgetExceeded, naming the cap) a spend that would pass a cap; a pending raise
        of that cap is taken first."""
        while True:
            over = self._over(estimate)
            if over is None:
                self._admit_in_tree(estimate)
                return
            raised = self._waits.wait_for("budget:raise", timeout=0)
            if raised is None:
                name, cap, after = over
                raise BudgetExceeded(
                    f"run {self._exe.run_id!r}: {name} would reach {after:g}, past its cap of "
                    f"{cap:g} (spent {self.spent.get(name, 0.0):g}); raise it with `daybook budget "
                    f"{self._exe.run_id} --raise {name}=AMOUNT` or narrow the work",
                    name,
                    cap,
                )
            for key, value in dict(raised.payload or {}).items():
                self.caps[key] = self.caps.get(key, 0.0) + float(value)

    def _admit_in_tree(self, estimate: dict[str, float]) -> None:
        """A child run's spend counts against every ancestor's caps (H8): the tree's spent so
        far plus this estimate must fit under each; the check is a recorded step, so replay
        takes the same path whatever the tree spent since."""
        exe = self._exe
        if exe.settings.parent_run is None:
            return
        store, run_id = exe.store, exe.run_id
        found = self._decisions.decide("budget:tree", lambda: tree_over(store, run_id, estimate)).value
        if found:
            raise BudgetExceeded(
                f"run {run_id!r}: {found['name']} would reach {found['after']:g} across the run "
                f"tree of {found['run']!r}, past that run's cap of {found['cap']:g}; raise it with "
                f"`daybook budget {found['run']} --raise {found['name']}=AMOUNT` or narrow the work",
                str(found["name"]),
                float(found["cap"]),
            )

    def charge(self, **actual: float) -> None:
        """Record what a spend cost (exactly once: replay reads it back, never charges again)."""
        recorded = self._decisions.decide("budget:charge", lambda: dict(actual)).value
        for name, value in recorded.items():
            self.spent[name] = self.spent.get(name, 0.0) + float(value)

    def draw(self, pool: str, **amounts: float) -> bool:
        """Spend from the shared pool `pool` (a coordination entity across runs and processes):
        True if it fit under the pool's cap and was recorded there, False if not (nothing spent).
        Recorded, so replay never draws twice; also counted in this run's `spent`."""
        store = self._exe.store
        agent = self._exe.run_id
        pool_ = BudgetPool(store, pool)
        drawn = self._decisions.decide(
            f"budget:draw:{pool}",
            lambda: {"ok": pool_.draw(agent, **amounts), "amounts": dict(amounts)},
        ).value
        ok = bool(drawn["ok"])
        if ok:
            for name, value in amounts.items():
                self.spent[name] = self.spent.get(name, 0.0) + float(value)
        return ok

    def remaining(self) -> dict[str, float]:
        return {k: cap - self.spent.get(k, 0.0) for k, cap in self.caps.items()}

    @property
    def soft(self) -> bool:
        """True once any capped quantity has used SOFT_LIMIT (80%) of its cap."""
        return any(cap > 0 and self.spent.get(k, 0.0) >= SOFT_LIMIT * cap for k, cap in self.caps.items())

    def _over(self, estimate: dict[str, float]) -> tuple[str, float, float] | None:
        for name, value in estimate.items():
            cap = self.caps.get(name)
            after = self.spent.get(name, 0.0) + float(value)
            if cap is not None and after > cap + 1e-12:
                return name, cap, after
        return None


def summary(events: list[Any]) -> dict[str, dict[str, float]]:
    """Caps, raises and spent totals from a run's journal (for `daybook budget`)."""
    caps: dict[str, float] = {}
    spent: dict[str, float] = {}
    for ev in events:
        if ev.kind == "decision" and ev.status == "recorded":
            if ev.name == "budget:cap":
                caps.update({k: float(v) for k, v in (ev.data.get("value") or {}).items()})
            elif ev.name == "budget:charge":
                for k, v in (ev.data.get("value") or {}).items():
                    spent[k] = spent.get(k, 0.0) + float(v)
            elif ev.name.startswith("budget:draw:") and (ev.data.get("value") or {}).get("ok"):
                for k, v in ev.data["value"].get("amounts", {}).items():
                    spent[k] = spent.get(k, 0.0) + float(v)
        elif ev.kind == "signal" and ev.name == "signal:budget:raise" and ev.status == "received":
            for k, v in (ev.data.get("payload") or {}).items():
                caps[k] = caps.get(k, 0.0) + float(v)
    return {"caps": caps, "spent": spent}


def tree_over(store: Store, run_id: str, estimate: dict[str, float]) -> dict[str, Any] | None:
    """The first ancestor cap that `estimate` would pass, counting what the ancestor and every
    run below it spent; None when it fits under all."""
    for ancestor in ancestors(store, run_id):
        books = summary(store.load(ancestor))
        spent = dict(books["spent"])
        for below in descendants(store, ancestor):
            for name, value in summary(store.load(below.run_id))["spent"].items():
                spent[name] = spent.get(name, 0.0) + value
        for name, value in estimate.items():
            cap = books["caps"].get(name)
            after = spent.get(name, 0.0) + float(value)
            if cap is not None and after > cap + 1e-12:
                return {"run": ancestor, "name": name, "cap": cap, "after": after}
    return None
