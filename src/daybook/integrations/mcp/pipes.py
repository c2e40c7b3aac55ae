"""The proxy's own stdin and stdout as asyncio pipes, for the MCP SDK's stdio server.

The SDK reads stdin and writes stdout through `anyio.wrap_file`: every line read, every write
and every flush is a hop to a worker thread and back, three per call answered, each a thread
wake-up that a busy machine delays. A proxy sits in the middle of every call, so it reads and
writes its pipes on the event loop instead (non-blocking, with the writer's flow control). What
goes over them is unchanged: one JSON-RPC message per line, UTF-8 (an undecodable byte read as
U+FFFD, as the SDK does). Where stdin or stdout is not a pipe, a socket or a terminal (a regular
file), the SDK's own transport is used.

The pipes are duplicates of fds 0 and 1, so closing them leaves the process's own open; the
non-blocking mode they need is put back on exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

LIMIT = 64 * 1024 * 1024  # the longest line (one JSON-RPC message) read, in bytes


class Lines:
    """Text lines of a stream, as the SDK's stdin reader iterates them."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader

    def __aiter__(self) -> Lines:
        return self

    async def __anext__(self) -> str:
        line = await self.reader.readline()
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")


class Out:
    """Text written to a stream, as the SDK's stdout writer writes and flushes it."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer

    async def write(self, text: str) -> None:
        self.writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self.writer.drain()  # waits only when the reader of our stdout falls behind


@asynccontextmanager
async def stdio_pipes() -> AsyncIterator[tuple[Lines, Out] | None]:
    """(stdin's lines, stdout) on the event loop; None where they are not pipes (use the SDK's)."""
    loop = asyncio.get_running_loop()
    fds: list[int] = []
    transports: list[Any] = []
    try:
        try:
            fds = [os.dup(sys.stdin.fileno()), os.dup(sys.stdout.fileno())]
            reader = asyncio.StreamReader(limit=LIMIT)
            read_pipe = os.fdopen(fds[0], "rb", buffering=0)
            t_in, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), read_pipe)
            transports.append(t_in)
            write_pipe = os.fdopen(fds[1], "wb", buffering=0)
            t_out, p_out = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, write_pipe)
            transports.append(t_out)
            writer = asyncio.StreamWriter(t_out, p_out, None, loop)
        except (OSError, ValueError, AttributeError):  # not pipes (a regular file), or no fds
            for t in transports:
                t.close()
            yield None
            return
        yield Lines(reader), Out(writer)
    finally:
        for t in transports:
            t.close()
        for fd in (0, 1):
            with contextlib.suppress(OSError):
                os.set_blocking(fd, True)
