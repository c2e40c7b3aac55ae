"""Effects: `ctx.effect`, an act on the world with its intent journaled before it and its
outcome after, under a key that names the decision it came from.

This module owns step allocation and keys for effects (their grammar: `keys.py`), the replay
fast path, and the `Act` (`act.py`) each call becomes, inside a transaction too; the lifecycle
of an effect that is not settled yet (call, retry, resolve) is `lifecycle.py`, driven by
`driver.py`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from ..errors import DuplicateKey, NonDeterminismError
from ..records import JSON, Event, Kind, Status, fingerprint, is_plain
from . import keys
from .act import Act, TxMark, conceal, live
from .decision import Decision
from .driver import call_inline, drive, drive_async, inline, ready
from .execution import Execution, step_fingerprint
from .facet import Facet
from .lifecycle import Done, EffectLifecycle, replayed_result
from .stop import Stop
from .tool import Tool

T = TypeVar("T")


def _same_act(tool: Tool[Any], stored: dict[str, Any]) -> Callable[[Event], bool | None]:
    """Whether a confirmed act a re-run asks for again is the same act: the same arguments up to
    branch suffixes (a Message-ID made from a key) and the tool's `volatile` ones. For an
    irreversible tool, "no" is None: it must not run twice (the cursor parks the run)."""

    def same(old: Event) -> bool | None:
        def norm(args: Any) -> str:
            kept = {k: v for k, v in dict(args or {}).items() if k not in tool.volatile}
            return keys.unbranched(json.dumps(kept, sort_keys=True, default=str))

        if norm(old.data.get("args")) == norm(stored):
            return True
        return None if tool.effect.irreversible else False

    return same


class Effects(Facet):
    """`ctx.effect`, `ctx.key` and `ctx.held` (what bufferable adapters hold until commit)."""

    def __init__(self, exe: Execution) -> None:
        super().__init__(exe)
        # What bufferable adapters hold until their commit step, per adapter instance: memory
        # of this execution only, refilled on replay by the steps that filled it.
        self._held: dict[object, list[Any]] = {}

    def key(self, decision: Decision[Any], kind: str, i: int = 0) -> str:
        """The idempotency key `<decision id>/<kind>/<i>`: names the decision, not its inputs."""
        return keys.decision_key(decision.id, kind, i)

    def held(self, owner: object, *, take: bool = False) -> list[Any]:
        """What `owner` (a bufferable adapter: staged files, SQL statements, an outbox) holds for
        this execution until its commit step; `take=True` returns it and starts a new list. Not
        journaled: the steps that fill it replay in order, so a resumed run rebuilds it."""
        if take:
            return self._held.pop(owner, [])
        return self._held.setdefault(owner, [])

    def effect(
        self,
        tool: Tool[Any],
        /,
        *,
        key: str | None = None,
        decision: Decision[Any] | None = None,
        **args: JSON,
    ) -> Any:
        """Perform `tool(**args)` with an intent journaled before it and the outcome after.

        The key is `key` if given; else `<decision id>/<tool>/<i>` when derived from a decision;
        else `<run id>/<step>`. It never depends on the argument values.
        """
        if not isinstance(tool, Tool):
            raise TypeError(f"ctx.effect needs a @daybook.tool, got {tool!r}")
        return self.perform(tool, key, decision, args, None)

    def perform(
        self,
        tool: Tool[Any],
        key: str | None,
        decision: Decision[Any] | None,
        args: dict[str, Any],
        tx: TxMark | None,
    ) -> Any:
        """`ctx.effect`'s act, also inside a transaction (`tx`: the attempt its rows name)."""
        exe = self._exe
        step = exe.alloc()
        if not tool.secrets and is_plain(args):
            # The hot path: plain JSON holds no Secret, so the one walk that checked the
            # arguments for the journal also found nothing to conceal.
            stored: dict[str, Any] = args
            hidden = False
            fp = fingerprint(stored, "", False)  # plain JSON: its canonical text cannot fail
        else:
            # The journal (and the fingerprint) gets secrets as digests; the tool the values.
            stored, hidden = conceal(exe, tool, args)
            fp = step_fingerprint(stored, step, tool.name, step not in exe.steps)
        # Only a step a journal branch re-runs softly needs the same-act test (not the hot path).
        same = _same_act(tool, stored) if step in exe.soft else None
        recs = exe.expect(step, Kind.INTENT, tool.name, fp, same)
        key = self._key_for(step, tool, key, decision)
        if recs is not None and recs[0].key != key and keys.unbranched(recs[0].key) != keys.unbranched(key):
            raise Stop(
                NonDeterminismError(
                    f"run {exe.run_id!r} step {step} {tool.name!r}: its key changed from "
                    f"{recs[0].key!r} to {key!r}; keys must name the decision, not its inputs"
                ),
                True,
            )
        if recs is not None:
            last = recs[-1]
            if last.kind == Kind.OUTCOME and last.status == Status.CONFIRMED:
                # The replay fast path: a settled effect is a dictionary lookup.
                result = replayed_result(last)
                return ready(result) if tool.is_async else result
        # An effect links to exactly one decision recorded before its intent (J7): the one given,
        # else the latest made in this run.
        source = decision.id if decision is not None else exe.last_decision
        act = Act(tool, key, stored, live(args, hidden) if hidden else args, source, step, tx)
        life = EffectLifecycle(exe, act, fp, recs)
        if recs is None and inline(exe, tool):
            # The hot path: a fresh effect whose call runs right here, no machine to drive
            # unless the call was refused (then the machine goes on from the refusal).
            life.first()
            state = life.answered(call_inline(exe, tool, key, act.live))
            if isinstance(state, Done):
                return state.value
            return drive(exe, life.flow(state), tool, key, act.live)
        if tool.is_async:
            return drive_async(exe, life.flow(), tool, key, act.live)
        return drive(exe, life.flow(), tool, key, act.live)

    def _key_for(self, step: int, tool: Tool[Any], key: str | None, decision: Decision[Any] | None) -> str:
        """The effect's key: as named, else derived from its decision, else from its step."""
        exe = self._exe
        named = key is not None
        if key is None and decision is not None:
            n = exe.per_decision.get(decision.id, 0)
            exe.per_decision[decision.id] = n + 1
            key = keys.decision_key(decision.id, tool.name, n)
        # Derived keys are unique by construction; only keys the code names itself are tracked,
        # so memory does not grow with the run (the store's unique index backs this up).
        if named and step in exe.rebranched and key is not None:
            key = keys.branched(key, exe.rebranched[step])  # a step run again on a journal branch
        key = key or exe.id_of(step)
        owner = exe.keys.setdefault(key, step) if named else step
        if owner != step:
            raise Stop(
                DuplicateKey(
                    f"run {exe.run_id!r}: steps {owner} and {step} were both given key {key!r}; "
                    "each effect needs its own key (use ctx.key(decision, kind, i))"
                ),
                True,
            )
        return key
