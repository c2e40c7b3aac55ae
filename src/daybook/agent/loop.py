"""The durable agent loop: observe, decide, gate, verify, act, fold, judge, compensate.

A reusable building block over the journal. Each iteration reads the world fresh (a recorded
observation), asks the model once (budget admitted before, charged by the runtime, the completion
recorded), passes gated actions through an approval gate addressed to that decision, re-checks
the precondition against the world right before acting, and acts under the decision's key.
At the end a judge grades the outcome (recorded, so replay never grades again); a failure, an
exhausted budget or a rejected goal unwinds the effects. Every run ends in one of
`ok | needs_review | compensated | stuck`, and replay never samples the model again, never
re-fires a confirmed effect and never spends budget again.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..context import Context
from ..errors import BudgetExceeded, EffectFailed, StepRetracted
from ..journal.decision import Decision
from ..journal.llm import LLMClient
from ..journal.tool import Tool, gate_terms
from ..steering.revision import Revision

JSONDict = dict[str, Any]


@dataclass(frozen=True)
class Action:
    """What the model chose: a tool name (or "stop") and its arguments, with its reason."""

    tool: str
    args: JSONDict = field(default_factory=dict)
    why: str = ""

    @staticmethod
    def parse(text: str) -> Action:
        """Read `{"tool": ..., "args": {...}, "why": ...}` from the model's reply."""
        try:
            raw = json.loads(text)
        except ValueError:
            raw = None
        if not isinstance(raw, dict) or not isinstance(raw.get("args", {}), dict | None):
            return Action("stop", {}, f"unparseable reply: {text[:200]}")
        return Action(str(raw.get("tool", "stop")), dict(raw.get("args") or {}), str(raw.get("why", "")))


@dataclass(frozen=True)
class Judgement:
    """A judge's verdict. `deterministic`: an oracle (tests, an invariant, an API said ok) rather
    than a model's opinion; only a deterministic fail or a person's reject unwinds effects."""

    passed: bool
    confidence: float = 1.0
    deterministic: bool = True
    note: str = ""


@dataclass
class Policy:
    """Which actions wait for a person (every irreversible tool, plus `gated`), for how long,
    and who may approve them."""

    gated: Sequence[str] = ()
    approvers: Sequence[str] | None = None
    gate_timeout: float = 8 * 3600
    review_timeout: float = 8 * 3600
    confident: float = 0.9  # a model judge at or above this is accepted without review
    notify: Callable[[JSONDict], None] | None = None  # tells approvers a gate opened (once)

    def is_gated(self, action: Action) -> bool:
        return action.tool in self.gated


@dataclass
class LoopResult:
    outcome: str  # ok | needs_review | compensated | stuck
    history: list[JSONDict]
    judgement: JSONDict | None = None
    reason: str = ""

    def as_dict(self) -> JSONDict:
        return {
            "outcome": self.outcome,
            "history": self.history,
            "judgement": self.judgement,
            "reason": self.reason,
        }


