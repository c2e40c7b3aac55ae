"""What an operator does to a run from outside its code: retry it after a fix, or cancel it.

Each is one `store.transition`: the header's status changes and a journal row records who
asked, when, and what the run was, in one database transaction, whoever holds the run's lease
(an owner that had not noticed stops at its next journal write: its seq is taken). A cancel
that unwinds the run's effects runs the unwind (the `unwind` callback, `ctx.compensate` in the
facade) on an execution that starts after the run's last step, so a second `cancel` after a
crash mid-unwind replays what was undone and goes on: nothing is undone twice.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..errors import ConfigError, LeaseLost, RunNotFound
from ..journal.execution import Execution
from ..journal.stop import Stop
from ..records import Event, Kind, RunInfo, RunStatus, dumps
from ..store import Store
from .claim import PAUSE_SIGNAL
from .finish import RERUN, release_ended
from .lease import is_dead_here

RETRYABLE = (RunStatus.FAILED, RunStatus.NEEDS_ATTENTION, RunStatus.STUCK, RunStatus.PAUSED)
CANCELLABLE = (
    RunStatus.PAUSED,
    RunStatus.PENDING,
    RunStatus.RUNNING,
    RunStatus.SUSPENDED,
    RunStatus.NEEDS_ATTENTION,
    RunStatus.STUCK,
    RunStatus.FAILED,
)
# A transition races only with the run's own journal writes; a few tries settle it.
ATTEMPTS = 20


def retry(
    store: Store,
    run_id: str,
    by: str,
    extra: dict[str, Any] | None = None,
    allowed: tuple[RunStatus, ...] = RETRYABLE,
) -> str:
    """Make a failed, parked or stuck run due again (`pending`), journaled with who asked.
    Returns the status it left. Its next execution replays the journal: confirmed effects and
    recorded decisions come from it, and the step that raised runs again. `extra` goes into the
    row (a semantic recovery's branch: the steps it supersedes, `daybook.recovery`)."""

    def mark(info: RunInfo, events: list[Event], now: float) -> Event:
        data = {"by": by, "from": info.status, "error": info.error, **(extra or {})}
        if "supersede" not in data:
            data.update(_rerun(events))
        return _event(run_id, events, Kind.RUN_RETRIED, "retry", data, now)

    found = store.get_run(run_id)
    if found is not None and isinstance(found.input, dict) and "$erased" in found.input:
        raise ConfigError(
            f"run {run_id!r}: its payloads were erased by `daybook gc` ({found.input['$erased']}), "
            "so it cannot run again from its journal; start a new run"
        )
    info = _transition(store, run_id, allowed, RunStatus.PENDING, mark, "retried")
    return info.status


def _rerun(events: list[Event]) -> dict[str, Any]:
    """The journal branch a retry opens when the run stopped on a decision's failure it did not
    catch (`finish.RERUN` on its last `run_attention` or `run_failed` row): that step is
    superseded, so it runs again (with the fixed code) instead of replaying its recorded
    failure. Nothing when the run stopped otherwise."""
    ends = (Kind.RUN_ATTENTION, Kind.RUN_FAILED, Kind.RUN_RETRIED)
    last = next((ev for ev in reversed(events) if ev.kind in ends), None)
    step = None if last is None or last.kind == Kind.RUN_RETRIED else last.data.get(RERUN)
    if isinstance(step, bool) or not isinstance(step, int):
        return {}
    branch = 1 + sum(1 for ev in events if ev.kind == Kind.RUN_RETRIED and ev.data.get("supersede"))
    return {"supersede": [step], "branch": branch}


PAUSABLE = (
    RunStatus.PENDING,
    RunStatus.RUNNING,
    RunStatus.SUSPENDED,
    RunStatus.NEEDS_ATTENTION,
    RunStatus.STUCK,
)


def pause(store: Store, run_id: str, by: str, identity: dict[str, Any] | None = None) -> str:
    """Pause a run: at once if no live process executes it (`paused`, journaled with who asked
    and `identity`, how sure that is: `gates.identity`); else ask its owner, through its inbox,
    to stop at its next step boundary (an act in flight finishes and is journaled first).
    Returns "paused", "requested" or "already"."""
    who = {"by": by, **({"identity": identity} if identity else {})}
    info = store.get_run(run_id)
    if info is None:
        raise RunNotFound(run_id, store.url)
    if info.status == RunStatus.PAUSED:
        return "already"
    executing = info.status == RunStatus.RUNNING and info.lease_owner is not None
    if executing and (info.lease_expires or 0.0) > time.time() and not is_dead_here(info.lease_owner or ""):
        sent = store.signal(run_id, PAUSE_SIGNAL, dumps(who, "pause"), by, time.time(), wake=False)
        if sent is not None:
            return "requested"

    def mark(info: RunInfo, events: list[Event], now: float) -> Event:
        return _event(run_id, events, Kind.RUN_PAUSED, "pause", {**who, "from": info.status}, now)

    _transition(store, run_id, PAUSABLE, RunStatus.PAUSED, mark, "paused")
    return "paused"


EXPIRABLE = (RunStatus.PAUSED, RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED)


def expire(store: Store, run_id: str, by: str, cutoff: float, environment: str | None) -> None:
    """End a run that stayed paused, or whose environment outlived it, past the retention window
    (`expired`, terminal), journaled with who ran the pass (gc or a worker), its cutoff, the
    status it left and the environment it removes (if any)."""

    def mark(info: RunInfo, events: list[Event], now: float) -> Event:
        data = {"by": by, "cutoff": cutoff, "environment": environment, "from": info.status}
        return _event(run_id, events, Kind.RUN_EXPIRED, "expire", data, now)

    _transition(store, run_id, EXPIRABLE, RunStatus.EXPIRED, mark, "expired")
    release_ended(store, run_id, "expired")


def cancel(
    store: Store, run_id: str, by: str, compensate: bool, identity: dict[str, Any] | None = None
) -> tuple[str, int]:
    """Set the run `cancelled` (terminal), journaled with who asked (and `identity`) and whether
    its effects are to be unwound. Returns the status it left and the step an unwind starts at."""
    first = 1

    def mark(info: RunInfo, events: list[Event], now: float) -> Event:
        nonlocal first
        first = max((ev.step for ev in events if ev.step is not None), default=0) + 1
        data = {"by": by, "from": info.status, "compensate": compensate, "from_step": first}
        if identity:
            data["identity"] = identity
        return _event(run_id, events, Kind.RUN_CANCELLED, "cancel", data, now)

    info = _transition(store, run_id, CANCELLABLE, RunStatus.CANCELLED, mark, "cancelled")
    release_ended(store, run_id, "cancelled")
    return info.status, first


def unwind(
    store: Store, run_id: str, context: Callable[[Execution], Any], undo: Callable[[Any], Any]
) -> dict[str, list[str]]:
    """Run `undo(ctx)` for a cancelled run, on steps after the run's own (from the cancel that
    asked for it): a repeat after a crash replays what was already undone. The outcome is
    journaled (`run_cancelled` `unwound` or `stuck`) and returned as lists of keys
    (`compensated`, `stuck`, `no_inverse`); once unwound, the stored report is returned and
    nothing runs; a stuck unwind raises its error."""
    events = store.load(run_id)
    asked = [ev for ev in events if ev.kind == Kind.RUN_CANCELLED and ev.name == "cancel"]
    if not asked:
        raise ConfigError(f"run {run_id!r} is not cancelled: `daybook cancel {run_id}` first")
    unwound = [ev for ev in events if ev.kind == Kind.RUN_CANCELLED and ev.name == "unwound"]
    if unwound:
        stored: dict[str, list[str]] = unwound[-1].data["report"]
        return stored
    first = int(asked[-1].data.get("from_step") or 1)
    exe = Execution(store, run_id, events, None)
    exe.start_at(first)
    try:
        report = undo(context(exe))
    except Stop as stop:
        exe.append(Kind.RUN_CANCELLED, None, "stuck", data={"message": str(stop.error)})
        raise stop.error from None
    done = _report(report)
    exe.append(Kind.RUN_CANCELLED, None, "unwound", data={"report": done})
    return done


def _report(report: Any) -> dict[str, list[str]]:
    return {name: list(getattr(report, name, []) or []) for name in ("compensated", "stuck", "no_inverse")}


def _event(
    run_id: str, events: list[Event], kind: Kind, name: str, data: dict[str, Any], now: float
) -> Event:
    seq = (events[-1].seq if events else 0) + 1
    return Event(run_id=run_id, seq=seq, kind=kind.value, name=name, data=data, at=now)


def _transition(
    store: Store,
    run_id: str,
    allowed: tuple[RunStatus, ...],
    to: RunStatus,
    mark: Callable[[RunInfo, list[Event], float], Event],
    verb: str,
) -> RunInfo:
    for _ in range(ATTEMPTS):
        info = store.get_run(run_id)
        if info is None:
            raise RunNotFound(run_id, store.url)
        if info.status not in allowed:
            raise ConfigError(_cannot(run_id, info.status, verb, allowed))
        now = time.time()
        event = mark(info, store.load(run_id), now)
        error = None if to == RunStatus.PENDING else info.error
        try:
            if store.transition(run_id, tuple(allowed), to.value, error, event, now):
                return info
        except LeaseLost:
            pass  # the run wrote a row meanwhile: read it again
    raise ConfigError(f"run {run_id!r} kept changing while it was being {verb}; try again")


def _cannot(run_id: str, status: str, verb: str, allowed: tuple[RunStatus, ...]) -> str:
    hint = {
        RunStatus.COMPLETED: "it completed",
        RunStatus.CANCELLED: "it was cancelled",
        RunStatus.FAILED: f"it failed: `daybook retry {run_id}` continues it after a fix",
        RunStatus.PENDING: "it has not run yet (a worker or `daybook resume` runs it)",
        RunStatus.RUNNING: "it is running",
        RunStatus.SUSPENDED: "it is waiting (a timer or a signal)",
        RunStatus.PAUSED: f"it is paused: `daybook resume {run_id}` goes on",
        RunStatus.EXPIRED: "it expired (paused past the retention window)",
    }.get(RunStatus(status), f"it is {status}")
    can = ", ".join(s.value for s in allowed)
    return f"run {run_id!r} cannot be {verb}: {hint}. Only a run that is {can} can be {verb}"
