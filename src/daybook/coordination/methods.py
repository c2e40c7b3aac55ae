"""The `Daybook` methods that read a run's durable streams (`ctx.stream`): `chunks`, and
`follow`, by a cursor the caller keeps or by a named reader whose position the store keeps
(`reader.StreamReader`).

A mixin of `Daybook`, so the facade stays one flat object while stream reading lives with its
noun.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, overload

from ..errors import ConfigError
from ..journal import stream as streams
from ..journal.follow import follow_chunks
from ..records import MAX_SECONDS, RunInfo, bounded
from ..store.chunks import Chunk
from .reader import StreamReader

if TYPE_CHECKING:
    from ..store import Store


class StreamMethods:
    """`chunks` and `follow`."""

    if TYPE_CHECKING:  # given by Daybook

        @property
        def store(self) -> Store: ...

        def get_run(self, run_id: str) -> RunInfo: ...

    def chunks(
        self, run_id: str, *, stream: str | None = None, after: int = 0, divergent: bool = False
    ) -> list[Chunk]:
        """The run's committed stream chunks (`ctx.stream`) after cursor `after`, in order: one stream's, or
        every stream's. `divergent=True` also lists the re-sends a re-run wrote that differed from the chunk
        already committed under their key (readers never get those). A read: it never writes."""
        stream, after = streams.checked(stream, after)
        return streams.read_all(self.store, self.get_run(run_id).run_id, stream, after, divergent)

    @overload
    def follow(
        self,
        run_id: str,
        *,
        stream: str | None = None,
        after: int = 0,
        timeout: float | None = None,
        reader: None = None,
    ) -> Iterator[Chunk]: ...

    @overload
    def follow(
        self,
        run_id: str,
        *,
        stream: str | None = None,
        after: int = 0,
        timeout: float | None = None,
        reader: str,
        ack_every: int = 1,
    ) -> StreamReader: ...

    def follow(
        self,
        run_id: str,
        *,
        stream: str | None = None,
        after: int = 0,
        timeout: float | None = None,
        reader: str | None = None,
        ack_every: int = 1,
    ) -> Iterator[Chunk] | StreamReader:
        """Yield the run's stream chunks after cursor `after` as they commit (one stream's, or
        every stream's), each once, in order, until the run ends or `timeout` seconds pass.
        Keep each chunk's `cursor`: following again from it after a crash of the reader gives
        every chunk once (docs/streams.md).

        `reader=NAME` keeps the position in the store instead: it follows from the last chunk
        NAME acknowledged (a chunk is acknowledged when the next is asked for, or by the
        returned `StreamReader`'s `ack()`), so a reader killed and restarted under the same name
        goes on where it was, getting again at most the one chunk it held (at least once; one
        process per name at a time, `ReaderBusy` otherwise). Not with `after=`. `ack_every=N`
        stores the position once per N chunks taken (fewer commits; up to N chunks again)."""
        stream, after = streams.checked(stream, after)
        limit = None if timeout is None else bounded(timeout, "timeout (seconds)", low=0.0, high=MAX_SECONDS)
        end = None if limit is None else time.monotonic() + limit

        def stop() -> bool:
            return end is not None and time.monotonic() >= end

        if reader is not None:
            if after:
                raise ConfigError(
                    f"follow(after={after}, reader={reader!r}): a named reader starts after the last "
                    "chunk it acknowledged; give after= or reader=, not both"
                )
            return StreamReader(self.store, run_id, stream, reader, stop=stop, ack_every=ack_every)
        if ack_every != 1:
            raise ConfigError("follow(ack_every=...) paces a named reader's position: give reader= too")
        return follow_chunks(self.store, run_id, stream, after, stop=stop)
