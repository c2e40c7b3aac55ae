"""The modes under test as policies on one harness (spec §5.2). Tx-Full is daybook itself
(harness.run_tx_full); the others are what a caller without it does:

- CR: checkpoint the client-side state before each call, restore it on a fault and retry
  (the calls go out at once; a service's server state is not in the checkpoint);
- No-Frontier: effects applied at once with their before-images; a fault compensates them in
  reverse order and ends the task (no retry, no ordering);
- No-Tx: calls straight to the resource; a fault ends the task;
- Tx-NoFrontier+Retry: No-Frontier plus retries under the same idempotency key.

Paper-faithful fault kinds: `pre` for every mode but No-Tx, whose faults are `post` (applied,
reply lost); `p_post` overrides that for every mode."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from faults import FaultModel, InjectedFault, Injector, LostReply
from harness import Outcome, Task, World, run_tx_full

import daybook

MODES = ("Tx-Full", "CR", "No-Frontier", "No-Tx")
FAULTS = (InjectedFault, LostReply)


def fault_model(mode: str, fp: float, p_post: float | None, once: bool = False, seed: int = 0) -> FaultModel:
    post = p_post if p_post is not None else (1.0 if mode == "No-Tx" else 0.0)
    return FaultModel(fp=fp, p_post=post, once=once, seed=seed)


def _cr(world: World, task: Task, retries: int) -> bool:
    for step, op in enumerate(task.ops):
        for _ in range(retries + 1):
            snap = world.store.snapshot()
            try:
                world.call(step, op, None)
                world.done.add(step)
                break
            except FAULTS:
                world.store.restore(snap)  # rolls back only what the client can checkpoint
        else:
            return False
    return True


def _compensating(world: World, task: Task, retries: int, keyed: bool) -> bool:
    undo: list[tuple[str, Any]] = []
    for step, op in enumerate(task.ops):
        for _ in range(retries + 1):
            key = f"{world.run}/{step}" if keyed else None
            try:
                before = world.call(step, op, key)
                undo.append((op.name, before))
                world.done.add(step)
                break
            except FAULTS:
                continue
        else:
            for name, before in reversed(undo):
                world.store.undo(name, before)
            world.done.clear()
            return False
    return True


def _no_tx(world: World, task: Task, retries: int) -> bool:
    for step, op in enumerate(task.ops):
        try:
            world.call(step, op, None)
            world.done.add(step)
        except FAULTS:
            return False
    return True


POLICIES: dict[str, Callable[[World, Task, int], bool]] = {
    "CR": _cr,
    "No-Frontier": lambda w, t, r: _compensating(w, t, 0, keyed=True),
    "Tx-NoFrontier+Retry": lambda w, t, r: _compensating(w, t, r, keyed=True),
    "No-Tx": _no_tx,
}


def run_mode(
    mode: str,
    task: Task,
    world: World,
    retries: int = 3,
    book: daybook.Daybook | None = None,
) -> Outcome:
    """One task under one mode; the world's store starts empty."""
    if mode == "Tx-Full":
        assert book is not None
        return run_tx_full(book, world, task, retries)
    return world.outcome(task, POLICIES[mode](world, task, retries))


def injector(
    mode: str, fp: float, p_post: float | None = None, once: bool = False, seed: int = 0
) -> Injector:
    return Injector(fault_model(mode, fp, p_post, once, seed))
