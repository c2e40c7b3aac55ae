"""Durable streams: `ctx.stream(name)` writes chunks a reader gets exactly once (docs/streams.md).

A chunk belongs to the act whose code writes it: a decision's function (its id), a tool's call
(its key), or the workflow body between two steps (`body@<next step>`); within that act's
segment it is numbered from 0 in the order written. So a step that runs again after a crash
(its outcome never recorded) writes its chunks under the same keys, and a chunk already
committed under a key is not written twice: the re-sent copy is compared with it and dropped if
equal, or kept beside it as `divergent` (never handed to a reader) if not. A segment is sealed
when its step's first row after it commits (a decision's value, an effect's outcome, the next
step of the body): replay never runs that code again, so nothing is written under it again.

Chunks are buffered per execution and committed in groups (one transaction each), when
`BATCH` are waiting, `DELAY` seconds after the first of a group (a timer thread), on `flush()`,
and always before the journal's next row (`Execution.side`), so a step's outcome never commits
ahead of the chunks it streamed. A crash loses at most the chunks not yet committed, which the
step's re-run sends again under the same keys.
"""

from __future__ import annotations

import re
import threading
import time
import weakref
from collections.abc import Iterator
from typing import Any, Protocol

from ..errors import ConfigError, LeaseLost, NotSerializable, StoreUnavailable
from ..records import JSON, check_json, dumps, shown, whole
from ..store import ReadStore, Store
from ..store.chunks import Chunk
from ..store.secrets import SEALED
from . import current
from .execution import Execution
from .facet import Facet
from .llm import Completion, LLMClient
from .stop import Stop

BATCH = 64  # chunks waiting that are committed at once
DELAY = 0.1  # seconds the first chunk of a group waits, at most, before it is committed
MAX_CHUNK = 1024 * 1024  # characters of JSON in one chunk
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}")

_BUFFERS: weakref.WeakKeyDictionary[Execution, _Buffer] = weakref.WeakKeyDictionary()


def check_name(name: object, what: str = "stream", example: str = "'answer' or 'llm.tokens'") -> str:
    """A stream's (or a stream reader's) name: 1 to 100 letters, digits, `_ . : -`, starting with
    a letter or digit."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ConfigError(
            f"{what} name {shown(name)} is not valid: use 1 to 100 letters, digits, '_', '.', ':' "
            f"or '-', starting with a letter or digit (e.g. {example})"
        )
    return name


def checked(stream: str | None, after: object) -> tuple[str | None, int]:
    """A reader's stream name (None: every stream) and cursor, refused with ConfigError if bad."""
    return (None if stream is None else check_name(stream)), whole(
        after, "after (a stream cursor: a chunk's `cursor`, or 0 for the start)", low=0, high=2**62
    )


def read_all(
    store: ReadStore | Store, run_id: str, stream: str | None, after: int, divergent: bool
) -> list[Chunk]:
    """Every committed chunk of the run after `after` (paged: one query a thousand)."""
    found: list[Chunk] = []
    while True:
        page = store.chunks(run_id, after, stream, 1000, None, divergent)
        found += page
        if len(page) < 1000:
            return found
        after = page[-1].cursor


class _Buffer:
    """One execution's chunks not yet committed, and what it knows of the acts it writes."""

    def __init__(self, store: Store, exe: Execution) -> None:
        self._store = store  # the raw handle: the timer thread never touches the cursor
        self._run_id = exe.run_id
        self._heartbeat = exe.heartbeat
        self._lock = threading.Lock()
        self._pending: list[Chunk] = []
        self._counts: dict[tuple[str, str], int] = {}
        # The committed chunks of each act this execution writes (read once per act).
        self._committed: dict[tuple[str, str], dict[int, tuple[JSON, bool]]] = {}  # n -> (data, diverged)
        self._timer: threading.Timer | None = None
        self._failed: BaseException | None = None

    def add(self, stream: str, act: str, data: dict[str, JSON]) -> None:
        self._raise_failed()
        with self._lock:
            n = self._counts.get((stream, act), 0)
            self._counts[(stream, act)] = n + 1
            self._pending.append(Chunk(self._run_id, 0, stream, act, n, data, time.time()))
            full = len(self._pending) >= BATCH
            if not full and self._timer is None:
                self._timer = threading.Timer(DELAY, self._tick)
                self._timer.daemon = True
                self._timer.start()
        if full:
            self.flush()

    def flush(self) -> None:
        """Commit the waiting chunks now (the journal calls this before each of its rows)."""
        self._raise_failed()
        with self._lock:
            try:
                self._commit()
            except Exception as exc:
                raise _stopped(self._run_id, exc) from None

    def _tick(self) -> None:
        with self._lock:
            self._timer = None
            try:
                self._commit()
            except Exception as exc:  # handed to the workflow's thread at its next write
                self._failed = exc

    def _raise_failed(self) -> None:
        failed, self._failed = self._failed, None
        if failed is not None:
            raise _stopped(self._run_id, failed)

    def _commit(self) -> None:
        pending, self._pending = self._pending, []
        if not pending:
            return
        if self._heartbeat is not None and self._heartbeat.lost:
            raise LeaseLost(f"run {self._run_id!r}: lease lost; stream chunks not written")
        fresh = [c for c in (self._fresh(c) for c in pending) if c is not None]
        for c in self._store.write_chunks(self._run_id, fresh):
            seen = self._committed[(c.stream, c.act)]
            seen[c.n] = (seen[c.n][0], True) if c.divergent else (c.data, False)

    def _fresh(self, chunk: Chunk) -> Chunk | None:
        """`chunk` as it is to be written: as is if its key is free, as a divergent copy if a
        different value holds it (once), or None if the same value does (a re-run's re-send)."""
        seen = self._committed.get((chunk.stream, chunk.act))
        if seen is None:  # the act's first chunk this execution writes: what an earlier one did
            found = self._store.chunks(self._run_id, 0, chunk.stream, 2**62, chunk.act, divergent=True)
            seen = self._committed[(chunk.stream, chunk.act)] = {}
            for c in found:
                first, kept = seen.get(c.n, (None, False))
                seen[c.n] = (first, True) if c.divergent else (c.data, kept)
        if chunk.n not in seen:
            return chunk
        first, kept = seen[chunk.n]
        if first == chunk.data or kept:
            return None
        return Chunk(chunk.run_id, 0, chunk.stream, chunk.act, chunk.n, chunk.data, chunk.at, True)


