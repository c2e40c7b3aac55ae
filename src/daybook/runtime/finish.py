"""Finishing an execution: how a workflow body ended, written to the run header and journal.

Completed (with its result), failed (the workflow raised: terminal), needs attention or stuck
(a person must look), suspended (a durable wait), or left resumable (lease lost, store down,
KeyboardInterrupt): each is one `store.finish`/`suspend`/`release` call.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from ..errors import DaybookError, NonDeterminismError, RunFailed
from ..journal.execution import Execution, error_info
from ..journal.stop import Stop, Suspend
from ..records import Event, Kind, RunStatus, check_json
from ..store import Store


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
    done = Event(
        run_id=exe.run_id,
        seq=exe.next_seq,
        kind=Kind.RUN_COMPLETED.value,
        data={"result": result},
        at=time.time(),
    )
    stop_beat(exe)
    store.finish(exe.run_id, owner, RunStatus.COMPLETED.value, result, None, done, time.time())
    return result


def fail(store: Store, owner: str, exe: Execution, exc: BaseException) -> BaseException:
    """Record how the body stopped and return the exception for the caller to raise."""
    stop_beat(exe)
    if isinstance(exc, NonDeterminismError):
        # The code is wrong for this run (strict mode, a changed body): not the run's failure.
        # Park it for a person, journal untouched, resumable after the fix.
        exc = Stop(exc, True)
    if isinstance(exc, Suspend):
        store.suspend(exe.run_id, owner, exc.wake_at, time.time())
        return exc.error
    if isinstance(exc, Stop):
        return _stopped(store, owner, exe, exc)
    if not isinstance(exc, Exception):
        # KeyboardInterrupt and friends: leave the run resumable, as a crash would.
        store.release(exe.run_id, owner)
        return exc
    info = error_info(exc)
    now = time.time()
    event = Event(
        run_id=exe.run_id, seq=exe.next_seq, kind=Kind.RUN_FAILED.value, data={"error": info}, at=now
    )
    store.finish(exe.run_id, owner, RunStatus.FAILED.value, None, info, event, now)
    return RunFailed(exe.run_id, info)


def _stopped(store: Store, owner: str, exe: Execution, stop: Stop) -> BaseException:
    if not stop.attention:
        if stop.release:
            with contextlib.suppress(Exception):  # the store may still be down
                store.release(exe.run_id, owner)
        return stop.error  # lease lost, or the store failed: leave the run resumable
    now = time.time()
    message = str(stop.error)
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
