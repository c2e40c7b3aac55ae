"""A named stream reader: its durable position in a run's stream (`book.follow(..., reader=)`).

Owns the rule "a reader that restarts under its name goes on after the last chunk it
acknowledged". The position lives in the store as a coordination entity (named
`daybook.reader:<reader>/<stream or *>/<run id>`, hidden from `book.leases()`): the reader claims
the entity's lease while it follows (one process per reader name at a time), and each
acknowledgement appends `read {"upto": CURSOR}` to the entity's append-only log. Only positions
are stored, never a chunk's value. No table of its own: the store's compare-and-set claim and
its append-only log do the work on both backends, as for the span-export cursor
(`daybook.telemetry.cursor`).

The contract is at least once, with a window of one chunk: a chunk is acknowledged when the
consumer asks for the next one (or calls `ack()`), so a reader killed while it holds a chunk
(handed out, not acknowledged) gets that chunk again when it restarts, and no other; none is
lost, because the position never passes a chunk the consumer did not take. Only a consumer
whose handling of a chunk is idempotent by the chunk's `cursor` sees each chunk's effect once:
its handling and the stored position are two commits, and a crash can fall between them
(`ack_every=N` widens the window to N chunks for one commit per N).
"""

from __future__ import annotations

import collections
import hashlib
import os
import time
import weakref
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any

from ..errors import ConfigError, ReaderBusy, RunNotFound
from ..journal.follow import POLL, chunks_since
from ..journal.stream import check_name, read_all
from ..records import TERMINAL, shown, whole
from ..runtime.lease import is_dead_here, new_owner
from ..store import Store
from ..store.chunks import Chunk
from .entity import READER_PREFIX, Entity

# Seconds a reader's claim holds against another process of the same name if this one dies on
# another host (one on this machine is taken over at once); renewed while it follows.
TTL = 30.0
_ACTION = "read"

# This process's owner id (one per pid: a forked child gets its own), and the readers it has
# open by store and entity name: a second follower under a name this process already follows
# is refused (the claim alone would let it through: both hold the process's owner id).
_owner: tuple[int, str] | None = None
_OPEN: weakref.WeakValueDictionary[str, StreamReader] = weakref.WeakValueDictionary()


def check_reader(name: object) -> str:
    """A reader name: the rule of a stream's name (`journal.stream.check_name`)."""
    return check_name(name, "reader", "'billing-ui'")


def entity_name(run_id: str, stream: str | None, reader: str) -> str:
    """The coordination entity holding `reader`'s position in the run's stream (a digest for a
    very long run id: entity names hold 200 characters)."""
    key = f"{reader}/{stream or '*'}/{run_id}"
    if len(READER_PREFIX + key) <= 200:
        return READER_PREFIX + key
    return READER_PREFIX + "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def _process_owner() -> str:
    global _owner
    if _owner is None or _owner[0] != os.getpid():
        _owner = (os.getpid(), new_owner())
    return _owner[1]


