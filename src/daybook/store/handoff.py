"""The hand-off of a queued write: a writer that must keep its rows in order with other threads'
(a speculation's branches, journal/turnstile.py) asks to be told the moment its write has its
place in a group commit's line (store/group.py, store/postgres_group.py). From then on the
order of the commits is the order of the line, so the next writer may take its turn while this
one still waits for its commit to be durable."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

_local = threading.local()


def queued() -> None:
    """Called by a group commit once this thread's write is in its line (or leads it): tells
    the thread's waiting writer, once."""
    told = getattr(_local, "told", None)
    if told is not None:
        _local.told = None
        told()


@contextlib.contextmanager
def on_queued(told: Callable[[], None]) -> Iterator[None]:
    """While in the block, `told()` is called when this thread's next write is in line."""
    saved = getattr(_local, "told", None)
    _local.told = told
    try:
        yield
    finally:
        _local.told = saved


__all__ = ["on_queued", "queued"]
