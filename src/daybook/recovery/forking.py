"""Editing a past turn (S13): what a fork does to the acts the original made after the fork point.

`runtime/fork.py` creates the fork; this is its undo, handed in by `book.fork`: the original's
later confirmed compensable acts are undone, newest first, by their tools' inverses, each once,
in a recovery run of the original (`<run>~undo@<step>`, leased like any run: `undo.py`; a fork
cut short by a crash is finished by the same `fork` call again). An act an earlier fork (or
recovery) already undid is not undone twice: its undo's key `comp/<key>` is unique in the store.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import ConfigError
from ..journal import keys
from ..journal.execution import Execution
from ..records import JSON, Kind, RunInfo, Status
from ..runtime.claim import Claims
from ..runtime.fork import Undo
from ..store import Store
from .trace import Effect
from .undo import undo_effects


def undo_run_id(run_id: str, at: int) -> str:
    return f"{run_id}~undo@{at}"


def undoer(store: Store, claims: Claims, at: int, context: Callable[[Execution], Any]) -> Undo:
    """The undo `runtime.fork.fork` runs before it creates a fork of a run at step `at`."""

    def undo(info: RunInfo, later: list[dict[str, JSON]]) -> list[str]:
        rid = undo_run_id(info.run_id, at)
        todo, done = [], []
        for e in reversed(later):  # newest first
            if e["class"] != "compensable" or e["status"] != Status.CONFIRMED.value:
                continue
            key = str(e["key"])
            earlier = _undone_elsewhere(store, key, rid)
            if earlier:
                done.append(key)
            else:
                todo.append(Effect(str(e["tool"]), key, "compensable", "confirmed"))
        again = f"the same `daybook fork {info.run_id} --at {at} ...`"
        return done + undo_effects(store, claims, info, todo, rid, context, again)

    return undo


def _undone_elsewhere(store: Store, key: str, rid: str) -> bool:
    """Whether another run (an earlier fork's or a recovery's) undid `key` already; raises if
    that undo's outcome is not settled (it may or may not have happened)."""
    intent = store.find_intent(keys.compensation_key(key))
    if intent is None or intent.run_id == rid:
        return False
    outcomes = [ev for ev in store.load(intent.run_id) if ev.step == intent.step and ev.kind == Kind.OUTCOME]
    if outcomes and outcomes[-1].status == Status.CONFIRMED:
        return True
    raise ConfigError(
        f"the undo of {key!r} (run {intent.run_id!r}, step {intent.step}) has no settled outcome: "
        f"settle it first (`daybook resolve {intent.run_id} {intent.step} ...`), then fork again"
    )
