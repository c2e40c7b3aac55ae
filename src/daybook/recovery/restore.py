"""Restore: carry out a recovery plan on the journal, crash-safe, one recoverer at a time.

`recover` takes the run's lease (keeping its status: one recovery at a time; another process is
told who holds it, `RecoveryInProgress`), reads its current branch, lifts it (`trace.py`),
selects (`select.py`) and then, unless it is a dry run: (1) undoes the confirmed compensable
effects the plan re-runs, newest first, in a recovery run of its own (`undo.py`: leased like any
run, its journal makes each undo happen once, so a kill mid-recovery and a second `recover`
finish the job without repeats); (2) in one store transition makes the run `pending` again with
a `run_retried` row that supersedes the plan's steps (the journal branch: nothing is edited or
deleted; those steps run again under keys suffixed `~r<n>`, every other step replays), which
also gives the lease back. The run's next execution does the re-run. The plan is a pure
function of the journal, so a second call after a crash between (1) and (2) computes the same
one. A dry run plans under the same checks and reports what the real call would refuse.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError, RecoveryInProgress, RunLeased, RunNotFound
from ..journal.execution import Execution
from ..records import JSON, Event, Kind, RunInfo, RunStatus
from ..runtime import operator
from ..runtime.claim import Claims
from ..runtime.fork import expand
from ..runtime.lease import is_dead_here
from ..store import Store
from .select import Plan, RecoveryPolicy, select
from .trace import lift
from .undo import undo

RECOVERABLE = (RunStatus.FAILED, RunStatus.NEEDS_ATTENTION)


@dataclass(frozen=True)
class Recovery:
    """What `book.recover` decided and did. `action`: "restore" (the failed `instance` goes back
    to `checkpoint`, e.g. "commit@7") or "rerun" (the whole task); `reason`: "eligible" or the
    code that refused a local restore; `replayed`: actions that run again (`upstream` of them
    before the instance began); `preserved`: committed instances kept; `compensated`: effect keys
    undone first; `dropped`: committed consumers left invalid (only with blocking off);
    `verdicts`: each candidate checkpoint's conditions; `refused` (a dry run): why the real call
    would refuse it, or None; `result`: the re-run's result, when it ran here."""

    run_id: str
    action: str
    policy: str
    instance: str | None
    checkpoint: str | None
    reason: str
    signal: str | None
    replayed: int
    upstream: int
    preserved: int
    superseded: list[int]
    compensated: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    verdicts: list[dict[str, JSON]] = field(default_factory=list)
    branch: int = 0
    dry_run: bool = False
    refused: str | None = None
    result: Any = None

    def as_dict(self) -> dict[str, JSON]:
        out = dataclasses.asdict(self)
        out.pop("result")
        return out


def plan_for(
    store: Store, run_id: str, policy: RecoveryPolicy, instance: str | None
) -> tuple[RunInfo, Plan, int]:
    """The run, its recovery plan and the branch number a restore would take."""
    info = recoverable(store, run_id)
    error = info.error if isinstance(info.error, dict) else {"message": str(info.error or "")}
    plan, branch = _planned(store, run_id, store.load(run_id), error, policy, instance)
    return info, plan, branch


def recoverable(store: Store, run_id: str) -> RunInfo:
    """The run's header, if a recovery may start on it (failed or parked); else why not."""
    info = store.get_run(run_id)
    if info is None:
        raise RunNotFound(run_id, store.url)
    if info.status in RECOVERABLE:
        return info
    hint = {
        RunStatus.PENDING: (
            "a recovery that reached its re-run leaves it pending: `daybook resume "
            f"{run_id}` (or a worker) continues it"
        ),
        RunStatus.RUNNING: (
            f"a process executes it now ({info.lease_owner or 'no live owner'}: a recovery's re-run, "
            f"or another execution); wait for it (`daybook show {run_id}`)"
        ),
        RunStatus.COMPLETED: "it completed: there is nothing to recover",
    }.get(RunStatus(info.status), f"`daybook show {run_id}` says where it stands")
    raise ConfigError(
        f"run {run_id!r} is {info.status}: only a failed or parked (needs_attention) run is recovered; {hint}"
    )


def _planned(
    store: Store,
    run_id: str,
    own: list[Event],
    error: dict[str, Any],
    policy: RecoveryPolicy,
    instance: str | None,
) -> tuple[Plan, int]:
    """The plan over the run's current branch, and the number the new branch takes."""
    view = Execution(store, run_id, expand(store, own), None, read_only=True)
    plan = select(lift(dict(view.steps), error), policy, instance)
    return plan, 1 + sum(1 for ev in own if ev.kind == Kind.RUN_RETRIED and ev.data.get("supersede"))


def _branch_data(plan: Plan, branch: int, report: dict[str, Any]) -> dict[str, Any]:
    """What the `run_retried` row of a journal branch carries (read by `Execution`)."""
    return {"supersede": list(plan.supersede), "soft": list(plan.soft), "branch": branch, "recovery": report}


