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
`event: end` once the run has ended and every chunk was sent. Each viewer polls by cursor."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from ..book import Daybook
from ..errors import DaybookError, RunNotFound
from ..journal.follow import POLL, chunks_since, since
from ..journal.stream import check_name
from ..records import TERMINAL, Event
from ..store import Store
from .html import esc, join, tag
from .pages import event_cells

log = logging.getLogger("daybook.web")
HEARTBEAT = 15.0  # seconds between comment lines that keep proxies from closing the stream

# What a reader hands its viewers: new rows and the status now; None when it stopped reading.
Batch = tuple[list[Event], str] | None


class _Reader:
    """One run's shared reader: its viewers' queues, and how far it has read."""

    def __init__(self) -> None:
        self.viewers: set[asyncio.Queue[Batch]] = set()
        self.last: int | None = None  # the seq read up to; None until a viewer's first read
        self.status = ""
        self.task: asyncio.Task[None] | None = None


class Readers:
    """The live runs' readers, one per run with viewers (on the server's event loop)."""

    def __init__(self, store: Store, poll: float = POLL) -> None:
        self.store = store
        self.poll = poll
        self.runs: dict[str, _Reader] = {}
        self.started = 0  # readers started so far (one per run while it has viewers)

    def join(self, run_id: str) -> asyncio.Queue[Batch]:
        reader = self.runs.get(run_id)
        if reader is None:
            reader = self.runs[run_id] = _Reader()
        queue: asyncio.Queue[Batch] = asyncio.Queue()
        reader.viewers.add(queue)
        return queue

    def begin(self, run_id: str, queue: asyncio.Queue[Batch], read_up_to: int) -> None:
        """A viewer that joined has read the rows up to seq `read_up_to`: a reader not yet
        reading starts after the lowest such seq (a row after it reaches every viewer)."""
        reader = self.runs.get(run_id)
        if reader is None or queue not in reader.viewers:
            return
        if reader.task is None:
            reader.last = read_up_to if reader.last is None else min(reader.last, read_up_to)
            reader.task = asyncio.ensure_future(self._read(run_id, reader))
            self.started += 1

    def leave(self, run_id: str, queue: asyncio.Queue[Batch]) -> None:
        reader = self.runs.get(run_id)
        if reader is None:
            return
        reader.viewers.discard(queue)
        if not reader.viewers:  # the last viewer left: stop reading
            del self.runs[run_id]
            if reader.task is not None:
                reader.task.cancel()

    async def _read(self, run_id: str, reader: _Reader) -> None:
        try:
            while True:
                await asyncio.sleep(self.poll)
                fresh, status = await run_in_threadpool(since, self.store, run_id, reader.last or 0)
                if fresh:
                    reader.last = fresh[-1].seq
                if fresh or status != reader.status:
                    reader.status = status
                    for queue in reader.viewers:
                        queue.put_nowait((fresh, status))
        except Exception as exc:  # the store failed, the run is gone: its viewers' streams end
            if not isinstance(exc, DaybookError):
                log.warning("live reader of run %r stopped: %r", run_id, exc)
            for queue in reader.viewers:
                queue.put_nowait(None)
            if self.runs.get(run_id) is reader:
                del self.runs[run_id]


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
            _events(book, readers, request, run_id, after, first[0].at if first else 0.0),
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


async def _events(
    book: Daybook, readers: Readers, request: Request, run_id: str, after: int, start: float
) -> AsyncIterator[str]:
    queue = readers.join(run_id)  # before the first read: nothing committed after it is missed
    try:
        batch = await _first(book, run_id, after)
        if batch is not None:
            readers.begin(run_id, queue, batch[0][-1].seq if batch[0] else after)
        shown_status = ""
        quiet = 0.0
        while batch is not None:
            fresh, status = batch
            for ev in fresh:
                if ev.seq > after:  # else already sent (read by this viewer, then by the reader)
                    yield _row(ev, start)
                    after = ev.seq
            if status != shown_status:
                shown_status = status
                yield f"event: status\ndata: {json.dumps({'status': status, 'html': str(esc(status))})}\n\n"
            if status in TERMINAL:
                return  # every row up to the run's end is sent (its end commits with its last row)
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
        readers.leave(run_id, queue)


async def _first(book: Daybook, run_id: str, after: int) -> Batch:
    """The viewer's own first read: the rows after its seq, and the status; None if it failed."""
    try:
        return await run_in_threadpool(since, book.store, run_id, after)
    except DaybookError:
        return None


def _row(ev: Event, start: float) -> str:
    cells = join(tag("td", c) for c in event_cells(ev, start))
    body = json.dumps({"seq": ev.seq, "kind": ev.kind, "status": ev.status, "html": str(cells)})
    return f"id: {ev.seq}\nevent: row\ndata: {body}\n\n"


def chunk_stream(book: Daybook) -> Callable[[Request], Any]:
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
            _chunks(book, request, run_id, stream, after),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    return endpoint


async def _chunks(
    book: Daybook, request: Request, run_id: str, stream: str | None, after: int
) -> AsyncIterator[str]:
    quiet = 0.0
    while not await request.is_disconnected():
        try:
            fresh, status = await run_in_threadpool(chunks_since, book.store, run_id, after, stream)
        except DaybookError:
            return
        for chunk in fresh:
            body = json.dumps({k: v for k, v in chunk.as_dict().items() if k != "divergent"})
            yield f"id: {chunk.cursor}\nevent: chunk\ndata: {body}\n\n"
            after = chunk.cursor
        if status in TERMINAL and not fresh:
            yield f"event: end\ndata: {json.dumps({'status': status, 'cursor': after})}\n\n"
            return
        await asyncio.sleep(POLL)
        quiet = 0.0 if fresh else quiet + POLL
        if quiet >= HEARTBEAT:
            quiet = 0.0
            yield ": still here\n\n"
