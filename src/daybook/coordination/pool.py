"""Shared budget pools: one cap drawn on by many runs, kept as a coordination entity.

A pool is the entity `budget-pool:<name>`: its log holds `cap` entries (set by an operator) and
`spend` entries (one per successful draw). A draw takes the pool's lease, sums the log, records
the spend if it fits and lets go, so concurrent runs in any process never pass the cap. Inside a
run a draw is a recorded step (`ctx.budget.draw(pool, usd=...)`), so replay never draws again; a
crash between the pool's record and the run's own record can repeat one draw (the pool may
overshoot by at most one draw per crash).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ..checks import checked
from ..errors import ConfigError
from ..store import Store
from .entity import Entity

_CLAIM_FOR = 5.0  # seconds a draw may hold the pool; a draw takes milliseconds


@checked
@dataclass
class BudgetPool:
    store: Store
    name: str

    @property
    def entity(self) -> Entity:
        return Entity(self.store, f"budget-pool:{self.name}")

    def set_cap(self, by: str = "operator", **caps: float) -> None:
        """Set (replace) the pool's caps, e.g. `set_cap(usd=1.0)`; journaled in the pool's log."""
        if not caps or any(v < 0 for v in caps.values()):
            raise ConfigError("a pool cap needs non-negative amounts, e.g. usd=1.0")
        self._locked(by, lambda: self.entity.record(by, "cap", {k: float(v) for k, v in caps.items()}))

    def totals(self) -> tuple[dict[str, float], dict[str, float]]:
        """(caps, spent) from the pool's log."""
        caps: dict[str, float] = {}
        spent: dict[str, float] = {}
        for entry in self.entity.view().log:
            data = entry.data if isinstance(entry.data, dict) else {}
            if entry.action == "cap":
                caps = {k: float(v) for k, v in data.items()}
            elif entry.action == "spend":
                for k, v in data.items():
                    spent[k] = spent.get(k, 0.0) + float(v)
        return caps, spent

    def draw(self, agent: str, **amounts: float) -> bool:
        """Spend from the pool if every amount fits under its cap; False (nothing spent) if not."""

        def attempt() -> bool:
            caps, spent = self.totals()
            for k, v in amounts.items():
                if k in caps and spent.get(k, 0.0) + v > caps[k] + 1e-12:
                    return False
            return self.entity.record(agent, "spend", {k: float(v) for k, v in amounts.items()})

        return self._locked(agent, attempt)

    def _locked(self, agent: str, fn: Callable[[], bool]) -> bool:
        deadline = time.monotonic() + 30
        while not self.entity.claim(agent, _CLAIM_FOR):
            if time.monotonic() > deadline:
                raise ConfigError(f"budget pool {self.name!r} stayed locked for 30s; is a holder stuck?")
            time.sleep(0.005)
        try:
            return bool(fn())
        finally:
            self.entity.release(agent)
