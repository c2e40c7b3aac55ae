"""Live pages: Server-Sent Events from the journal side channel (`journal.follow.since`).

`GET /runs/RUN/events?after=SEQ` streams each committed row after SEQ as an `event: row` with
its cells already rendered (escaped HTML, the same as the timeline's), and the run's status
as `event: status` when it changes. A browser's EventSource reconnects with Last-Event-ID (the
last seq it got), so nothing is missed or repeated across a reconnect."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from ..book import Daybook
from ..errors import DaybookError
from ..journal.follow import POLL, since
from ..records import TERMINAL
from .html import esc, join, tag
from .pages import event_cells

HEARTBEAT = 15.0  # seconds between comment lines that keep proxies from closing the stream


def stream(book: Daybook) -> Callable[[Request], Any]:
    async def endpoint(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        after = seq_of(request.headers.get("last-event-id") or request.query_params.get("after") or "0")
        if after is None:
            return JSONResponse({"error": "after is a journal seq (a whole number)"}, status_code=400)
        try:
            first = await run_in_threadpool(since, book.store, run_id, after)
            every = await run_in_threadpool(book.store.load, run_id)
        except DaybookError as exc:
            return JSONResponse({"error": str(exc)}, status_code=404)
        return StreamingResponse(
            _events(book, request, run_id, after, first, every[0].at if every else 0.0),
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
    book: Daybook, request: Request, run_id: str, after: int, first: tuple[list[Any], str], start: float
) -> AsyncIterator[str]:
    fresh, status = first
    shown_status = ""
    quiet = 0.0
    while True:
        for ev in fresh:
            cells = join(tag("td", c) for c in event_cells(ev, start))
            body = json.dumps({"seq": ev.seq, "kind": ev.kind, "status": ev.status, "html": str(cells)})
            yield f"id: {ev.seq}\nevent: row\ndata: {body}\n\n"
            after = ev.seq
        if status != shown_status:
            shown_status = status
            yield f"event: status\ndata: {json.dumps({'status': status, 'html': str(esc(status))})}\n\n"
        if status in TERMINAL and not fresh:
            return
        quiet = 0.0 if fresh else quiet + POLL
        if quiet >= HEARTBEAT:
            quiet = 0.0
            yield ": still here\n\n"
        if await request.is_disconnected():
            return
        await asyncio.sleep(POLL)
        try:
            fresh, status = await run_in_threadpool(since, book.store, run_id, after)
        except DaybookError:
            return
