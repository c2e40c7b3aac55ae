"""The recovery run: a recovery's undos, each once, under a lease like any run.

A recovery undoes the confirmed compensable effects its plan re-runs, newest first, in a run of
its own, `<run>~recover<branch>` (a child of the run, workflow `daybook.recover`), whose journal
makes each undo happen once. That run is leased like any run: created `running` under the
recoverer's lease, renewed by a heartbeat while the inverses run, and ended `completed`, `stuck`
(an inverse failed: undo it by hand) or `needs_attention` (an undo's outcome is unknown: resolve
it). A recovery cut short by a crash leaves it `running` under a dead lease; the next `recover`
of the run takes it over (at once on the same machine, else once the lease expires) and replays
it: an undo that happened replays, one in flight is asked about (its tool's `status` query) or
re-sent under its key when idempotent, else it parks for a person. (A worker that takes such a
run over parks it: it has no code of its own.)
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import DaybookError, EffectFailed, NeedsAttention, RecoveryInProgress, RunLeased, RunStuck
from ..journal import keys
from ..journal.execution import Execution
from ..journal.stop import Stop
from ..journal.tool import lookup as lookup_tool
from ..records import JSON, Event, Kind, RunInfo, RunStatus
from ..runtime import finish
from ..runtime.claim import Claims
from ..runtime.fork import current_branch, derived_header
from ..store import Store
from .select import Plan
from .trace import Effect

WORKFLOW = "daybook.recover"
# How a new recovery may find the recovery run of an earlier one that a crash cut short.
UNFINISHED = tuple(
    s.value
    for s in (
        RunStatus.RUNNING,
        RunStatus.PENDING,
        RunStatus.NEEDS_ATTENTION,
        RunStatus.STUCK,
        RunStatus.COMPLETED,
    )
)


def run_id_of(run_id: str, branch: int) -> str:
    return f"{run_id}~recover{branch}"


def undo(
    store: Store, claims: Claims, info: RunInfo, plan: Plan, branch: int, context: Callable[[Execution], Any]
) -> list[str]:
    """Undo the plan's compensable effects in the recovery run; the keys undone. Raises
    `RunStuck` when an inverse failed, `NeedsAttention` when an undo's outcome is unknown."""
    return undo_effects(store, claims, info, plan.compensate, run_id_of(info.run_id, branch), context)


def undo_effects(
    store: Store,
    claims: Claims,
    info: RunInfo,
    effects: Sequence[Effect],
    rid: str,
    context: Callable[[Execution], Any],
    again: str | None = None,
) -> list[str]:
    """Undo `effects` of run `info` (confirmed, compensable; in this order) in the recovery run
    `rid`, each once; the keys undone (see `undo`). `again`: the command that goes on after a
    stop (default: `daybook recover RUN`)."""
    if not effects:
        return []
    again = again or f"`daybook recover {info.run_id}`"
    _lease(store, claims, info, rid)
    try:
        exe = Execution(store, rid, store.load(rid), claims.heartbeat(rid))
        try:
            done, stuck = _inverses(store, info, effects, context(exe))
        except Stop as stop:
            raise _stopped(info, rid, finish.fail(store, claims.owner, exe, stop), again) from None
        except BaseException:
            finish.stop_beat(exe)
            raise
        if stuck:
            message = (
                f"run {info.run_id!r}: recovery run {rid!r} could not undo {stuck} (undone: "
                f"{done or 'nothing'}); the run stays {info.status}. Undo them by hand (`daybook "
                f"resolve`), then {again} goes on"
            )
            finish.stop_beat(exe)
            error = {"type": "RunStuck", "message": message}
            store.finish(rid, claims.owner, RunStatus.STUCK.value, None, error, None, time.time())
            raise RunStuck(info.run_id, message)
        _complete(store, claims.owner, exe, done)
        return done
    finally:
        claims.let_go(rid)


def _lease(store: Store, claims: Claims, info: RunInfo, rid: str) -> None:
    """Create the recovery run under this handle's lease, or take over the one an earlier
    recovery left (a crash cut it short)."""
    claims.reserve(rid)
    if store.create_run(*_header(info, rid, claims.owner, claims.lease_ttl)):
        return
    claims.unreserve(rid)
    try:
        held = claims.hold(rid, UNFINISHED)
    except RunLeased as exc:
        raise RecoveryInProgress(info.run_id, exc.owner, exc.expires_in) from None
    if not held:
        raise DaybookError(
            f"run {info.run_id!r}: its recovery run {rid!r} was cancelled or expired, so this "
            "recovery cannot go on; `daybook show` both runs, and settle the run by hand"
        )


def _inverses(
    store: Store, info: RunInfo, effects: Sequence[Effect], ctx: Any
) -> tuple[list[str], list[str]]:
    """Run each inverse under `comp/<key>`: (keys undone, keys that could not be)."""
    events = current_branch(store, info.run_id)
    rows = {ev.key: ev for ev in events if ev.key and ev.kind == Kind.INTENT}
    results = _results(events)
    done, stuck = [], []
    for eff in effects:
        tool = lookup_tool(eff.tool)
        inverse = tool.inverse if tool is not None and tool.effect.has_inverse else None
        if not inverse:
            stuck.append(eff.key)  # the plan said compensable; the code here has no inverse
            continue
        intent = rows[eff.key]
        try:
            ctx.effect(
                inverse,
                key=keys.compensation_key(eff.key),
                original=intent.data.get("args"),
                result=results.get(eff.key),
            )
            done.append(eff.key)
        except EffectFailed:
            stuck.append(eff.key)
    return done, stuck


def _complete(store: Store, owner: str, exe: Execution, done: list[str]) -> None:
    info = store.get_run(exe.run_id)
    if info is not None and info.status == RunStatus.COMPLETED:
        # A recovery that completed its undos before a crash: only its lease to give back.
        finish.stop_beat(exe)
        store.release(exe.run_id, owner)
        return
    finish.write_completed(store, owner, exe, {"undone": list(done)})


def _stopped(info: RunInfo, rid: str, error: BaseException, again: str) -> DaybookError:
    """What the recoverer is told when an undo stopped the recovery run (never a raw `Stop`)."""
    if not isinstance(error, DaybookError) or isinstance(error, RunLeased):
        return RecoveryInProgress(info.run_id, getattr(error, "owner", "?"), 0.0)
    return NeedsAttention(
        info.run_id,
        f"run {info.run_id!r}: its undo stopped in recovery run {rid!r}: {error}. The run stays "
        f"{info.status}; settle that (`daybook unknowns`, `daybook resolve {rid} STEP ...`), then "
        f"{again} continues it",
    )


def _results(events: list[Event]) -> dict[str, JSON]:
    intents = {ev.step: ev.key for ev in events if ev.kind == Kind.INTENT}
    return {
        str(intents[ev.step]): ev.data.get("result")
        for ev in events
        if ev.kind == Kind.OUTCOME and ev.step in intents
    }


def _header(info: RunInfo, rid: str, owner: str, ttl: float) -> tuple[RunInfo, Event]:
    now = time.time()
    more = {
        "workflow": WORKFLOW,
        "queue": None,
        "partition": None,
        "parent_run": info.run_id,
    }
    header = derived_header(info, rid, RunStatus.RUNNING, {"recovers": info.run_id}, now, **more)
    header = dataclasses.replace(header, lease_owner=owner, lease_expires=now + ttl)
    first = Event(
        run_id=rid, seq=1, kind=Kind.RUN_STARTED.value, name=WORKFLOW, data={"recovers": info.run_id}, at=now
    )
    return header, first
