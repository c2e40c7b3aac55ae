"""Following a run's journal as it grows: the side channel `daybook journal RUN --follow` and
the web inspector's live updates read; and a run's durable streams (`ctx.stream`), by cursor.

It reads committed rows only (the store's own reads), ordered by seq, so a follower never sees
an effect as done before its outcome row has committed: what it shows is what a crash right
now would leave (H10). Polling by seq is the whole mechanism: no trigger, no second write path.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from ..errors import RunNotFound
from ..records import TERMINAL, Event
from ..store import ReadStore, Store
from ..store.chunks import Chunk
from .stream import read_all

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


def chunks_since(
    store: ReadStore | Store, run_id: str, after: int, stream: str | None = None
) -> tuple[list[Chunk], str]:
    """The run's committed chunks after cursor `after` (one stream's, or all), and its status
    as it was before they were read: chunks commit before the row that ends a run, so once that
    status is final, these are the last."""
    info = store.get_run(run_id)
    if info is None:
        raise RunNotFound(run_id, store.url)
    return read_all(store, run_id, stream, after, False), info.status


def follow_chunks(
    store: ReadStore | Store,
    run_id: str,
    stream: str | None = None,
    after: int = 0,
    *,
    poll: float = POLL,
    stop: Callable[[], bool] = lambda: False,
) -> Iterator[Chunk]:
    """Yield the run's chunks after cursor `after` (of `stream`, or every stream) as they
    commit, in cursor order, each once, until the run ends (every chunk yielded) or `stop()`
    says so. A reader that keeps the last chunk's `cursor` and starts again from it sees each
    chunk once across its own restarts."""
    while True:
        fresh, status = chunks_since(store, run_id, after, stream)
        yield from fresh
        if fresh:
            after = fresh[-1].cursor
        if status in TERMINAL and not fresh:
            return
        if stop():
            return
        time.sleep(poll)
