"""How a step stops its run: the internal exceptions that unwind a workflow body.

They derive from `BaseException` so a user's `except Exception` cannot swallow them; the runtime
catches them at the body's edge and records what each means for the run header.
"""

from __future__ import annotations

from typing import Any

from ..errors import (
    DaybookError,
    DuplicateKey,
    LeaseLost,
    NotSerializable,
    RunPaused,
    StoreUnavailable,
    Suspended,
)
from ..records import Event


class Stop(BaseException):
    """Unwind the workflow. `attention` carries a message for the run header (and, with
    `journal`, a journal row); a lease loss carries neither, because this process no longer
    owns the run. `release`: give the lease back (the store failed under a live run)."""

    def __init__(
        self,
        error: DaybookError,
        attention: bool,
        journal: bool = False,
        release: bool = False,
        status: str = "needs_attention",
    ) -> None:
        super().__init__(str(error))
        self.error = error
        self.attention = attention
        self.journal = journal
        self.release = release
        self.status = status


class Pause(Stop):
    """A person asked the run to pause (`daybook pause`): stop before the next step."""

    def __init__(self, run_id: str, by: str, inbox_id: int) -> None:
        super().__init__(RunPaused(run_id, by), False)
        self.by = by
        self.inbox_id = inbox_id


class Suspend(Stop):
    """Park the run until `wake_at` (None: until a signal arrives)."""

    def __init__(self, run_id: str, wake_at: float | None, waiting_for: str) -> None:
        super().__init__(Suspended(run_id, wake_at, waiting_for), False)
        self.wake_at = wake_at


class ContinueAsNew(Stop):
    """End this run's segment and go on as a new run with fresh input."""

    def __init__(self, run_id: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        super().__init__(DaybookError(f"run {run_id!r} continues as a new run"), False)
        self.args = args
        self.kwargs = kwargs


class Rerun(BaseException):
    """Run the workflow body again from its start, replaying the journal just written (a
    transaction aborted and retries under a fresh epoch: a `with` block cannot run its body
    twice, so the body is reached again by replay, and the aborted attempt is skipped)."""


def write_failed(run_id: str, ev: Event, exc: Exception) -> Stop:
    """What a failed journal write of `ev` means for the run: a lost lease stops it quietly; a
    reused key, or a value or name the store cannot encode, parks it for a person (the step that
    produced it is at fault, and a retry would produce it again); anything else is the store
    unreachable or broken: stop as a crash would, the lease given back, resumable from the last
    durable row."""
    if isinstance(exc, LeaseLost):
        return Stop(exc, False)
    if isinstance(exc, DuplicateKey):
        return Stop(exc, True)
    if isinstance(exc, NotSerializable):
        return Stop(
            NotSerializable(
                f"run {run_id!r} step {ev.step} ({ev.kind} {ev.name!r}) cannot be journaled: "
                f"{exc}. The run is parked; fix the code that produced it, then "
                f"`daybook resume {run_id}`"
            ),
            True,
        )
    return Stop(
        StoreUnavailable(
            f"run {run_id!r}: the journal write for seq {ev.seq} ({ev.kind} {ev.name!r}) failed: "
            f"{type(exc).__name__}: {exc}. The run stopped where the journal ends; fix the store, "
            "then `daybook resume` it"
        ),
        False,
        release=True,
    )