def recover(
    store: Store,
    claims: Claims,
    run_id: str,
    policy: RecoveryPolicy,
    *,
    instance: str | None,
    dry_run: bool,
    by: str,
    context: Callable[[Execution], Any],
    identity: dict[str, Any] | None = None,
) -> Recovery:
    """Select and, unless `dry_run`, carry out the recovery of a failed run (see the module).
    A dry run plans under the same checks and says in `refused` what the real call would refuse.
    `identity` (how sure `by` is, `gates.identity`) goes into the `run_retried` row."""
    if dry_run:
        info, plan, branch = plan_for(store, run_id, policy, instance)
        refused = _refusal(run_id, plan) or _busy(info)
        return dataclasses.replace(_report(run_id, plan, branch, True), refused=refused)
    _hold(store, claims, run_id)
    beat = claims.heartbeat(run_id)
    try:
        info, plan, branch = plan_for(store, run_id, policy, instance)
        refusal = _refusal(run_id, plan)
        if refusal is not None:
            raise ConfigError(refusal)
        undone = undo(store, claims, info, plan, branch, context)
        report = dataclasses.replace(_report(run_id, plan, branch, False), compensated=undone)
        beat.stop()
        data = _branch_data(plan, branch, report.as_dict())
        if identity:
            data["identity"] = identity
        operator.retry(store, run_id, by, data, RECOVERABLE)
        return report
    finally:
        beat.stop()
        claims.let_go(run_id)


def _hold(store: Store, claims: Claims, run_id: str) -> None:
    """Take the run's lease for this recovery (one recoverer at a time), keeping its status."""
    recoverable(store, run_id)
    try:
        held = claims.hold(run_id, tuple(s.value for s in RECOVERABLE))
    except RunLeased as exc:
        raise RecoveryInProgress(run_id, exc.owner, exc.expires_in) from None
    if not held:
        recoverable(store, run_id)  # it changed meanwhile: say how


def _refusal(run_id: str, plan: Plan) -> str | None:
    """Why the plan cannot be carried out, or None."""
    if not plan.unsettled:
        return None
    return (
        f"run {run_id!r}: the {plan.action} would run again effects whose outcome is unknown "
        f"(steps {list(plan.unsettled)}); settle them first (`daybook unknowns`, `daybook resolve`), "
        f"then `daybook recover {run_id}`"
    )


def _busy(info: RunInfo) -> str | None:
    """What a recovery now would be told if another live process holds the run."""
    owner, left = info.lease_owner, (info.lease_expires or 0.0) - time.time()
    if owner is None or left <= 0 or is_dead_here(owner):
        return None
    return str(RecoveryInProgress(info.run_id, owner, left))


def auto(
    exe: Execution,
    claims: Claims,
    policy: str,
    limit: int,
    exc: Exception,
    context: Callable[[Execution], Any],
) -> bool:
    """A workflow's own recovery (`@workflow(recover=...)`), in the process that saw `exc` and
    holds the run: plan as `recover` does, undo what the plan undoes, then journal the branch
    with this execution (the runner re-runs it). False (the run fails as usual) past `limit`
    recoveries of this run, or when the failure is not inside a subtask."""
    store, run_id = exe.store, exe.run_id
    own = store.load(run_id)
    done = sum(1 for ev in own if ev.kind == Kind.RUN_RETRIED and (ev.data.get("recovery") or {}).get("auto"))
    if done >= limit:
        return False
    info = store.get_run(run_id)
    raw = getattr(exc, "error", None)
    error = raw if isinstance(raw, dict) else {"type": type(exc).__name__, "message": str(exc)}
    plan, branch = _planned(store, run_id, own, error, RecoveryPolicy(policy), None)
    if info is None or plan.failure is None or plan.instance is None or plan.unsettled:
        return False
    undone = undo(store, claims, info, plan, branch, context)
    report = {**_report(run_id, plan, branch, False).as_dict(), "compensated": undone, "auto": True}
    data = {"by": "auto", "from": info.status, **_branch_data(plan, branch, report)}
    exe.append(Kind.RUN_RETRIED, None, "recover", data=data)
    return True


def _report(run_id: str, plan: Plan, branch: int, dry_run: bool) -> Recovery:
    checkpoint = f"{plan.checkpoint[0]}@{plan.checkpoint[1]}" if plan.checkpoint else None
    verdicts: list[dict[str, JSON]] = [
        {
            "checkpoint": f"{v.kind}@{v.step}",
            "in_scope": v.in_scope,
            "no_committed_conflict": v.no_committed_conflict,
            "effect_allowed": v.effect_allowed,
            "consumers": list(v.consumers),
            "effects": list(v.blocking_effects),
            "reason": v.reason,
        }
        for v in plan.verdicts
    ]
    return Recovery(
        run_id=run_id,
        action=plan.action,
        policy=plan.policy,
        instance=plan.instance,
        checkpoint=checkpoint,
        reason=plan.reason,
        signal=plan.failure.signal.value if plan.failure else None,
        replayed=plan.replayed,
        upstream=plan.upstream,
        preserved=plan.preserved,
        superseded=list(plan.supersede),
        compensated=[e.key for e in plan.compensate],
        dropped=list(plan.dropped),
        verdicts=verdicts,
        branch=branch,
        dry_run=dry_run,
    )
