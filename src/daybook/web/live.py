"""Live pages: Server-Sent Events from the journal side channel (`journal.follow.since`).

`GET /runs/RUN/events?after=SEQ` streams each committed row after SEQ as an `event: row` with
its cells already rendered (escaped HTML, the same as the timeline's), and the run's status
as `event: status` when it changes. A browser's EventSource reconnects with Last-Event-ID (the
last seq it got), so nothing is missed or repeated across a reconnect.

One reader per run (`Readers`) polls the store for the rows after the last seq it read, and hands
each batch to every viewer of that run: N viewers cost one small query per poll, not N reloads
of the journal. A viewer joins the reader before its own first read (the rows after its SEQ), so
a row is either in that read or in a batch the reader hands it later (or both: a viewer skips
what it has already sent); a viewer therefore gets every row once, in seq order.

`GET /runs/RUN/streams/NAME?after=CURSOR` streams the chunks of the run's durable stream NAME
(`ctx.stream`; `*`: every stream) after CURSOR as `event: chunk` (id: the chunk's cursor, so a
reconnect with Last-Event-ID resumes after the last one received: each chunk once), then
`event: end` once the run has ended and every chunk was sent. As for the journal, one reader per
(run, stream) polls by cursor and hands each batch to every viewer of that stream."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import Any, Generic, TypeVar

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from ..book import Daybook
from ..errors import DaybookError, RunNotFound
from ..journal.follow import POLL, chunks_since, since
from ..journal.stream import check_name
from ..records import TERMINAL, Event
from ..store import Store
from ..store.chunks import Chunk
from .html import esc, join, tag
from .pages import event_cells

log = logging.getLogger("daybook.web")
K = TypeVar("K")
T = TypeVar("T")
HEARTBEAT = 15.0  # seconds between comment lines that keep proxies from closing the stream

# What a reader hands its viewers: new items (rows or chunks) and the run's status now; None
# when it stopped reading.
Batch = tuple[list[T], str] | None


class _Reader(Generic[T]):
    """One shared reader: its viewers' queues, and how far it has read."""

    def __init__(self) -> None:
        self.viewers: set[asyncio.Queue[Batch[T]]] = set()
        self.last: int | None = None  # the position read up to; None until a viewer's first read
        self.status = ""
        self.task: asyncio.Task[None] | None = None


class Shared(Generic[K, T]):
    """Shared readers, one per key (a run's journal; a run's stream) while it has viewers, on
    the server's event loop: each polls `read(key, after)` (the items after a position, and the
    run's status) and hands each batch to every viewer of its key."""

    def __init__(
        self, read: Callable[[K, int], tuple[list[T], str]], position: Callable[[T], int], poll: float = POLL
    ) -> None:
        self.read = read
        self.position = position
        self.poll = poll
        self.runs: dict[K, _Reader[T]] = {}
        self.started = 0  # readers started so far (one per key while it has viewers)

    def join(self, key: K) -> asyncio.Queue[Batch[T]]:
        reader = self.runs.get(key)
        if reader is None:
            reader = self.runs[key] = _Reader()
        queue: asyncio.Queue[Batch[T]] = asyncio.Queue()
        reader.viewers.add(queue)
        return queue

    def begin(self, key: K, queue: asyncio.Queue[Batch[T]], read_up_to: int) -> None:
        """A viewer that joined has read the items up to position `read_up_to`: a reader not
        yet reading starts after the lowest such position (an item after it reaches every viewer)."""
        reader = self.runs.get(key)
        if reader is None or queue not in reader.viewers:
            return
        if reader.task is None:
            reader.last = read_up_to if reader.last is None else min(reader.last, read_up_to)
            reader.task = asyncio.ensure_future(self._read(key, reader))
            self.started += 1

    def leave(self, key: K, queue: asyncio.Queue[Batch[T]]) -> None:
        reader = self.runs.get(key)
        if reader is None:
            return
        reader.viewers.discard(queue)
        if not reader.viewers:  # the last viewer left: stop reading
            del self.runs[key]
            if reader.task is not None:
                reader.task.cancel()

    async def _read(self, key: K, reader: _Reader[T]) -> None:
        try:
            while True:
                await asyncio.sleep(self.poll)
                fresh, status = await run_in_threadpool(self.read, key, reader.last or 0)
                if fresh:
                    reader.last = self.position(fresh[-1])
                if fresh or status != reader.status:
                    reader.status = status
                    for queue in reader.viewers:
                        queue.put_nowait((fresh, status))
        except Exception as exc:  # the store failed, the run is gone: its viewers' streams end
            if not isinstance(exc, DaybookError):
                log.warning("live reader of %r stopped: %r", key, exc)
            for queue in reader.viewers:
                queue.put_nowait(None)
            if self.runs.get(key) is reader:
                del self.runs[key]


class Readers(Shared[str, Event]):
    """The live runs' journal readers, one per run with viewers: N viewers of a run cost one
    query per poll for the rows after the last seq read, not N reloads of the journal (R13)."""

    def __init__(self, store: Store, poll: float = POLL) -> None:
        super().__init__(lambda run_id, after: since(store, run_id, after), lambda ev: ev.seq, poll)
        self.store = store


class ChunkReaders(Shared[tuple[str, str | None], Chunk]):
    """The live streams' chunk readers, one per (run, stream or None: every stream) with
    viewers, reading the chunks after the last cursor read."""

    def __init__(self, store: Store, poll: float = POLL) -> None:
        super().__init__(
            lambda key, after: chunks_since(store, key[0], after, key[1]), lambda c: c.cursor, poll
        )
        self.store = store


