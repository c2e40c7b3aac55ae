"""What a signed-in approver can do from the inspector, each through the same checked call as
its command: `Daybook.approve` with the approver's own key (`daybook approve`; the `approver`
role), and, with the `operator` role, `resolve`, `retry`, `cancel`, `pause`, `resume`,
`steer`, `raise-budget` (`daybook budget RUN --raise NAME=AMOUNT`) and `rewind` (`daybook rewind
RUN --to STEP`). Each is journaled with
the approver's name as who did it, authenticated by its key. An action returns the line the
page shows; a refusal raises (DaybookError or `BadRequest`), and nothing is written. The
inspector writes each attempt, done or refused, to the audit log (`audit_page`)."""

from __future__ import annotations

import json
import logging
import math
import threading
from typing import Any

from ..errors import ConfigError
from ..records import RunStatus
from .auth import Inspector, Session

log = logging.getLogger("daybook.web")
STEER_WAIT = 3.0  # seconds a steer waits for the run's acknowledgement before answering


def on_gate(ins: Inspector, who: Session, where: dict[str, str], fields: dict[str, str]) -> str:
    """Approve or deny a gate, as `daybook approve|deny RUN GATE --as NAME` with the token."""
    verb = where["verb"]
    if verb not in ("approve", "deny"):
        raise ConfigError(f"a gate takes approve or deny, not {verb!r}")
    run_id, gate = fields.get("run_id", ""), fields.get("gate", "")
    if not run_id or not gate:
        raise ConfigError("name the run and the gate (fields run_id and gate)")
    outcome = ins.book.approve(
        run_id,
        gate,
        approver=who.name,
        token=who.token,
        reason=fields.get("reason", ""),
        approve=verb == "approve",
    )
    word = "approval" if verb == "approve" else "denial"
    if outcome == "late":
        return f"late: gate {gate} was already decided or timed out; your {word} is recorded and does nothing"
    return f"{word} of gate {gate} delivered to {run_id}"


def on_run(ins: Inspector, who: Session, where: dict[str, str], fields: dict[str, str]) -> str:
    verb = where["verb"]
    act = _RUN_ACTS.get(verb)
    if act is None:
        raise ConfigError(f"no action {verb!r} on a run; use one of {', '.join(_RUN_ACTS)}")
    ins.require(who, "operator", f"{verb} a run")  # a gate's approver is not every run's operator
    return act(ins, who, where["run_id"], fields)


def _pause(ins: Inspector, who: Session, run_id: str, fields: dict[str, str]) -> str:
    done = ins.book.pause(run_id, by=who.name, token=who.token)
    return {"paused": f"run {run_id} paused", "already": f"run {run_id} is already paused"}.get(
        done, f"pause of {run_id} requested: it stops at its next step boundary"
    )


def _resume(ins: Inspector, who: Session, run_id: str, fields: dict[str, str]) -> str:
    """Resume runs the workflow in this process (with the code `--app` named), in the background;
    the page follows it live."""
    info = ins.book.get_run(run_id)
    if info.status not in (RunStatus.PAUSED, RunStatus.SUSPENDED, RunStatus.PENDING, RunStatus.RUNNING):
        raise ConfigError(f"run {run_id} is {info.status}; only a paused, suspended or pending run resumes")
    ins.book.load_workflow(run_id, ins.apps)  # refuse now (ConfigError) when its code is not here

    def go() -> None:
        try:
            ins.book.resume(run_id, app=ins.apps)
        except Exception as exc:  # reported in the log; the journal shows the run's state
            log.warning("resume of %s stopped: %s", run_id, exc)

    threading.Thread(target=go, name=f"resume-{run_id}", daemon=True).start()
    return f"run {run_id} resumed in the inspector's process"


def _retry(ins: Inspector, who: Session, run_id: str, fields: dict[str, str]) -> str:
    ins.book.retry(run_id, by=who.name, submit=True, token=who.token)
    return f"run {run_id} is due again: a `daybook worker` on this store takes it up"


def _cancel(ins: Inspector, who: Session, run_id: str, fields: dict[str, str]) -> str:
    compensate = _on(fields.get("compensate"))
    report = ins.book.cancel(run_id, compensate, by=who.name, app=ins.apps, token=who.token)
    if report is None:
        return f"run {run_id} cancelled"
    return f"run {run_id} cancelled; compensated {len(report.compensated)} effect(s)"


