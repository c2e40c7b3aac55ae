"""Approval gates inside a run: `ctx.gate` parks the run until an authenticated person decides.

The run side only: a gate is a recorded proposal plus a durable wait for the signal
`verdict:<gate id>`, which `approval.approve` writes signed with the approver's private key.
The gate trusts no row for being in the inbox: each verdict it reads is checked here
(`seal.refusal`: signed by the key the approvers file holds for its sender, for this act), the
check recorded as a step (`verdict-check:<gate id>`) so replay sees the same answer; a verdict
that fails it is set aside and the gate waits on for the rest of its time.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import NeedsAttention
from ..journal.decision import Decision, Decisions
from ..journal.execution import Execution
from ..journal.facet import Facet
from ..journal.stop import Stop
from ..journal.wait import Signal, Waits
from ..records import JSON, Kind
from ..store.secrets import MARK, Secret
from . import outbox
from .seal import refusal


@dataclass(frozen=True)
class Verdict:
    """How an approval gate ended: `approved`, `declined`, `timed_out`, or `stale` (approved,
    but the precondition no longer held when it was re-checked)."""

    gate_id: str
    outcome: str
    approver: str | None = None
    reason: str = ""

    @property
    def approved(self) -> bool:
        return self.outcome == "approved"


def action_digest(run_id: str, gate_id: str, proposal: Any) -> str:
    """The digest a verdict is bound to: the run, the gate and the gated act as proposed."""
    body = {
        "run_id": run_id,
        "gate_id": gate_id,
        "action": proposal.get("action"),
        "about": proposal.get("about"),
    }
    # A Secret in `about` as the mark the journal holds (its digest): live, replayed and as
    # `approve` reads it from the journal, the same digest.
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_as_mark)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _as_mark(value: Any) -> JSON:
    if isinstance(value, Secret) and value.digest is not None:
        return {MARK: value.digest}
    raise TypeError(f"{type(value).__name__} is not JSON")


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
        timeout: float = 8 * 3600,
        on_timeout: str = "decline",
        precondition: Callable[[], bool] | None = None,
        notify: Callable[[dict[str, Any]], None] | None = None,
        about: JSON = None,
    ) -> Verdict:
        """Park the run until a person approves or declines `action` (durable: days are fine).

        The verdict is addressed to this gate's id (`decision.id` if given, else the gate's own
        step id) and only an authenticated approver (`daybook approvers add`) named in
        `approvers` (None: any) can give it (`daybook approve|deny RUN GATE`). After an approval
        `precondition` is re-checked, as a recorded step, because the world moves while a run
        waits. `on_timeout`: "decline" returns a `timed_out` verdict; "escalate" stops the run in
        `needs_attention`. A verdict that arrives after the timeout is recorded as late and does
        nothing. `notify(gate)` (a dict with run_id, gate_id, action, approvers, timeout) is
        called once when the gate opens, to tell the approvers. `about` describes the gated act
        exactly (e.g. tool, arguments and key); the verdict is bound to a digest of the action
        and `about`, so an approval of one act never releases another."""
        if on_timeout not in ("decline", "escalate"):
            raise ValueError("on_timeout must be 'decline' or 'escalate'")
        proposal = self._decisions.decide(
            f"gate:{action}",
            lambda: self._opened(
                decision,
                {
                    "action": action,
                    "approvers": list(approvers) if approvers else None,
                    "timeout": timeout,
                    "decision": decision.id if decision else None,
                    "opened": self._exe.clock(),  # when its time started (a refused verdict keeps it)
                    **({"about": about} if about is not None else {}),
                },
            ),
        )
        gate_id = decision.id if decision else proposal.id
        if notify is not None:
            # Tell the approvers (Slack, email, pager) once: a recorded step, never repeated.
            info = {"run_id": self.run_id, "gate_id": gate_id, **proposal.value}
            self._decisions.decide(f"notify:{gate_id}", lambda: notify(info))
        signal = self._waits.wait_for(f"verdict:{gate_id}", timeout=timeout)
        while signal is not None:
            check = self._check(gate_id, proposal, signal, timeout)
            if check is None or check["ok"]:
                break
            # Not a verdict (unsigned, another key, another act): the gate waits on.
            signal = self._waits.wait_for(f"verdict:{gate_id}", timeout=check["left"])
        if signal is None:
            if on_timeout == "escalate":
                raise self._escalation(gate_id, action, timeout)
            return Verdict(gate_id, "timed_out")
        verdict = self._verdict(gate_id, action, proposal.value, signal, precondition)
        if verdict.approved and decision is not None:
            self._approved.add(decision.id)
        return verdict

    def _opened(self, decision: Decision[Any] | None, proposal: dict[str, Any]) -> dict[str, Any]:
        """The proposal of a gate being opened, its approval request put in the outbox first:
        durable before the gate's row is (the step allocated for it is the one just taken)."""
        gate_id = decision.id if decision else self._exe.id_of(self._exe.next_step - 1)
        sent = self.announce(gate_id, proposal)
        # Opened again after a crash: its time started when the request the approvers got says.
        return {**proposal, "opened": sent.get("opened", proposal["opened"])}

    def announce(
        self, gate_id: str, proposal: dict[str, Any], *, n: int = 1, reason: str = "opened"
    ) -> dict[str, Any]:
        """Enqueue the `n`-th approval request of gate `gate_id` in the outbox (`gates.outbox`;
        idempotent by its key) and return the request it holds: when it opens (n=1), or inside
        the recorded step that re-asks or escalates it (n=2, ...). `about` is sent as the
        journal holds it: secrets as marks."""
        stored = self._exe.cover().conceal(proposal)[0]
        assert isinstance(stored, dict)
        req = outbox.request(self.run_id, gate_id, stored, n=n, reason=reason)
        return outbox.enqueue(self._exe.store, req)

    def approved(self, decision_id: str) -> bool:
        """Whether a person approved, in this execution, the gate on decision `decision_id`."""
        return decision_id in self._approved

    def _check(
        self, gate_id: str, proposal: Decision[Any], signal: Signal, timeout: float | None
    ) -> dict[str, Any] | None:
        """The recorded check of a verdict just read: {"ok", "why", "left"} (`left`: seconds of
        the gate's time remaining). None in a history from before signed verdicts, where the
        verdict was read and acted on already: replay keeps what happened (README, "Security
        model": migrating)."""
        exe = self._exe
        label = f"verdict-check:{gate_id}"
        ahead = exe.steps.get(exe.next_step)
        recorded = ahead is not None and ahead[0].kind == Kind.DECISION and ahead[0].name == label
        if not recorded and (exe.next_step <= exe.recorded_steps or exe.read_only):
            return None  # the journal goes on (or, replaying, ends) without a check: old history
        opened = float(proposal.value.get("opened") or time.time())
        digest = action_digest(self.run_id, gate_id, proposal.value)

        def judge() -> dict[str, Any]:
            why = refusal(exe.store, self.run_id, gate_id, digest, signal.payload, signal.sender)
            left = None if timeout is None else max(0.0, opened + timeout - exe.clock())
            return {"ok": not why, "why": why, "left": left}

        value: dict[str, Any] = self._decisions.decide(label, judge).value
        return value

    def _verdict(
        self,
        gate_id: str,
        action: str,
        proposal: Any,
        signal: Signal,
        precondition: Callable[[], bool] | None,
    ) -> Verdict:
        payload = signal.payload or {}
        reason = str(payload.get("reason", ""))
        digest = payload.get("digest")
        if digest is not None and digest != action_digest(self.run_id, gate_id, proposal):
            # Given for another act under the same gate id: it releases nothing.
            return Verdict(gate_id, "declined", signal.sender, "the verdict was given for another action")
        if payload.get("outcome") != "approve":
            return Verdict(gate_id, "declined", signal.sender, reason)
        held = precondition is None or self._decisions.decide(f"precondition:{action}", precondition).value
        if not held:
            return Verdict(gate_id, "stale", signal.sender, reason)
        return Verdict(gate_id, "approved", signal.sender, reason)

    def _escalation(self, gate_id: str, action: str, timeout: float) -> Stop:
        return Stop(
            NeedsAttention(
                self.run_id,
                f"run {self.run_id!r}: gate {gate_id!r} ({action}) got no verdict within "
                f"{timeout}s and is configured to escalate; approve or deny it with "
                f"`daybook approve|deny {self.run_id} {gate_id}` (a late verdict is "
                "recorded but does not act), or cancel the run",
            ),
            True,
            journal=True,
        )