@dataclass
class AgentLoop:
    """Configure once, then `run(ctx, goal)` inside a workflow.

    `observe()` reads the world; `prompt(goal, observation, history)` builds the model prompt;
    `verify(action, observation)` re-checks the precondition right before acting (None: no
    check); `judge(goal, history)` grades the outcome; `cost(completion)` turns a completion into
    `{"usd": ..., "tokens": ...}`, charged by the runtime in the model call's row instead of the
    price table's; `estimate` is admitted before each model call."""

    llm: LLMClient
    tools: Mapping[str, Tool[Any]]
    observe: Callable[[], Any]
    prompt: Callable[[str, Any, list[JSONDict]], str]
    judge: Callable[[str, list[JSONDict]], Judgement]
    policy: Policy = field(default_factory=Policy)
    verify: Callable[[Action, Any], bool] | None = None
    estimate: Mapping[str, float] = field(default_factory=dict)
    cost: Callable[[JSONDict], Mapping[str, float]] | None = None
    max_iterations: int = 20
    # What a revision ("8000 words, not 6000") makes the agent redo: the decision ids of
    # earlier history entries, recorded in a `re-evaluate` decision. None: nothing is redone;
    # the revision is in the next prompt and the model takes it from there.
    reevaluate: Callable[[Revision, list[JSONDict]], list[str]] | None = None
    # After a pause longer than this (seconds), the first pass after resume starts with a
    # recorded primer: a short summary of the trace and the revisions (`summarize` below).
    primer_after: float = 3600.0

    def run(self, ctx: Context, goal: str) -> LoopResult:
        history: list[JSONDict] = []
        try:
            for _ in range(self.max_iterations):
                self._fold_revisions(ctx, history)
                observation = ctx.decide("observe", self.observe).value
                decision = self._decide(ctx, goal, observation, history)
                action = Action.parse(decision.value["text"])
                if action.tool == "stop":
                    break
                entry: JSONDict = {
                    "decision": decision.id,
                    "tool": action.tool,
                    "args": action.args,
                    "why": action.why,
                }
                history.append(entry)
                tool = self.tools.get(action.tool)
                if tool is None:
                    entry["state"] = "unknown_tool"
                    continue
                if {"key", "decision", "idempotency_key"} & set(action.args):
                    # The key names the decision; a model never gets to choose it.
                    entry["state"] = "invalid_args"
                    continue
                # Irreversible acts are gated by default, as are the policy's named ones.
                if tool.effect.gated_by_agent_loop or self.policy.is_gated(action):
                    verdict = ctx.gate(
                        action.tool,
                        decision=decision,
                        approvers=self.policy.approvers,
                        timeout=self.policy.gate_timeout,
                        notify=self.policy.notify,
                        # The exact act: the verdict is bound to its digest.
                        about={"tool": tool.name, "args": action.args, "key": decision.key(tool.name, 0)},
                        **gate_terms(tool, action.args),
                    )
                    entry["gate"] = verdict.outcome
                    if not verdict.approved:
                        entry["state"] = verdict.outcome
                        continue
                if self.verify is not None:
                    fresh = ctx.decide("observe", self.observe).value
                    holds = _bind(self.verify, action, fresh)
                    if not ctx.decide("verify", holds).value:
                        entry["state"] = "stale"
                        continue
                _act(ctx, tool, decision, action, entry)
        except (BudgetExceeded, EffectFailed) as exc:
            return self._unwind(ctx, history, f"{type(exc).__name__}: {exc}")
        return self._judge(ctx, goal, history)

    def _fold_revisions(self, ctx: Context, history: list[JSONDict]) -> None:
        """Revisions sent since the last pass join the history the next prompt is built from
        (an entry with a `revision` key: add | revise | retract); a revision also gets a
        recorded `re-evaluate` decision listing which earlier decisions it redoes. After a long
        pause, a recorded primer comes first."""
        primer = ctx.primer(self.primer_after, lambda paused: summarize(paused, history))
        if primer is not None:
            history.append({"primer": primer})
        for rev in ctx.revisions():
            entry: JSONDict = {
                "revision": rev.kind,
                "text": rev.text,
                "author": rev.author,
                "target": rev.target,
                "id": rev.id,
            }
            if rev.kind == "revise":
                entry["redo"] = self._reevaluate(ctx, rev, list(history))
            elif rev.kind == "retract" and rev.target is not None:
                # Undoing confirmed effects needs an operator's key once operators exist: a name
                # taken on trust is then read (the model sees it) but undoes nothing, and says
                # what it left standing (`Revision.binding`).
                entry["authenticated"] = rev.authenticated
                undo = _retract if rev.binding else _held
                entry.update(undo(ctx, rev.target, history))
            history.append(entry)

    def _reevaluate(self, ctx: Context, rev: Revision, history: list[JSONDict]) -> Any:
        redo = self.reevaluate
        # Inside the step: on replay the recorded choice is read back, the hook is not asked.
        return ctx.decide(
            "re-evaluate", lambda: {"revision": rev.id, "redo": redo(rev, history) if redo else []}
        ).value["redo"]

    def _decide(
        self, ctx: Context, goal: str, observation: Any, history: list[JSONDict]
    ) -> Decision[JSONDict]:
        if self.estimate:
            ctx.budget.admit(**self.estimate)
        # The runtime charges the call (the price table's tokens and USD, or `cost` if given) in
        # its recorded row: the loop charges nothing itself, so nothing is charged twice.
        return ctx.llm(self.llm, self.prompt(goal, observation, history), cost=self.cost)

    def _judge(self, ctx: Context, goal: str, history: list[JSONDict]) -> LoopResult:
        judge = self.judge
        raw = ctx.decide("judge", lambda: _judgement_dict(judge(goal, history))).value
        verdict = Judgement(raw["passed"], raw["confidence"], raw["deterministic"], raw["note"])
        if verdict.passed and (verdict.deterministic or verdict.confidence >= self.policy.confident):
            return LoopResult("ok", history, raw)
        if not verdict.passed and verdict.deterministic:
            return self._unwind(ctx, history, f"the goal was not met: {verdict.note}", raw)
        # A model's weak or negative opinion never starts an unwind by itself: a person decides.
        review = ctx.gate("review", approvers=self.policy.approvers, timeout=self.policy.review_timeout)
        if review.approved:
            return LoopResult("ok", history, raw, f"accepted by {review.approver}")
        if review.outcome == "declined":
            return self._unwind(ctx, history, f"rejected by {review.approver}: {review.reason}", raw)
        return LoopResult("needs_review", history, raw, "no reviewer verdict in time")

    @staticmethod
    def _unwind(
        ctx: Context, history: list[JSONDict], reason: str, raw: JSONDict | None = None
    ) -> LoopResult:
        # An unwind that cannot finish stops the run as `stuck` (RunStuck), listing what remains:
        # that outcome is the run's status, not a return value.
        ctx.compensate()
        return LoopResult("compensated", history, raw, reason)