def stream(book: Daybook, readers: Readers) -> Callable[[Request], Any]:
    async def endpoint(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        after = seq_of(request.headers.get("last-event-id") or request.query_params.get("after") or "0")
        if after is None:
            return JSONResponse({"error": "after is a journal seq (a whole number)"}, status_code=400)
        try:
            # The first row's time, from which the timeline counts (one row read, not the journal).
            first = await run_in_threadpool(book.store.load, run_id, 0, 1)
            if not first and await run_in_threadpool(book.store.get_run, run_id) is None:
                raise RunNotFound(run_id, book.store.url)
        except DaybookError as exc:
            return JSONResponse({"error": str(exc)}, status_code=404)
        return StreamingResponse(
            _events(readers, request, run_id, after, first[0].at if first else 0.0),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    return endpoint


def seq_of(text: str) -> int | None:
    """A journal seq from a query or header: ASCII digits only (`"²".isdigit()` is true, and
    `int` refuses it), at most 18 of them (a seq is a 64-bit integer); None if it is not one."""
    if text.isascii() and text.isdigit() and len(text) <= 18:
        return int(text)
    return None


def _events(readers: Readers, request: Request, run_id: str, after: int, start: float) -> AsyncIterator[str]:
    """A run's journal as SSE: each row as `event: row`, the run's status as `event: status`
    when it changes."""
    shown_status = ""

    def say(fresh: list[Event], status: str, after: int) -> Iterator[str]:
        nonlocal shown_status
        for ev in fresh:
            yield _row(ev, start)
        if status != shown_status:
            shown_status = status
            yield f"event: status\ndata: {json.dumps({'status': status, 'html': str(esc(status))})}\n\n"

    # Every row up to the run's end is sent when its status is final (its end commits with its
    # last row).
    return _follow(request, readers, run_id, after, say)


async def _follow(
    request: Request,
    readers: Shared[K, T],
    key: K,
    after: int,
    say: Callable[[list[T], str, int], Iterable[str]],
) -> AsyncIterator[str]:
    """What one viewer of `key` is sent, for `_events` and `_chunks`: its own first read (the
    items after position `after`, and the run's status), then each batch the key's shared reader
    hands it, each as `say(the items not sent yet, the status, the position sent up to)` says;
    until the run's status is final, the reader stops or the client leaves. While nothing comes,
    a comment line every HEARTBEAT seconds keeps the connection alive."""
    queue = readers.join(key)  # before the first read: nothing committed after it is missed
    try:
        try:
            batch: Batch[T] = await run_in_threadpool(readers.read, key, after)
        except DaybookError:
            batch = None
        if batch is not None:
            readers.begin(key, queue, readers.position(batch[0][-1]) if batch[0] else after)
        quiet = 0.0
        while batch is not None:
            fresh, status = batch
            # Items at or before `after` were already sent (read by this viewer, then by the reader).
            fresh = [item for item in fresh if readers.position(item) > after]
            if fresh:
                after = readers.position(fresh[-1])
            for message in say(fresh, status, after):
                yield message
            if status in TERMINAL:
                return
            batch = None  # stays None if the client left
            while not await request.is_disconnected():
                try:
                    batch = await asyncio.wait_for(queue.get(), POLL)  # None: the reader stopped
                    quiet = 0.0
                    break
                except TimeoutError:  # nothing new in a poll's time: keep the connection alive
                    quiet += POLL
                    if quiet >= HEARTBEAT:
                        quiet = 0.0
                        yield ": still here\n\n"
    finally:
        readers.leave(key, queue)


def _row(ev: Event, start: float) -> str:
    cells = join(tag("td", c) for c in event_cells(ev, start))
    body = json.dumps({"seq": ev.seq, "kind": ev.kind, "status": ev.status, "html": str(cells)})
    return f"id: {ev.seq}\nevent: row\ndata: {body}\n\n"


def chunk_stream(book: Daybook, readers: ChunkReaders) -> Callable[[Request], Any]:
    async def endpoint(request: Request) -> Response:
        run_id, name = request.path_params["run_id"], request.path_params["stream"]
        after = seq_of(request.headers.get("last-event-id") or request.query_params.get("after") or "0")
        if after is None:
            return JSONResponse({"error": "after is a stream cursor (a whole number)"}, status_code=400)
        try:
            stream = None if name == "*" else check_name(name)
        except DaybookError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        try:
            if await run_in_threadpool(book.store.get_run, run_id) is None:
                raise RunNotFound(run_id, book.store.url)
        except DaybookError as exc:  # no such run, or its header needs a codec this handle lacks
            return JSONResponse({"error": str(exc)}, status_code=404)
        return StreamingResponse(
            _chunks(readers, request, (run_id, stream), after),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    return endpoint


def _chunks(
    readers: ChunkReaders, request: Request, key: tuple[str, str | None], after: int
) -> AsyncIterator[str]:
    """A stream's chunks as SSE: each as `event: chunk`. The status in a batch was read before
    its chunks, and a run's chunks commit before the row that ends it: once that status is
    final, the chunks sent are the last, and `event: end` follows."""

    def say(fresh: list[Chunk], status: str, after: int) -> Iterator[str]:
        for chunk in fresh:
            body = json.dumps({k: v for k, v in chunk.as_dict().items() if k != "divergent"})
            yield f"id: {chunk.cursor}\nevent: chunk\ndata: {body}\n\n"
        if status in TERMINAL:
            yield f"event: end\ndata: {json.dumps({'status': status, 'cursor': after})}\n\n"

    return _follow(request, readers, key, after, say)
