"""The hand-off of a queued write: a writer that must keep its rows in order with other threads'
(a speculation's branches, journal/turnstile.py) asks to be told the moment its write has its
place in a group commit's line (store/group.py, store/postgres_group.py). From then on the
order of the commits is the order of the line, so the next writer may take its turn while this
one still waits for its commit to be durable.

A `Gathering` makes writes that are known to come together share one commit (a speculation's
K begins, its K-1 losers' aborts): a thread of the gathering that is to lead the line's next
commit first waits, briefly, until every thread of it has its write in line or has said it
will not write (no commit waits long: `PATIENCE`, then it goes with what is in line).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

# How long a gathering's leader waits at most for the others (then it commits without them:
# they share a later commit, as without a gathering).
PATIENCE = 0.02

_local = threading.local()

# How many threads are inside `on_queued` or `joining` now. While none is, no thread has anything
# to be told or to wait for, so a group commit skips this module (`users` read as a plain module
# attribute: the lone writer's hot path pays no call for a speculation it is not in). A thread with
# state counted itself in before it wrote, so it always sees `users` above zero.
users = 0
_count = threading.Lock()


def _counted(step: int) -> None:
    global users
    with _count:
        users += step


class Gathering:
    """`expected` threads whose next writes should share one commit."""

    def __init__(self, expected: int) -> None:
        self._left = expected
        self._all_in = threading.Condition()

    def _arrive(self) -> None:
        with self._all_in:
            self._left -= 1
            if self._left <= 0:
                self._all_in.notify_all()

    def _wait(self) -> None:
        with self._all_in:
            self._all_in.wait_for(lambda: self._left <= 0, PATIENCE)


def queued() -> None:
    """Called by a group commit once this thread's write is in its line (or leads it): tells
    the thread's waiting writer, once, and counts the thread in for its gathering. Never
    raises (`told` only moves a counter and releases a lock it holds): the line must go on."""
    arrived()
    told = getattr(_local, "told", None)
    if told is not None:
        _local.told = None
        told()


def arrived() -> None:
    """This thread's write is in line, or it will not write soon (it waits for rows in line
    to be durable, or is done): its gathering no longer waits for it."""
    gathering = getattr(_local, "gathering", None)
    if gathering is not None:
        _local.gathering = None
        gathering._arrive()


def gathers() -> bool:
    """Whether this thread's next write belongs to a gathering (its commit waits for the rest)."""
    return getattr(_local, "gathering", None) is not None


def gathered() -> None:
    """Called by a group commit's leader before it takes the line: waits for its gathering."""
    gathering = getattr(_local, "led", None)
    if gathering is not None:
        _local.led = None
        gathering._wait()


@contextlib.contextmanager
def on_queued(told: Callable[[], None]) -> Iterator[None]:
    """While in the block, `told()` is called when this thread's next write is in line."""
    saved = getattr(_local, "told", None)
    _local.told = told
    _counted(1)
    try:
        yield
    finally:
        _local.told = saved
        _counted(-1)


@contextlib.contextmanager
def joining(gathering: Gathering) -> Iterator[None]:
    """This thread's first write in the block belongs to `gathering` (counted in at the end of
    the block if it wrote none)."""
    _local.gathering = _local.led = gathering
    _counted(1)
    try:
        yield
    finally:
        arrived()
        _local.led = None
        _counted(-1)


__all__ = ["Gathering", "arrived", "gathered", "gathers", "joining", "on_queued", "queued"]