def _stopped(run_id: str, exc: BaseException) -> Stop:
    if isinstance(exc, Stop):
        return exc
    if isinstance(exc, LeaseLost):
        return Stop(exc, False)
    return Stop(
        StoreUnavailable(
            f"run {run_id!r}: writing stream chunks failed: {type(exc).__name__}: {exc}. The run "
            "stopped; fix the store, then `daybook resume` it (the step writes them again)"
        ),
        False,
        release=True,
    )


class Stream:
    """A run's durable stream `name` (`ctx.stream(name)`): `write(value)` each chunk."""

    def __init__(self, exe: Execution, name: str) -> None:
        self._exe = exe
        self.name = check_name(name)

    def write(self, value: Any) -> None:
        """Write one chunk (any JSON value; a `daybook.Secret` in it is journaled as its
        digest). Committed within `DELAY` seconds, or with the step's outcome; a reader gets
        it once, even if this step runs again after a crash."""
        exe = self._exe
        act = current.act()
        if act is None:  # the body between two steps: sealed once the next step is journaled
            if exe.next_step <= exe.recorded_steps:
                return  # replayed: an earlier execution wrote these before that step's row
            act = f"body@{exe.next_step}"
        if exe.read_only:
            return  # a pure replay emits nothing
        stored, hidden = exe.cover().conceal(value)
        what = f"stream {self.name!r} chunk"
        check_json(stored, what)
        if len(dumps(stored, what)) > MAX_CHUNK:
            raise NotSerializable(
                f"{what} is over {MAX_CHUNK:,} characters of JSON; write it in smaller pieces, or "
                "keep large data elsewhere and write its reference"
            )
        _buffer(exe).add(self.name, act, {"value": stored, SEALED: True} if hidden else {"value": stored})

    def flush(self) -> None:
        """Commit the chunks written so far now (before a long wait, say)."""
        found = _BUFFERS.get(self._exe)
        if found is not None:
            found.flush()


def _buffer(exe: Execution) -> _Buffer:
    found = _BUFFERS.get(exe)
    if found is None:
        found = _BUFFERS[exe] = _Buffer(exe.store, exe)
        exe.side = found.flush
    return found


class Streams(Facet):
    """`ctx.stream`."""

    def stream(self, name: str) -> Stream:
        """The run's durable stream `name`: `ctx.stream("answer").write(text)` writes a chunk
        that `book.follow(run_id, stream="answer")`, `daybook journal RUN --follow --stream
        answer` and the web inspector's live stream deliver exactly once, in order, across
        crashes of the writer and of the reader (docs/streams.md)."""
        return Stream(self._exe, name)


class StreamingClient(Protocol):
    """A model client that can stream: `stream` yields the reply's text in pieces, and may end
    with the `Completion` (its usage); without one the pieces joined are the completion."""

    model: str

    def stream(self, prompt: str, **params: Any) -> Iterator[str | Completion]: ...


def streamed_call(exe: Execution, client: LLMClient, name: str, prompt: str, params: dict[str, Any]) -> Any:
    """A model call whose reply is written to stream `name` piece by piece as it comes; returns
    the completion (as `ctx.llm` records it)."""
    out = Stream(exe, name)
    pieces = getattr(client, "stream", None)
    if not callable(pieces):
        raise ConfigError(
            f"ctx.llm(stream={name!r}): the client {type(client).__name__} has no stream(prompt, "
            "**params) method; give one that yields the reply's text in pieces, or drop stream="
        )
    text: list[str] = []
    final: Completion | None = None
    for piece in pieces(prompt, **params):
        if isinstance(piece, Completion):
            final = piece
        elif isinstance(piece, str):
            out.write(piece)
            text.append(piece)
        else:
            raise ConfigError(
                f"{type(client).__name__}.stream yielded {shown(piece)}: it may yield text (str) "
                "and, last, a Completion"
            )
    done = final or Completion(text="".join(text), model=str(getattr(client, "model", "")))
    return done.as_dict()
