"""The fault injector at the tool boundary: a seeded Bernoulli(fp) draw per (run, step,
attempt), of kind `pre` (nothing applied) or `post` (applied, then the reply is lost), with
every fault counted. `once=True` is the fault-once-per-call model (a retry never re-faults)."""

from __future__ import annotations

import random
import threading
from collections import Counter
from dataclasses import dataclass, field


class InjectedFault(Exception):
    """A `pre` fault: the call failed before the resource applied anything."""


class LostReply(TimeoutError):
    """A `post` fault: the resource applied the call, then the reply was lost."""


@dataclass
class FaultModel:
    """fp per call attempt; `p_post` the share of faults that land after the apply."""

    fp: float
    p_post: float = 0.0
    once: bool = False
    seed: int = 0

    def draw(self, run: str, step: int, attempt: int) -> str | None:
        # A string seed is hashed with SHA-512 by `random`, so draws are stable across processes.
        rng = random.Random(f"{self.seed}/{run}/{step}/{attempt}")
        hit = rng.random() < self.fp
        if not hit or (self.once and attempt > 0):
            return None
        return "post" if rng.random() < self.p_post else "pre"


@dataclass
class Injector:
    """Counts attempts per (run, step) itself, because a durable runtime replays confirmed steps
    without calling the tool: the attempt number is the number of real invocations so far."""

    model: FaultModel
    attempts: Counter[tuple[str, int]] = field(default_factory=Counter)
    faults: Counter[tuple[str, int]] = field(default_factory=Counter)
    kinds: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next(self, run: str, step: int, draw: str | None = None) -> str | None:
        """The fault for this invocation; `draw` names the random stream (the same task and
        repeat under every mode draws the same faults: common random numbers)."""
        with self.lock:
            attempt = self.attempts[(run, step)]
            self.attempts[(run, step)] += 1
            kind = self.model.draw(draw or run, step, attempt)
            if kind:
                self.faults[(run, step)] += 1
                self.kinds[kind] += 1
            return kind

    def run_faults(self, run: str) -> int:
        return sum(n for (r, _), n in self.faults.items() if r == run)

    def run_retries(self, run: str) -> int:
        return sum(n - 1 for (r, _), n in self.attempts.items() if r == run and n > 1)

    def recovered(self, run: str, done: set[int]) -> int:
        """Faults on steps that eventually completed."""
        return sum(n for (r, s), n in self.faults.items() if r == run and s in done)
