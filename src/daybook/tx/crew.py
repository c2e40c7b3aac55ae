"""The threads a speculation's branches run on (tx/speculate.py), kept between speculations.

Starting a thread costs the starter a switch to the new thread and back (`Thread.start` waits
until it runs), and a K-branch speculation starts K of them: at K=16 that was the largest share
of the speculation's CPU after its SQL. A thread whose branch is done waits here, idle, for the
next speculation's branch instead of ending. Each job runs in a fresh `contextvars.Context`, as
on a new thread (no ContextVar a previous branch set is seen), and a job's exception never ends
its thread (a branch reports its own to the run's thread). At most `MAX_IDLE` threads wait; a
forked child forgets the parent's (they do not exist in it).
"""

from __future__ import annotations

import contextvars
import os
import threading
from collections.abc import Callable

# The idle threads kept at most (more branches than this at once: the extra threads end).
MAX_IDLE = 64

_idle: list[_Hand] = []
_idle_lock = threading.Lock()


class _Hand:
    """One thread of the crew, idle on its `wake` lock until given a job."""

    __slots__ = ("_job", "_wake", "ident")

    def __init__(self) -> None:
        self._job: Callable[[], None] | None = None
        self._wake = threading.Lock()
        self._wake.acquire()
        thread = threading.Thread(target=self._loop, name="daybook-branch", daemon=True)
        thread.start()
        self.ident: int = thread.ident or 0

    def give(self, job: Callable[[], None]) -> None:
        self._job = job
        self._wake.release()

    def _loop(self) -> None:
        while True:
            self._wake.acquire()
            job, self._job = self._job, None
            try:
                if job is not None:
                    contextvars.Context().run(job)
            except BaseException:  # a job reports its own errors: the thread goes on
                pass
            with _idle_lock:
                if len(_idle) >= MAX_IDLE:
                    return
                _idle.append(self)


def start(job: Callable[[], None]) -> int:
    """Run `job` on a thread of the crew (an idle one, else a new one); its thread's ident."""
    with _idle_lock:
        hand = _idle.pop() if _idle else None
    if hand is None:
        hand = _Hand()
    hand.give(job)
    return hand.ident


def _forget() -> None:
    """In a forked child: the parent's idle threads were not copied, only their records."""
    global _idle_lock
    _idle.clear()
    _idle_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget)

__all__ = ["MAX_IDLE", "start"]
