"""The act: one call of a tool as the journal knows it, the one object every path that performs
or stages a call builds (`ctx.effect`, a transaction's staged and held calls and its flush,
speculation's branches, compensation's undos).

An act is its tool (and so its effect class), its key with its decorations (`keys.py`), its
arguments concealed as the journal holds them (secrets as keyed digests) and live as the tool
receives them, the decision it links to, and, inside a transaction, the transaction's id, epoch
and attempt, which every row of the act names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..records import JSON
from ..store.secrets import reveal_all
from .execution import Execution
from .tool import Tool


@dataclass(frozen=True, slots=True)
class TxMark:
    """The transaction attempt an act belongs to."""

    tx_id: str
    epoch: int
    attempt: int

    def data(self) -> dict[str, JSON]:
        return {"tx_id": self.tx_id, "epoch": self.epoch, "attempt": self.attempt}


@dataclass(slots=True)
class Act:
    """One call of `tool` under `key` (see the module docstring)."""

    tool: Tool[Any]
    key: str | None
    stored: dict[str, JSON]  # as journaled: secrets as digests
    live: dict[str, Any]  # as given (revealed for the tool when it runs)
    decision: str | None = None
    step: int | None = None
    tx: TxMark | None = None


def conceal(exe: Execution, tool: Tool[Any], args: dict[str, Any]) -> tuple[dict[str, JSON], bool]:
    """A call's arguments as the journal holds them, the one concealment of every act (an
    effect's intent, a transaction's staged or held call, a release gate's question): each
    `Secret` and each argument the tool names in `secrets=` as its keyed digest; and whether
    anything was concealed (the tool then receives `live(args)`, revealed only when it runs: a
    replayed secret is withheld)."""
    stored, hidden = exe.cover().conceal(args, tool.secrets)
    assert isinstance(stored, dict)
    return stored, hidden


def live(args: dict[str, Any], hidden: bool) -> dict[str, Any]:
    """The arguments as the tool receives them."""
    return reveal_all(args) if hidden else args


def act_of(
    exe: Execution,
    tool: Tool[Any],
    key: str | None,
    args: dict[str, Any],
    *,
    decision: str | None = None,
    step: int | None = None,
    tx: TxMark | None = None,
) -> Act:
    """The act of calling `tool(**args)` under `key`, its arguments concealed (`live` keeps the
    caller's arguments: revealed when the act runs)."""
    stored, _ = conceal(exe, tool, args)
    return Act(tool, key, stored, args, decision, step, tx)
