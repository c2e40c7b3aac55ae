"""Following a run's journal as it grows: the side channel `daybook journal RUN --follow` and
the web inspector's live updates read.

It reads committed rows only (the store's own reads), ordered by seq, so a follower never sees
an effect as done before its outcome row has committed: what it shows is what a crash right
now would leave (H10). Polling by seq is the whole mechanism: no trigger, no second write path.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from ..errors import RunNotFound
from ..records import TERMINAL, Event
from ..store import Store

POLL = 0.25  # seconds between reads of the journal


def since(store: Store, run_id: str, after: int) -> tuple[list[Event], str]:
    """The run's committed rows after seq `after`, and its status now."""
    info = store.get_run(run_id)
    if info is None:
        raise RunNotFound(run_id, store.url)
    return store.load(run_id, after), info.status


def follow(
    store: Store,
    run_id: str,
    after: int = 0,
    *,
    poll: float = POLL,
    stop: Callable[[], bool] = lambda: False,
) -> Iterator[Event]:
    """Yield the run's rows from seq `after` on as they commit, until the run ends (every row
    up to its end yielded) or `stop()` says so."""
    while True:
        fresh, status = since(store, run_id, after)
        yield from fresh
        if fresh:
            after = fresh[-1].seq
        if status in TERMINAL and not fresh:
            return
        if stop():
            return
        time.sleep(poll)
