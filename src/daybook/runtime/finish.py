"""Finishing an execution: how a workflow body ended, written to the run header and journal.

Completed (with its result), failed (the workflow raised: terminal), needs attention or stuck
(a person must look), suspended (a durable wait), or left resumable (lease lost, store down,
KeyboardInterrupt): each is one `store.finish`/`suspend`/`release` call.
"""

from __future__ import annotations

import time
from typing import Any

from ..errors import (
    BudgetExceeded,
    DaybookError,
    NonDeterminismError,
    NotSerializable,
    RunFailed,
    RunParked,
    StepFailed,
    TimedOut,
    WorkflowFailed,
)
from ..journal.execution import Execution, error_info
from ..journal.stop import Pause, Stop, Suspend
from ..records import Event, Kind, RunStatus, check_json, dumps, safe_text
from ..store import Store
from ..store.secrets import concealer_for
from ..store.tx_release import release_run


def stop_beat(exe: Execution) -> None:
    if exe.heartbeat is not None:
        exe.heartbeat.stop()


def complete(store: Store, owner: str, exe: Execution, result: Any) -> Any:
    """Record the run completed with `result`; raises `Stop` if the journal holds steps the
    body did not reach, or the result cannot be journaled."""
    exe.check_complete()
    try:
        check_json(result, f"run {exe.run_id!r} result")
    except DaybookError as exc:
        raise Stop(exc, True) from None
    try:
        write_completed(store, owner, exe, result)
    except NotSerializable as exc:  # over the payload limit: refused before anything was written
        raise Stop(exc, True) from None
    return result


def write_completed(store: Store, owner: str, exe: Execution, result: Any) -> None:
    """The `run_completed` row and the header's final status, in one store call, with the
    outcomes the cursor held for the run's next row (goal: one commit per effect step, the
    run's end included). A crash before it loses them and the end together: the run is
    resumed, its held outcomes are unknowns their tools' profiles settle (docs/stores.md)."""

    def end(held: list[Event]) -> None:
        done = Event(
            run_id=exe.run_id,
            seq=exe.next_seq,
            kind=Kind.RUN_COMPLETED.value,
            data={"result": result},
            at=time.time(),
        )
        stop_beat(exe)
        store.finish(exe.run_id, owner, RunStatus.COMPLETED.value, result, None, done, time.time(), held)

    exe.flush(end)
    release_ended(store, exe.run_id, "completed")


def release_ended(store: Store, run_id: str, status: str) -> None:
    """A run that ended holds no transaction scope: release its attempts still open (none,
    unless it ended inside one). Not fatal if the store fails here: a transaction waiting on
    them releases what an ended run holds (store/tx_release.py)."""
    try:
        release_run(store, run_id, "daybook", f"run {run_id!r} {status}")
    except Exception:
        return


def flushed(exe: Execution, exc: BaseException) -> BaseException:
    """Write the outcomes the cursor held for its next row before the run's header moves (the
    lease is given back, or the run ends). If that write fails (the lease was lost, the store
    is down), how the run ended is that failure instead: no row is written after the missing
    one (no gap in the seqs), and the run stays resumable (the held outcomes are then unknowns
    its tools' profiles settle). A KeyboardInterrupt stays one: it only gives the lease back."""
    try:
        exe.flush()
    except Stop as stop:
        return stop if isinstance(exc, Exception | Stop) else exc
    return exc


# What a workflow raises on purpose ends its run as `failed`: a refusal it decided, an act that
# failed for certain, a budget that said no. Anything else is most likely a bug and parks the run.
ON_PURPOSE: tuple[type[BaseException], ...] = (WorkflowFailed, StepFailed, BudgetExceeded)


# The step a parked or failed run's last row names to run again on `retry`: a decision whose
# failure the workflow did not catch.
RERUN = "rerun"


def failed_step(exc: BaseException) -> int | None:
    """The decision whose recorded failure `exc` is (`StepFailed.step`), if it is one."""
    return exc.step if isinstance(exc, StepFailed) else None


def is_bug(exc: BaseException, fail_on: tuple[type[BaseException], ...]) -> bool:
    """Whether `exc` was not raised on purpose: a class outside `ON_PURPOSE` and `fail_on`, or
    a decision's failure whose function raised such a class (`StepFailed.bug`)."""
    if isinstance(exc, StepFailed) and exc.bug:
        named = exc.error.get("type") in {c.__name__ for c in fail_on}
        return not (named or isinstance(exc.__cause__, fail_on))
    return not isinstance(exc, ON_PURPOSE + fail_on)


