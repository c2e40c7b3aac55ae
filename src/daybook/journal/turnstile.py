"""The turnstile of a speculation's branches: how their threads take turns at the run's journal.

One row at a time takes the next seq (the journal stays one total order). A transaction's
bookkeeping row (`tx:begin`, `tx:commit`, `tx:abort`, `tx:end`, written by a store chain that
never fails on a key) lets the next branch through as soon as it is in a group commit's line
(store/handoff.py), not when it is durable: commits follow the line, so the rows are durable in
seq order (a crash leaves a prefix), and branches writing at once share commits instead of
waiting for each other's. Any other row (an effect's, whose key may collide) first waits for
the rows in line to be durable and holds the turnstile until its own is, as every row once did.

A thread may `pin` the turnstile across a row written with the next one (an attempt's decision
held for its end row, tx/atomix.py `_decided`): nobody takes a seq between them.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from ..records import Event
from ..store import handoff

Writer = Callable[[Event], Any]


class _Cursor(Protocol):
    _next_seq: int


class Turnstile:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pinned: int | None = None  # the thread holding the turnstile across rows
        self._landing = threading.Condition()
        self._in_line = 0  # rows handed off, not yet durable

    def through(
        self,
        parent: _Cursor,
        cursor: _Cursor,
        write: Writer | None,
        handed: bool,
        append: Callable[[Writer | None], Event],
    ) -> Event:
        """`append(write)` on `cursor` (a branch of `parent`), in turn: the row takes the run's next
        seq; `handed`: the turnstile lets go once it is in a commit's line, else once written."""
        self._enter()
        ahead: list[bool] = []  # set once the row is in a commit's line (the turnstile let go)

        def in_line() -> None:
            parent._next_seq = cursor._next_seq + 1  # this row's seq is taken, in order
            ahead.append(True)
            self._handed_off()

        try:
            cursor._next_seq = parent._next_seq
            if handed and write is not None:
                write = _armed(write, in_line)
            else:
                self.drain()  # the rows in line are durable before this one is written
            return append(write)
        finally:
            if ahead:
                self._landed()
            else:
                parent._next_seq = cursor._next_seq
                self._leave()

    def _enter(self) -> None:
        if self._pinned != threading.get_ident():
            self._lock.acquire()

    def _leave(self) -> None:
        """The row is written (or failed before its line): the next may go."""
        if self._pinned != threading.get_ident():
            self._lock.release()

    def _handed_off(self) -> None:
        """The row is in a commit's line: the next may go (a pin ends here too)."""
        with self._landing:
            self._in_line += 1
        if self._pinned == threading.get_ident():
            self._pinned = None
        self._lock.release()

    def _landed(self) -> None:
        """A handed-off row's write returned (durable, or failed)."""
        with self._landing:
            self._in_line -= 1
            if not self._in_line:
                self._landing.notify_all()

    def drain(self) -> None:
        """Wait, holding the turnstile, until every handed-off row's write has returned."""
        handoff.arrived()  # a commit gathering this thread's write must not wait for it
        with self._landing:
            while self._in_line:
                self._landing.wait()

    @contextlib.contextmanager
    def pinned(self) -> Iterator[None]:
        """Hold the turnstile from now until this thread's next hand-off (or the block's end)."""
        self._lock.acquire()
        me = self._pinned = threading.get_ident()
        try:
            yield
        finally:
            if self._pinned == me:
                self._pinned = None
                self._lock.release()


def _armed(write: Writer, in_line: Callable[[], None]) -> Writer:
    """`write`, telling `in_line` when the row is in a group commit's line (store/handoff.py)."""

    def armed(ev: Event) -> Any:
        with handoff.on_queued(in_line):
            return write(ev)

    return armed


__all__ = ["Turnstile"]
