"""Restore: carry out a recovery plan on the journal, crash-safe, and say what was done.

`recover` reads a failed run's current branch, lifts it (`trace.py`), selects (`select.py`) and
then, unless it is a dry run: (1) undoes the confirmed compensable effects the plan re-runs, newest
first, in a recovery run of its own (`<run>~recover<n>`, a child of the run: its journal makes
each undo happen once, so a kill mid-recovery and a second `recover` finish the job without
repeats); (2) in one store transition makes the run `pending` again with a `run_retried` row that
supersedes the plan's steps (the journal branch: nothing is edited or deleted; those steps run
again under keys suffixed `~r<n>`, every other step replays). The run's next execution does the
re-run. The plan is a pure function of the journal, so a second call after a crash between (1)
and (2) computes the same one.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError, EffectFailed, RunNotFound, RunStuck
from ..journal.execution import Execution
from ..journal.tool import lookup as lookup_tool
from ..records import JSON, Event, Kind, RunInfo, RunStatus
from ..runtime import operator
from ..runtime.fork import derived_header, expand
from ..store import Store
from .select import Plan, RecoveryPolicy, select
from .trace import lift

RECOVERABLE = (RunStatus.FAILED, RunStatus.NEEDS_ATTENTION)
WORKFLOW = "daybook.recover"


@dataclass(frozen=True)
class Recovery:
    """What `book.recover` decided and did. `action`: "restore" (the failed `instance` goes back
    to `checkpoint`, e.g. "commit@7") or "rerun" (the whole task); `reason`: "eligible" or the
    code that refused a local restore; `replayed`: actions that run again (`upstream` of them
    before the instance began); `preserved`: committed instances kept; `compensated`: effect keys
    undone first; `dropped`: committed consumers left invalid (only with blocking off);
    `verdicts`: each candidate checkpoint's conditions; `result`: the re-run's result, when it
    ran here."""

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
    result: Any = None

    def as_dict(self) -> dict[str, JSON]:
        out = dataclasses.asdict(self)
        out.pop("result")
        return out


def plan_for(
    store: Store, run_id: str, policy: RecoveryPolicy, instance: str | None
) -> tuple[RunInfo, Plan, int]:
    """The run, its recovery plan and the branch number a restore would take."""
    info = store.get_run(run_id)
    if info is None:
        raise RunNotFound(run_id, store.url)
    if info.status not in RECOVERABLE:
        raise ConfigError(
            f"run {run_id!r} is {info.status}: only a failed or parked (needs_attention) run is "
            "recovered; `daybook show` says where it stands"
        )
    error = info.error if isinstance(info.error, dict) else {"message": str(info.error or "")}
    plan, branch = _planned(store, run_id, store.load(run_id), error, policy, instance)
    return info, plan, branch


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
    plan = select(lift(view.steps, error), policy, instance)
    return plan, 1 + sum(1 for ev in own if ev.kind == Kind.RUN_RETRIED and ev.data.get("supersede"))


def _branch_data(plan: Plan, branch: int, report: dict[str, Any]) -> dict[str, Any]:
    """What the `run_retried` row of a journal branch carries (read by `Execution`)."""
    return {"supersede": list(plan.supersede), "soft": list(plan.soft), "branch": branch, "recovery": report}


def recover(
    store: Store,
    run_id: str,
    policy: RecoveryPolicy,
    *,
    instance: str | None,
    dry_run: bool,
    by: str,
    context: Callable[[Execution], Any],
    identity: dict[str, Any] | None = None,
) -> Recovery:
    """Select and, unless `dry_run`, carry out the recovery of a failed run (see the module);
    `identity` (how sure `by` is, `gates.identity`) goes into the `run_retried` row."""
    info, plan, branch = plan_for(store, run_id, policy, instance)
    report = _report(run_id, plan, branch, dry_run)
    if dry_run:
        return report
    if plan.unsettled:
        raise ConfigError(
            f"run {run_id!r}: the {plan.action} would run again effects whose outcome is unknown "
            f"(steps {list(plan.unsettled)}); settle them first (`daybook unknowns`, `daybook resolve`)"
        )
    undone = _compensate(store, info, plan, branch, context)
    report = dataclasses.replace(report, compensated=undone)
    data = {**_branch_data(plan, branch, report.as_dict()), **({"identity": identity} if identity else {})}
    operator.retry(store, run_id, by, data, RECOVERABLE)
    return report


def auto(
    exe: Execution, policy: str, limit: int, exc: Exception, context: Callable[[Execution], Any]
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
    undone = _compensate(store, info, plan, branch, context)
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


def _compensate(
    store: Store, info: RunInfo, plan: Plan, branch: int, context: Callable[[Execution], Any]
) -> list[str]:
    """Undo the plan's compensable effects in the recovery run `<run>~recover<branch>`."""
    if not plan.compensate:
        return []
    rid = f"{info.run_id}~recover{branch}"
    if store.get_run(rid) is None:
        store.create_run(*_header(info, rid))
    events = store.load(info.run_id)
    rows = {ev.key: ev for ev in events if ev.key and ev.kind == Kind.INTENT}
    results = _results(events)
    exe = Execution(store, rid, store.load(rid), None)
    ctx = context(exe)
    done, stuck = [], []
    for eff in plan.compensate:
        tool = lookup_tool(eff.tool)
        if tool is None or tool.inverse is None:
            stuck.append(eff.key)  # the plan said compensable; the code here has no inverse
            continue
        intent = rows[eff.key]
        try:
            ctx.effect(
                tool.inverse,
                key=f"comp/{eff.key}",
                original=intent.data.get("args"),
                result=results.get(eff.key),
            )
            done.append(eff.key)
        except EffectFailed:
            stuck.append(eff.key)
    if stuck:
        raise RunStuck(
            info.run_id,
            f"run {info.run_id!r}: recovery could not undo {stuck} (undone: {done or 'nothing'}); "
            f"the run stays {info.status}. Undo them by hand (`daybook resolve`), then recover again",
        )
    return done


def _results(events: list[Event]) -> dict[str, JSON]:
    intents = {ev.step: ev.key for ev in events if ev.kind == Kind.INTENT}
    return {
        str(intents[ev.step]): ev.data.get("result")
        for ev in events
        if ev.kind == Kind.OUTCOME and ev.step in intents
    }


def _header(info: RunInfo, rid: str) -> tuple[RunInfo, Event]:
    now = time.time()
    more = {"workflow": WORKFLOW, "queue": None, "partition": None, "parent_run": info.run_id}
    header = derived_header(info, rid, RunStatus.COMPLETED, {"recovers": info.run_id}, now, **more)
    first = Event(
        run_id=rid, seq=1, kind=Kind.RUN_STARTED.value, name=WORKFLOW, data={"recovers": info.run_id}, at=now
    )
    return header, first
