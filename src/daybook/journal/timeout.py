"""Start-to-close timeouts: a call that must answer within a time, run on a reused helper thread.

Shared by effects (`Retry(timeout=)`, whose timed-out call is an unknown outcome) and decisions
(`ctx.decide(..., timeout=)`). A call that timed out keeps its thread until it returns; nothing
waits for it, and its thread is not reused. A call with no timeout (the default) runs in the
caller's thread: the hand-off to a helper and back costs tens of microseconds, more than the rest
of an effect step's own work, so only a call that asks for a limit pays it.
"""

from __future__ import annotations

import contextvars
import queue
import threading
from collections.abc import Callable
from typing import Any

from ..errors import TimedOut


def call_with_timeout(fn: Callable[[], Any], timeout: float) -> Any:
    """`fn()`, or `TimeoutError` once `timeout` seconds pass without an answer (0: no limit, and
    `fn` runs in this thread). It runs on a reused helper thread, in a copy of this context; a
    call that timed out keeps its thread until it returns, and nothing waits for it."""
    if not timeout:
        return fn()
    context = contextvars.copy_context()
    hand = _HANDS.take()
    hand.jobs.put(lambda: context.run(fn))
    try:
        ok, value = hand.results.get(timeout=timeout)
    except queue.Empty:
        # The hand is not reused. TimedOut is a TimeoutError: an act's outcome is then unknown.
        raise TimedOut(f"no answer within {timeout:g}s (start-to-close timeout)", {}) from None
    _HANDS.give_back(hand)
    if not ok:
        raise value
    return value


class _Hand:
    """One helper thread: jobs in, (ok, value) out."""

    def __init__(self, hands: _Hands) -> None:
        self.jobs: queue.SimpleQueue[Callable[[], Any]] = queue.SimpleQueue()
        self.results: queue.SimpleQueue[tuple[bool, Any]] = queue.SimpleQueue()
        threading.Thread(target=hands.serve, args=(self,), name="daybook-call", daemon=True).start()


class _Hands:
    """Helper threads for calls under a timeout, kept for reuse: starting a thread per call
    costs more than a journal write. One idle for a minute ends; so does one whose caller gave
    up on it (a call that timed out), once its call returns."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[_Hand] = []

    def take(self) -> _Hand:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return _Hand(self)

    def give_back(self, hand: _Hand) -> None:
        with self._lock:
            self._idle.append(hand)

    def serve(self, hand: _Hand) -> None:
        while True:
            try:
                fn = hand.jobs.get(timeout=60.0)
            except queue.Empty:
                with self._lock:
                    if hand not in self._idle:
                        if hand.results.empty():
                            continue  # taken just now: its job is on the way
                        return  # given up on: its last result was never read
                    self._idle.remove(hand)
                    return
            try:
                result: tuple[bool, Any] = (True, fn())
            except BaseException as exc:
                result = (False, exc)
            hand.results.put(result)


_HANDS = _Hands()