def _steer(ins: Inspector, who: Session, run_id: str, fields: dict[str, str]) -> str:
    ack = ins.book.steer(
        run_id,
        fields.get("kind", ""),
        fields.get("text", ""),
        author=who.name,
        target=fields.get("target") or None,
        wait=STEER_WAIT,
        token=who.token,
    )
    if not ack["acked"]:
        return f"revision #{ack['id']} queued; the run reads it at its next step boundary"
    conflicts = f"; conflicts: {ack['conflicts']}" if ack["conflicts"] else ""
    return f"revision #{ack['id']} acknowledged by the run at step {ack['step']}{conflicts}"


def _raise_budget(ins: Inspector, who: Session, run_id: str, fields: dict[str, str]) -> str:
    """Raise one cap of the run by an amount, as `daybook budget RUN --raise NAME=AMOUNT`."""
    name = fields.get("quantity", "").strip()
    try:
        amount = float(fields.get("amount", ""))
    except ValueError:
        amount = math.nan
    if name in ("", "by", "token") or not math.isfinite(amount) or amount <= 0:
        raise ConfigError("name the quantity (usd, tokens, ...) and give a finite amount above zero")
    signal_id = ins.book.raise_budget(run_id, by=who.name, token=who.token, **{name: amount})
    return f"raise #{signal_id} of {name} by {amount:g} sent to {run_id}: applied when it next needs it"


def _rewind(ins: Inspector, who: Session, run_id: str, fields: dict[str, str]) -> str:
    """A coding run's checkout put back to after a step, as `daybook rewind RUN --to STEP`
    (`force` overwrites paths changed since the run's last edit; `dry_run` only says what)."""
    try:
        to = int(fields.get("to", ""))
    except ValueError:
        raise ConfigError("give the step to rewind to as a whole number (0: before the first edit)") from None
    done = ins.book.rewind(
        run_id,
        to,
        force=_on(fields.get("force")),
        dry_run=_on(fields.get("dry_run")),
        by=who.name,
        token=who.token,
    )
    files = f"{len(done.restored)} file(s) restored, {len(done.removed)} removed"
    live = f"; live, not restored: {', '.join(done.live)}" if done.live else ""
    if done.dry_run:
        return f"dry run: rewinding {run_id} to step {to} would leave {files}{live}"
    again = f"steps after {to} run again ({len(done.soft)} effect(s) outside the workspace replay)"
    return f"run {run_id} rewound to step {to}: {files}{live}; it is pending, its {again}"


def _on(value: str | None) -> bool:
    return value in ("1", "true", "on")


def _resolve(ins: Inspector, who: Session, run_id: str, fields: dict[str, str]) -> str:
    """An unknown effect settled by hand: confirmed (with the counterparty's reference, and the
    result as JSON if given), absent (never received: sent again on resume) or failed."""
    try:
        step = int(fields.get("step", ""))
    except ValueError:
        raise ConfigError("give the effect's step as a whole number") from None
    outcome, ref, evidence = fields.get("outcome"), fields.get("ref") or None, fields.get("evidence", "")
    common: dict[str, Any] = {"by": who.name, "evidence": evidence, "token": who.token}
    if outcome == "confirmed":
        result = _result(fields.get("result"), ref)
        ins.book.resolve(run_id, step, ref=ref, confirmed=result, **common)
    elif outcome == "absent":
        ins.book.resolve(run_id, step, absent=True, **common)
    elif outcome == "failed":
        ins.book.resolve(run_id, step, failed=evidence or "failed (resolved by hand)", **common)
    else:
        raise ConfigError("outcome is one of confirmed, absent, failed")
    return f"step {step} of {run_id} resolved as {outcome}"


def _result(text: str | None, ref: str | None) -> Any:
    if not text:
        return ref
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"the result is not JSON: {exc}") from None


def logout(ins: Inspector, who: Session, where: dict[str, str], fields: dict[str, str]) -> str:
    ins.sessions.close(_sid_of(ins, who))
    return "signed out"


def _sid_of(ins: Inspector, who: Session) -> str | None:
    return ins.sessions.sid_of(who)


_RUN_ACTS = {
    "pause": _pause,
    "resume": _resume,
    "retry": _retry,
    "cancel": _cancel,
    "steer": _steer,
    "resolve": _resolve,
    "raise-budget": _raise_budget,
    "rewind": _rewind,
}
