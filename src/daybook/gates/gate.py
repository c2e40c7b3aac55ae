"""Approval gates inside a run: `ctx.gate` parks the run until authenticated people decide.

The run side only: a gate is a recorded request (the `gate:<action>` decision: the act, who may
decide, its expiry policy and deadline, how many approvals it needs, the facts the approvers
see) plus a durable wait for the signal `verdict:<gate id>`, which `approval.approve` writes
signed with the approver's private key. The gate trusts no row for being in the inbox: each
verdict it reads is checked here (`seal.refusal`: signed by the key the approvers file holds for
its sender, for this act, by an approver the gate is addressed to now), the check recorded as a
step (`verdict-check:<gate id>`) so replay sees the same answer; a verdict that fails it is set
aside and the gate waits on for the rest of its time.

Four eyes: with `approvals=N` the gate releases once N distinct approvers approved (the same
approver twice counts once); one denial declines. When its time passes, the gate follows its
expiry policy (`gates.expiry`): deny, escalate to the next approver list (an `escalate:<gate
id>` step), keep waiting marked overdue (`overdue:<gate id>`), or stop in needs_attention.

A staleness check: with `precheck`, the facts it returns are recorded before the request
(`precheck:<action>`) and shown with it, and the approval is bound to them (they are in the
act's digest); after the approval they are read again (`recheck:<gate id>`), and if they
changed the gate asks again (a new `gate:` request, with the new facts): the old approval
releases nothing. After `reasks` re-asks the verdict is `stale`.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from ..errors import ConfigError, NeedsAttention
from ..journal.decision import Decision, Decisions
from ..journal.execution import Execution
from ..journal.facet import Facet
from ..journal.stop import Stop
from ..journal.wait import Signal, Waits
from ..records import JSON, Kind
from ..store.secrets import MARK, Secret
from . import outbox
from .expiry import Expiry, approvals_needed, expiry
from .seal import refusal

# Re-asks after a precheck found the facts changed, by default; then the verdict is `stale`.
REASKS = 2


@dataclass(frozen=True)
class Verdict:
    """How an approval gate ended: `approved`, `declined`, `timed_out`, or `stale` (approved,
    but the precondition no longer held, or the precheck's facts kept changing). `approvers`:
    every distinct approver whose approval counted; `facts`: what the precheck read last."""

    gate_id: str
    outcome: str
    approver: str | None = None
    reason: str = ""
    approvers: tuple[str, ...] = ()
    facts: JSON = None

    @property
    def approved(self) -> bool:
        return self.outcome == "approved"


def action_digest(run_id: str, gate_id: str, proposal: Any) -> str:
    """The digest a verdict is bound to: the run, the gate, the gated act as proposed and, for a
    gate with a precheck, the facts the approver was shown."""
    body = {
        "run_id": run_id,
        "gate_id": gate_id,
        "action": proposal.get("action"),
        "about": proposal.get("about"),
    }
    if "facts" in proposal:  # absent before prechecks: those digests stay as they were
        body["facts"] = proposal.get("facts")
    return hashlib.sha256(_canonical(body).encode()).hexdigest()[:32]


def _canonical(value: Any) -> str:
    # A Secret as the mark the journal holds (its digest): live, replayed and as `approve`
    # reads it from the journal, the same text.
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_as_mark)


def _as_mark(value: Any) -> JSON:
    if isinstance(value, Secret) and value.digest is not None:
        return {MARK: value.digest}
    raise TypeError(f"{type(value).__name__} is not JSON")


@dataclass
class _Open:
    """Where an open gate stands while it waits: who it is addressed to, until when, how long
    is left (from recorded steps only, so replay rebuilds the same), and its escalation level."""

    allowed: Any
    deadline: float | None
    left: float | None
    timeout: float | None
    level: int = 0


def _terms(
    action: str,
    on_timeout: str,
    escalate_to: Any,
    timeout: float | None,
    approvals: int,
    reasks: int,
    precheck: Any,
) -> tuple[Expiry, int]:
    """A gate's terms checked before anything is journaled: a clear ConfigError otherwise."""
    where = f"ctx.gate({action!r})"
    policy = expiry(on_timeout, escalate_to, timeout, where)
    need = approvals_needed(approvals, where)
    if isinstance(reasks, bool) or not isinstance(reasks, int) or reasks < 0:
        raise ConfigError(f"{where}: reasks={reasks!r}: give how many times to ask again, an int >= 0")
    if precheck is not None and not callable(precheck):
        raise ConfigError(f"{where}: precheck= must be a function returning the facts (JSON)")
    return policy, need


class Gates(Facet):
    """`ctx.gate`: a durable approval gate addressed to one decision."""

    def __init__(self, exe: Execution, decisions: Decisions, waits: Waits) -> None:
        super().__init__(exe)
        self._decisions = decisions
        self._waits = waits
        # The decisions whose gate a person approved in this execution (`approved`).
        self._approved: set[str] = set()

    def gate(
        self,
        action: str,
        *,
        decision: Decision[Any] | None = None,
        approvers: Sequence[str] | None = None,
        timeout: float | None = 8 * 3600,
        on_timeout: str = "deny",
        escalate_to: Sequence[str] | Sequence[Sequence[str]] | None = None,
        approvals: int = 1,
        precondition: Callable[[], bool] | None = None,
        precheck: Callable[[], JSON] | None = None,
        reasks: int = REASKS,
        notify: Callable[[dict[str, Any]], None] | None = None,
        about: JSON = None,
    ) -> Verdict:
        """`ctx.gate` (see `Context.gate`)."""
        policy, need = _terms(action, on_timeout, escalate_to, timeout, approvals, reasks, precheck)
        facts: JSON = None
        if precheck is not None:
            facts = self._read(f"precheck:{action}", precheck)
        first: str | None = None
        for ask in range(reasks + 1):
            own = decision if ask == 0 else None
            request = self._request(action, own, approvers, timeout, policy, need, about, first, ask)
            if precheck is not None:
                request["facts"] = facts
            reason = "opened" if ask == 0 else "re-asked"  # its request goes to the outbox
            proposal: Decision[dict[str, Any]] = self._decisions.decide(
                f"gate:{action}", functools.partial(self._opened, own, request, reason)
            )
            gate_id = own.id if own is not None else proposal.id
            first = first or gate_id
            if notify is not None:
                # Tell the approvers (Slack, email, pager) once: a recorded step, never repeated.
                info = {"run_id": self.run_id, "gate_id": gate_id, **proposal.value}
                self._decisions.decide(f"notify:{gate_id}", functools.partial(notify, info))
            verdict = self._await(gate_id, action, proposal, policy, need, timeout)
            if not verdict.approved or precheck is None:
                break
            fresh = self._read(f"recheck:{gate_id}", precheck)
            if _canonical(fresh) == _canonical(facts):
                break
            facts = fresh  # the world moved while it waited: ask again, with what it is now
        else:
            return Verdict(
                gate_id,
                "stale",
                verdict.approver,
                f"the precheck's facts changed after each of {reasks + 1} approvals; the act was "
                "not released",
                verdict.approvers,
                facts,
            )
        check = precondition if verdict.approved else None
        if check is not None and not self._decisions.decide(f"precondition:{action}", check).value:
            return Verdict(gate_id, "stale", verdict.approver, verdict.reason, verdict.approvers, facts)
        if verdict.approved and decision is not None:
            self._approved.add(decision.id)
        return Verdict(gate_id, verdict.outcome, verdict.approver, verdict.reason, verdict.approvers, facts)

    def _opened(
        self, decision: Decision[Any] | None, proposal: dict[str, Any], reason: str = "opened"
    ) -> dict[str, Any]:
        """The proposal of a gate being opened, its approval request put in the outbox first:
        durable before the gate's row is (the step allocated for it is the one just taken). A
        re-ask is a gate of its own (its own id), so its request is that gate's first."""
        gate_id = decision.id if decision else self._exe.id_of(self._exe.next_step - 1)
        sent = self.announce(gate_id, proposal, reason=reason)
        # Opened again after a crash: its time started when the request the approvers got says.
        return {**proposal, "opened": sent.get("opened", proposal["opened"])}

    def announce(
        self, gate_id: str, proposal: dict[str, Any], *, n: int = 1, reason: str = "opened"
    ) -> dict[str, Any]:
        """Enqueue the `n`-th approval request of gate `gate_id` in the outbox (`gates.outbox`;
        idempotent by its key) and return the request it holds: when it opens (n=1), or inside
        the recorded step that escalates it (n=2, ...). `about` and `facts` are sent as the
        journal holds them: secrets as marks."""
        stored = self._exe.cover().conceal(proposal)[0]
        assert isinstance(stored, dict)
        req = outbox.request(self.run_id, gate_id, stored, n=n, reason=reason)
        return outbox.enqueue(self._exe.store, req)

    def _read(self, name: str, precheck: Callable[[], JSON]) -> JSON:
        """The facts `precheck` returns now, as a recorded step (replay reads the same)."""
        made = cast(Decision[JSON], self._decisions.decide(name, precheck))
        return made.value

    def approved(self, decision_id: str) -> bool:
        """Whether a person approved, in this execution, the gate on decision `decision_id`."""
        return decision_id in self._approved

    def _request(
        self,
        action: str,
        decision: Decision[Any] | None,
        approvers: Sequence[str] | None,
        timeout: float | None,
        policy: Expiry,
        need: int,
        about: JSON,
        first: str | None,
        ask: int,
    ) -> dict[str, Any]:
        """The gate request as journaled (and as `notify` and `daybook approvals` show it)."""
        request: dict[str, Any] = {
            "action": action,
            "approvers": list(approvers) if approvers else None,
            "timeout": timeout,
            "decision": decision.id if decision else None,
            "opened": self._exe.clock(),  # when its time started (a refused verdict keeps it)
            "expiry": policy.policy,
            "approvals": need,
        }
        if policy.levels:
            request["escalate_to"] = [list(level) for level in policy.levels]
        if about is not None:
            request["about"] = about
        if ask:
            request["ask"] = ask + 1  # the facts changed since request `first` was approved
            request["first"] = first
        return request

    def _await(
        self,
        gate_id: str,
        action: str,
        proposal: Decision[dict[str, Any]],
        policy: Expiry,
        need: int,
        timeout: float | None,
    ) -> Verdict:
        """Read verdicts until `need` distinct approvals, a denial, or the end of its time."""
        value = proposal.value
        opened = float(value.get("opened") or self._exe.clock())
        deadline = None if timeout is None else opened + timeout
        state = _Open(value.get("approvers"), deadline, left=timeout, timeout=timeout)
        given: dict[str, str] = {}  # approver -> reason, in the order they counted
        while True:
            signal = self._waits.wait_for(f"verdict:{gate_id}", timeout=state.left)
            if signal is None:
                if self._expire(gate_id, value, policy, state, opened):
                    continue
                return Verdict(gate_id, "timed_out", None, "", tuple(given))
            check = self._check(gate_id, value, signal, state.deadline, state.allowed)
            if check is not None:
                state.left = check["left"]
                if not check["ok"]:
                    continue  # not a verdict (unsigned, another key, another act): wait on
            counted = self._count(gate_id, value, signal, given, need if check is not None else 1)
            if counted is not None:
                return counted

    def _expire(
        self, gate_id: str, request: dict[str, Any], policy: Expiry, state: _Open, opened: float
    ) -> bool:
        """The gate's time passed: follow its expiry policy. True when it stays open (escalated
        to the next level, or overdue); False when it ends `timed_out`."""
        timeout = state.timeout
        assert timeout is not None and state.deadline is not None  # a wait with no end never expires
        if policy.policy == "escalate" and state.level < len(policy.levels):
            state.level += 1
            state.allowed = list(policy.levels[state.level - 1])
            state.deadline = opened + (state.level + 1) * timeout
            state.left = self._escalate(gate_id, request, state)["left"]
            return True
        if policy.policy == "wait":
            since = state.deadline
            self._decisions.decide(f"overdue:{gate_id}", functools.partial(dict, since=since))
            state.deadline = state.left = None
            return True
        if policy.policy == "needs_attention":
            raise self._escalation(gate_id, str(request.get("action")), timeout)
        return False

    def _count(
        self, gate_id: str, request: dict[str, Any], signal: Signal, given: dict[str, str], need: int
    ) -> Verdict | None:
        """One good verdict counted: the gate's verdict once it decides, else None (wait on)."""
        payload = signal.payload if isinstance(signal.payload, dict) else {}
        reason = str(payload.get("reason", ""))
        digest = payload.get("digest")
        if digest is not None and digest != action_digest(self.run_id, gate_id, request):
            # Given for another act under the same gate id: it releases nothing.
            why = "the verdict was given for another action"
            return Verdict(gate_id, "declined", signal.sender, why, tuple(given))
        if payload.get("outcome") != "approve":
            return Verdict(gate_id, "declined", signal.sender, reason, tuple(given))  # one denial
        given.setdefault(signal.sender, reason)  # the same approver twice counts once
        if len(given) >= need:
            return Verdict(gate_id, "approved", signal.sender, reason, tuple(given))
        return None

    def _escalate(self, gate_id: str, request: dict[str, Any], state: _Open) -> dict[str, Any]:
        """The recorded move of a gate to its next approver list (replay reads the same), its
        approval request to the new approvers put in the outbox inside the step."""
        exe = self._exe
        level, approvers, deadline, timeout = state.level, state.allowed, state.deadline, state.timeout
        assert deadline is not None and timeout is not None

        def move() -> dict[str, Any]:
            start = deadline - timeout  # this level's time, as the request's deadline says
            moved = {**request, "approvers": approvers, "opened": start, "level": level}
            self.announce(gate_id, moved, n=level + 1, reason="escalated")
            return {
                "level": level,
                "approvers": approvers,
                "deadline": deadline,
                "left": max(0.0, deadline - exe.clock()),
            }

        value: dict[str, Any] = self._decisions.decide(f"escalate:{gate_id}", move).value
        return value

    def _check(
        self,
        gate_id: str,
        request: dict[str, Any],
        signal: Signal,
        deadline: float | None,
        allowed: Any,
    ) -> dict[str, Any] | None:
        """The recorded check of a verdict just read: {"ok", "why", "left", "approver",
        "outcome"} (`left`: seconds of the gate's time remaining at this level). None in a
        history from before signed verdicts, where the verdict was read and acted on already:
        replay keeps what happened (README, "Security model": migrating)."""
        exe = self._exe
        label = f"verdict-check:{gate_id}"
        ahead = exe.steps.get(exe.next_step)
        recorded = ahead is not None and ahead[0].kind == Kind.DECISION and ahead[0].name == label
        if not recorded and (exe.next_step <= exe.recorded_steps or exe.read_only):
            return None  # the journal goes on (or, replaying, ends) without a check: old history
        digest = action_digest(self.run_id, gate_id, request)

        def judge() -> dict[str, Any]:
            why = refusal(exe.store, self.run_id, gate_id, digest, signal.payload, signal.sender)
            if not why and isinstance(allowed, list) and signal.sender not in allowed:
                why = f"{signal.sender!r} is not among the approvers the gate is addressed to now"
            left = None if deadline is None else max(0.0, deadline - exe.clock())
            payload = signal.payload if isinstance(signal.payload, dict) else {}
            outcome = payload.get("outcome")
            return {"ok": not why, "why": why, "left": left, "approver": signal.sender, "outcome": outcome}

        value: dict[str, Any] = self._decisions.decide(label, judge).value
        return value

    def _escalation(self, gate_id: str, action: str, timeout: float) -> Stop:
        return Stop(
            NeedsAttention(
                self.run_id,
                f"run {self.run_id!r}: gate {gate_id!r} ({action}) got no verdict within "
                f"{timeout}s and its expiry policy is needs_attention; approve or deny it with "
                f"`daybook approve|deny {self.run_id} {gate_id}` (a late verdict is "
                "recorded but does not act), or cancel the run",
            ),
            True,
            journal=True,
        )
