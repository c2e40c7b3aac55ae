"""Compensation: `ctx.compensate` undoes a run's confirmed effects, newest first, exactly once.

Each effect is undone by its tool's registered inverse under the key `comp/<key>`, so a kill
mid-unwind resumes without repeats. What cannot be undone is reported, never hidden: the run
stops as `stuck`, listing exactly what remains. A model may propose an undo where none is
registered, only through a validator and an approval gate, and never for an irreversible act.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import EffectFailed, RunStuck
from ..gates.gate import Gates
from ..journal import keys
from ..journal.decision import Decisions
from ..journal.execution import Execution
from ..journal.facet import Facet
from ..journal.stop import Stop
from ..journal.tool import Tool
from ..journal.tool import lookup as lookup_tool
from ..records import Event, Kind, RunInfo, Status
from ..runtime import operator
from ..runtime.workflow import Apps, load
from ..tx.facet import Transactions


@dataclass
class Compensation:
    """What `ctx.compensate()` did, effect keys in unwind (LIFO) order."""

    compensated: list[str] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)  # the inverse failed
    no_inverse: list[str] = field(default_factory=list)  # nothing registered can undo it

    @property
    def complete(self) -> bool:
        return not self.stuck and not self.no_inverse


class Compensations(Facet):
    """`ctx.compensate`: the unwind, with a model-proposed undo where none is registered."""

    def __init__(self, exe: Execution, decisions: Decisions, effects: Transactions, gates: Gates) -> None:
        super().__init__(exe)
        self._decisions = decisions
        self._effects = effects  # `ctx.effect`: an undo inside a transaction is the block's
        self._gates = gates

    def compensate(
        self,
        *,
        on_stuck: Callable[[Compensation], None] | None = None,
        propose: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None,
        validate: Callable[[dict[str, Any], dict[str, Any]], bool] | None = None,
        approvers: Sequence[str] | None = None,
        gate_timeout: float = 8 * 3600,
        keys: Sequence[str] | None = None,
        strict: bool = True,
    ) -> Compensation:
        """Undo this run's confirmed effects, newest first, each with its tool's registered inverse
        under its own key `comp/<key>`, once (a kill mid-unwind resumes it without repeats).

        If an inverse fails after its retries, or an effect has no inverse, the rest are still
        unwound, `on_stuck(report)` fires (once: it is a recorded step) and the run stops as
        `stuck`, listing exactly what remains. It is never reported compensated when it is not.

        Where no inverse is registered, `propose(effect)` (e.g. a model; recorded) may suggest
        `{"tool": NAME, "args": {...}}`: it must name a registered tool that is not irreversible,
        pass `validate(effect, plan)` (recorded) and an approval gate like any forward act
        (`approvers`, `gate_timeout`); the effect itself must not be irreversible. Otherwise the
        effect stays listed as having no inverse.

        `keys` limits the unwind to those effects (a retraction undoes what was done for one
        step, not the run); `strict=False` returns an incomplete report instead of stopping the
        run as `stuck` (the caller says what remains, as a retraction's entry does)."""
        effects = self._done_so_far()
        report = Compensation()
        for step in sorted(effects, reverse=True):
            eff = effects[step]
            if eff.get("status") != Status.CONFIRMED or (keys is not None and eff["key"] not in keys):
                continue
            tool = lookup_tool(eff["name"])
            inverse = tool.inverse if tool is not None and tool.effect.has_inverse else None
            if not inverse:
                if self._proposed_undo(eff, tool, propose, validate, approvers, gate_timeout):
                    report.compensated.append(str(eff["key"]))
                else:
                    report.no_inverse.append(str(eff["key"]))
                continue
            try:
                self._undo(inverse, eff)
                report.compensated.append(str(eff["key"]))
            except EffectFailed:
                report.stuck.append(str(eff["key"]))
        if report.complete or not strict:
            return report
        if on_stuck is not None:
            self._decisions.decide("on_stuck", lambda: on_stuck(report))
        raise self._stuck(report)

    def _undo(self, inverse: Tool[Any], eff: dict[str, Any]) -> None:
        """Run `inverse` under `comp/<key>`. An undo already begun before this unwind and never
        settled (a transaction's abort cut by a kill, its inverse in flight) is settled at its own
        step, as its replay would: reconciled under its key (asked, re-sent if idempotent or
        absent, else parked), never sent under another key."""
        exe = self._exe
        begun = eff.get("undo_step")
        key, effect = keys.compensation_key(eff["key"]), self._effects.effect
        if begun is None:
            effect(inverse, key=key, original=eff["args"], result=eff["result"])
            return
        with exe.revisit(begun, [ev for ev in exe.store.load(exe.run_id) if ev.step == begun]):
            effect(inverse, key=key, original=eff["args"], result=eff["result"])

    def _done_so_far(self) -> dict[int, dict[str, Any]]:
        """This run's effects before the current step (not undos, nor effects an aborted
        transaction already undid), by step, with their outcome."""
        exe = self._exe
        upto = exe.next_step
        effects: dict[int, dict[str, Any]] = {}
        events = exe.store.load(exe.run_id)
        undone = _undone(events, upto)
        begun = _begun(events, upto)
        for ev in events:
            if ev.step is None or ev.step >= upto or keys.is_compensation(ev.key) or ev.key in undone:
                continue
            if ev.kind == Kind.INTENT:
                effects[ev.step] = {"name": ev.name, "key": ev.key, "args": ev.data.get("args")}
                effects[ev.step]["undo_step"] = begun.get(str(ev.key))
            elif ev.kind == Kind.OUTCOME and ev.step in effects:
                effects[ev.step]["status"] = ev.status
                effects[ev.step]["result"] = ev.data.get("result")
        return effects

    def _stuck(self, report: Compensation) -> Stop:
        return Stop(
            RunStuck(
                self.run_id,
                f"run {self.run_id!r} is stuck: compensated {report.compensated or 'nothing'}; "
                f"inverse failed for {report.stuck or 'none'}; no inverse for "
                f"{report.no_inverse or 'none'}. Undo what remains by hand, record it with "
                "`daybook resolve`, and close the run",
            ),
            True,
            journal=True,
            status="stuck",
        )

    def _proposed_undo(
        self,
        eff: dict[str, Any],
        tool: Tool[Any] | None,
        propose: Callable[[dict[str, Any]], dict[str, Any] | None] | None,
        validate: Callable[[dict[str, Any], dict[str, Any]], bool] | None,
        approvers: Sequence[str] | None,
        gate_timeout: float,
    ) -> bool:
        # A model must never improvise the undo of an irreversible act (a sent email, a wire).
        if propose is None or tool is None or not tool.effect.undo_may_be_proposed:
            return False
        effect = {k: eff.get(k) for k in ("name", "key", "args", "result")}
        plan = self._decisions.decide(f"propose_compensation:{eff['key']}", lambda: propose(effect)).value
        if not isinstance(plan, dict):
            return False
        undo = lookup_tool(str(plan.get("tool")))
        if undo is None or not undo.effect.undo_may_be_proposed:
            return False
        checker = validate
        if (
            checker is None
            or not self._decisions.decide(
                f"validate_compensation:{eff['key']}", lambda: bool(checker(effect, plan))
            ).value
        ):
            return False
        verdict = self._gates.gate(f"compensate:{undo.name}", approvers=approvers, timeout=gate_timeout)
        if not verdict.approved:
            return False
        try:
            self._effects.effect(undo, key=keys.compensation_key(eff["key"]), **dict(plan.get("args") or {}))
        except EffectFailed:
            return False
        return True


def unwind(store: Any, info: RunInfo, context: Callable[[Execution], Any], app: Apps) -> Compensation:
    """Undo the confirmed effects of cancelled run `info` here, newest first, as `ctx.compensate`
    does (`book.cancel(compensate=True)`); `app` names the module registering the tools."""
    load(info.workflow, info.ref, app)  # registers the workflow's tools and their inverses
    done = operator.unwind(store, info.run_id, context, lambda ctx: ctx.compensate())
    return Compensation(done["compensated"], done["stuck"], done["no_inverse"])


def _undone(events: list[Event], upto: int) -> set[str]:
    """Keys of effects whose undo (`comp/<key>`) was confirmed before step `upto` (an aborted
    transaction compensated them): a later `ctx.compensate()` leaves them alone. (Undos at or
    after `upto` are this unwind's own, met again when it is replayed.)"""
    # Effects a semantic recovery undid (in its own recovery run) before re-running their steps.
    recovered = {
        str(key)
        for ev in events
        if ev.kind == Kind.RUN_RETRIED
        for key in (ev.data.get("recovery") or {}).get("compensated") or ()
    }
    comps = {
        ev.step: keys.compensated(str(ev.key))
        for ev in events
        if ev.kind == Kind.INTENT and ev.step is not None and ev.step < upto and keys.is_compensation(ev.key)
    }
    return recovered | {
        comps[ev.step]
        for ev in events
        if ev.kind == Kind.OUTCOME and ev.step in comps and ev.status == Status.CONFIRMED
    }


def _begun(events: list[Event], upto: int) -> dict[str, int]:
    """Effect key -> the step of its undo (`comp/<key>`) begun before step `upto` (its intent
    journaled), whatever its outcome: an unwind settles it there, never under a new step."""
    return {
        keys.compensated(str(ev.key)): ev.step
        for ev in events
        if ev.kind == Kind.INTENT and ev.step is not None and ev.step < upto and keys.is_compensation(ev.key)
    }