def fail(
    store: Store,
    owner: str,
    exe: Execution,
    exc: BaseException,
    fail_on: tuple[type[BaseException], ...] = (),
    park: bool = True,
) -> BaseException:
    """Record how the body stopped and return the exception for the caller to raise. An
    exception not raised on purpose (`ON_PURPOSE`, or the workflow's `fail_on`) parks the run
    as `needs_attention` when `park`, as Temporal retries a failed workflow task: a code fix
    and `daybook retry` continue it; otherwise it is `failed`."""
    stop_beat(exe)
    exc = flushed(exe, exc)
    if isinstance(exc, NonDeterminismError):
        # The code is wrong for this run (strict mode, a changed body): not the run's failure.
        # Park it for a person, journal untouched, resumable after the fix.
        exc = Stop(exc, True)
    if isinstance(exc, Pause):
        data = {"by": exc.by, "from": RunStatus.RUNNING.value, "inbox_id": exc.inbox_id}
        now = time.time()
        paused = Event(run_id=exe.run_id, seq=exe.next_seq, kind=Kind.RUN_PAUSED.value, data=data, at=now)
        store.finish(exe.run_id, owner, RunStatus.PAUSED.value, None, None, paused, now)
        return exc.error
    deadline = exe.settings.deadline
    if isinstance(exc, Suspend) and deadline is not None and time.time() >= deadline:
        # Waiting past its execution timeout: the wait ends the run instead of suspending it.
        exc = TimedOut(f"run {exe.run_id!r} passed its execution timeout while waiting", {})
    if isinstance(exc, Suspend):
        wake = exc.wake_at
        if deadline is not None:  # woken at its execution deadline at the latest, to time out
            wake = deadline if wake is None else min(wake, deadline)
        store.suspend(exe.run_id, owner, wake, time.time())
        return exc.error
    if isinstance(exc, Stop):
        return _stopped(store, owner, exe, exc)
    if not isinstance(exc, Exception):
        # KeyboardInterrupt and friends: leave the run resumable, as a crash would.
        store.release(exe.run_id, owner)
        return exc
    # Scrubbed here, not only in the store: the RunFailed raised to the caller carries it too.
    info = concealer_for(store).scrub(error_info(exc, full=True))
    now = time.time()
    rerun = failed_step(exc)
    if park and is_bug(exc, fail_on):
        data = {"message": info["message"], "error": info["type"], "parked": True}
        if rerun is not None:
            data[RERUN] = rerun  # `retry` supersedes this step: after the fix it runs again
        parked = Event(run_id=exe.run_id, seq=exe.next_seq, kind=Kind.RUN_ATTENTION.value, data=data, at=now)
        store.finish(exe.run_id, owner, RunStatus.NEEDS_ATTENTION.value, None, info, parked, now)
        return RunParked(exe.run_id, info)
    failed: dict[str, Any] = {"error": info} if rerun is None else {"error": info, RERUN: rerun}
    event = Event(run_id=exe.run_id, seq=exe.next_seq, kind=Kind.RUN_FAILED.value, data=failed, at=now)
    store.finish(exe.run_id, owner, RunStatus.FAILED.value, None, info, event, now)
    release_ended(store, exe.run_id, "failed")
    return RunFailed(exe.run_id, info)


# A run whose journal writes keep failing for store reasons is retried later, not at once:
# after 1 s, then 2, 4, ... up to BACKOFF_CAP, counted per run at the same journal position.
BACKOFF_FIRST = 1.0
BACKOFF_CAP = 60.0


def back_off(store: Store, owner: str, exe: Execution, error: BaseException) -> float:
    """Give the run back, not to be taken again (by a worker) before its backoff has passed;
    the header's error counts the consecutive failures. Returns the delay (0: store down)."""
    now = time.time()
    try:
        info = store.get_run(exe.run_id)
        before = info.error if info is not None and isinstance(info.error, dict) else {}
        same = before.get("seq") == exe.next_seq
        failures = int(before.get("failures", 0)) + 1 if same else 1
        delay = float(min(BACKOFF_CAP, BACKOFF_FIRST * 2 ** (failures - 1)))
        record = {
            "type": type(error).__name__,
            "message": safe_text(str(error)),
            "failures": failures,
            "seq": exe.next_seq,
            "retry_at": now + delay,
        }
        store.defer(exe.run_id, owner, now + delay, dumps(record, f"run {exe.run_id!r} error"), now)
    except Exception:  # the store is still down: the lease lapses after its TTL instead
        return 0.0
    return delay


def _stopped(store: Store, owner: str, exe: Execution, stop: Stop) -> BaseException:
    if not stop.attention:
        if stop.release:
            back_off(store, owner, exe, stop.error)
        return stop.error  # lease lost, or the store failed: leave the run resumable
    now = time.time()
    message = safe_text(str(stop.error))
    event = None
    if stop.journal:
        event = Event(
            run_id=exe.run_id,
            seq=exe.next_seq,
            kind=Kind.RUN_ATTENTION.value,
            data={"message": message, "error": type(stop.error).__name__},
            at=now,
        )
    error = {"type": type(stop.error).__name__, "message": message}
    store.finish(exe.run_id, owner, stop.status, None, error, event, now)
    return stop.error