class StreamReader(Iterator[Chunk]):
    """A run's stream followed under a durable reader name (`book.follow(run_id, stream=,
    reader=NAME)`): iterating yields the chunks after the last one this name acknowledged, as
    they commit, until the run ends or the timeout passes.

    A chunk is acknowledged (its cursor stored as the reader's `position`) when the consumer
    asks for the next one, or calls `ack()`. A reader killed while it holds a chunk gets that
    chunk again under the same name, and none other; `close()` (or leaving a `with` block) gives
    the name up without acknowledging the chunk in hand. `ack_every=N` stores the position once
    per N chunks taken (and whenever the reader has caught up with the stream) instead of once
    per chunk: one commit per N, and a killed reader gets again up to N chunks.
    """

    def __init__(
        self,
        store: Store,
        run_id: str,
        stream: str | None,
        reader: str,
        *,
        stop: Callable[[], bool] = lambda: False,
        poll: float = POLL,
        ack_every: int = 1,
    ) -> None:
        self.reader = check_reader(reader)
        self.ack_every = whole(ack_every, "ack_every (chunks taken per stored position)", low=1, high=10_000)
        if store.read_only:
            raise ConfigError(
                f"reader {reader!r}: a reader's position is written to the store, which this handle "
                "opened read-only; open it writable (Daybook(url)), or follow with after=CURSOR "
                "and keep the cursor yourself"
            )
        info = store.get_run(run_id)
        if info is None:
            raise RunNotFound(run_id, store.url)
        self.run_id = info.run_id
        self.stream = stream
        self._store = store
        self._stop = stop
        self._poll = poll
        self._entity = Entity(store, entity_name(self.run_id, stream, self.reader))
        self._owner = _process_owner()
        self._queue: collections.deque[Chunk] = collections.deque()
        self._held: Chunk | None = None
        self._taken = 0  # chunks the consumer let go of since the position was last stored
        self._closed = False
        if info.status in TERMINAL:
            _check_stream(store, self.run_id, stream, info.status)
        self._key = f"{store.url}\n{self._entity.name}"
        if self._key in _OPEN:
            raise ReaderBusy(
                f"reader {reader!r} of {self._what()} is already open in this process; close that "
                "follower first (`with book.follow(...) as chunks:` closes it), or use another name"
            )
        self._deadline = self._claim()
        self.position = _upto(self._entity.view().log)
        self._read_upto = self.position
        _OPEN[self._key] = self

    def __iter__(self) -> StreamReader:
        return self

    def __next__(self) -> Chunk:
        if self._closed:
            raise StopIteration
        held = self._held
        if held is not None and held.cursor > self.position:
            self._taken += 1  # the consumer asked for the next chunk: it has taken this one
            # Stored every `ack_every` chunks, and whenever the reader has caught up (before it
            # waits for more), so a window wider than one spans a burst, never an idle wait.
            if self._taken >= self.ack_every or not self._queue:
                self.ack()
        try:
            chunk = self._next_chunk()
        except BaseException:
            self.close()
            raise
        self._held = chunk
        return chunk

    def ack(self, chunk: Chunk | None = None) -> None:
        """Store the position after `chunk` (default: the chunk handed out last), so this
        reader name never gets it again. At most the chunk handed out last: a chunk not handed
        out yet cannot be acknowledged."""
        if chunk is None:
            chunk = self._held
            if chunk is None:
                return
        elif not isinstance(chunk, Chunk) or self._held is None or chunk.cursor > self._held.cursor:
            raise ConfigError(
                f"reader {self.reader!r}: ack() takes a chunk this reader handed out, got "
                f"{shown(chunk)}; call ack() with no argument for the chunk in hand"
            )
        if chunk.cursor <= self.position:
            return
        if self._closed:
            raise ReaderBusy(
                f"reader {self.reader!r} of {self._what()} is closed; follow again under its name "
                "to go on (it starts after the last chunk acknowledged)"
            )
        self._renew()
        if not self._entity.record(self._owner, _ACTION, {"upto": chunk.cursor}):
            raise self._lost()
        self.position = chunk.cursor
        if chunk is self._held:
            self._taken = 0

    def close(self) -> None:
        """Give the reader name up (the chunk in hand is not acknowledged: the name gets it
        again). Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        if _OPEN.get(self._key) is self:
            del _OPEN[self._key]
        self._entity.release(self._owner)

    def __enter__(self) -> StreamReader:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _next_chunk(self) -> Chunk:
        while not self._queue:
            self._renew()
            fresh, status = chunks_since(self._store, self.run_id, self._read_upto, self.stream)
            if fresh:
                self._queue.extend(fresh)
                self._read_upto = fresh[-1].cursor
                break
            if status in TERMINAL or self._stop():
                self.close()
                raise StopIteration
            time.sleep(self._poll)
        return self._queue.popleft()

    def _what(self) -> str:
        where = "every stream" if self.stream is None else f"stream {self.stream!r}"
        return f"{where} of run {self.run_id!r}"

    def _claim(self) -> float:
        """Take the name's lease (a dead holder's on this machine at once); the new deadline."""
        now = time.time()
        if self._entity.claim(self._owner, TTL):
            return now + TTL
        view = self._entity.view()
        holder = view.holder
        if holder and view.state == "held" and is_dead_here(holder):
            # Killed while it followed: its position stands at its last acknowledgement.
            self._store.entity_release(self._entity.name, holder, time.time())
            if self._entity.claim(self._owner, TTL):
                return now + TTL
            view = self._entity.view()
        left = max(0.0, (view.deadline or now) - now)
        raise ReaderBusy(
            f"reader {self.reader!r} of {self._what()} is in use by {_who(view.holder)} (its claim "
            f"lapses in {left:.0f}s unless it goes on): one process per reader name. Wait for it "
            "to stop, or follow under another name"
        )

    def _renew(self) -> None:
        """Keep the claim: renewed once half its time is gone. If it lapsed, the name is taken
        back only if no other process advanced the position meanwhile."""
        now = time.time()
        if now < self._deadline - TTL / 2:
            return
        lapsed = now >= self._deadline
        self._deadline = self._claim()
        if lapsed and _upto(self._entity.view().log) != self.position:
            raise self._lost()

    def _lost(self) -> ReaderBusy:
        self.close()
        return ReaderBusy(
            f"reader {self.reader!r} of {self._what()}: another process took the name over while "
            f"this one held a chunk past its claim ({TTL:.0f}s) and moved its position; this "
            "follower stopped (the other one goes on from the position it stored)"
        )


def _check_stream(store: Store, run_id: str, stream: str | None, status: str) -> None:
    """A finished run that never wrote the stream: a mistyped name, said at once rather than
    followed to an empty end."""
    if store.chunks(run_id, 0, stream, 1, None, False):
        return
    names = sorted({c.stream for c in read_all(store, run_id, None, 0, False)})
    wrote = f"it wrote {', '.join(repr(n) for n in names)}" if names else "it wrote no stream"
    what = "any stream" if stream is None else f"stream {stream!r}"
    raise ConfigError(
        f"run {run_id!r} is {status} and never wrote {what} ({wrote}): there is nothing for a "
        "reader to follow; check the stream name"
    )


def _who(holder: str | None) -> str:
    parts = (holder or "").split(":")
    if len(parts) == 6:
        return f"process {parts[1]} on {parts[0]}"
    return "another process"


def _upto(log: list[Any]) -> int:
    best = 0
    for entry in log:
        if entry.action == _ACTION and isinstance(entry.data, dict):
            upto = entry.data.get("upto")
            if isinstance(upto, int) and not isinstance(upto, bool):
                best = max(best, upto)
    return best