def summarize(paused: float, history: list[JSONDict], last: int = 5) -> str:
    """The resume primer: how long the run was paused, what it did last, what it was told."""
    acts = [h for h in history if "tool" in h]
    told = [h for h in history if "revision" in h]
    done = "; ".join(f"{h['tool']} {h.get('state', '?')}" for h in acts[-last:]) or "nothing yet"
    said = "; ".join(f"{h['revision']} '{h['text']}' ({h['author']})" for h in told[-last:]) or "none"
    return (
        f"Resumed after a pause of {paused / 3600:.1f} h. {len(acts)} act(s) so far, the last: "
        f"{done}. Revisions: {said}."
    )


def _act(ctx: Context, tool: Tool[Any], decision: Decision[Any], action: Action, entry: JSONDict) -> None:
    try:
        entry["result"] = ctx.effect(tool, decision=decision, **action.args)
        entry["state"] = "done"
    except StepRetracted as exc:
        # Stopped mid-call by a retraction, nothing applied: the next pass reads the retraction.
        entry["state"] = "retracted"
        entry["error"] = str(exc)


def _named(target: str, history: list[JSONDict]) -> list[JSONDict]:
    return [h for h in history if "revision" not in h and target in (h.get("decision"), h.get("tool"))]


def _held(_ctx: Context, target: str, history: list[JSONDict]) -> JSONDict:
    """An unauthenticated retraction: nothing is marked or undone; `held` lists the confirmed
    effects it named, which stay as they are until an operator retracts them with its key (or
    cancels the run with compensation)."""
    keys = [f"{h['decision']}/{h['tool']}/0" for h in _named(target, history) if h.get("state") == "done"]
    return {"retracted": [], "undone": [], "not_undone": [], "held": keys}


def _retract(ctx: Context, target: str, history: list[JSONDict]) -> JSONDict:
    """Take back what was done for the steps a retraction names (`target`: a decision id or a
    tool name): each is marked `retracted`, and its confirmed effects are undone by their
    inverses, newest first, once; what cannot be undone (irreversible, or no inverse) is listed
    in `not_undone`, never passed off as undone."""
    hit = _named(target, history)
    keys = [f"{h['decision']}/{h['tool']}/0" for h in hit if h.get("state") == "done"]
    for h in hit:
        h["state"] = "retracted"
    if not keys:
        return {"retracted": [h.get("decision") for h in hit], "undone": [], "not_undone": []}
    report = ctx.compensate(keys=keys, strict=False)
    return {
        "retracted": [h.get("decision") for h in hit],
        "undone": report.compensated,
        "not_undone": report.stuck + report.no_inverse,
    }


def _bind(check: Callable[[Action, Any], bool], action: Action, fresh: Any) -> Callable[[], bool]:
    return lambda: bool(check(action, fresh))


def _judgement_dict(j: Judgement) -> JSONDict:
    return {"passed": j.passed, "confidence": j.confidence, "deterministic": j.deterministic, "note": j.note}
