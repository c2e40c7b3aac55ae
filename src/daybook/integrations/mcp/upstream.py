"""The upstream MCP server as a supervised connection: connected once at start (a failure there is
the operator's to fix, and stops the proxy), then reconnected whenever it is lost, with
exponential backoff, each restart said on stderr and journaled (a run `mcp/<session>/upstream/..`
that records why and after how long).

A lost connection says nothing certain about the calls that were in flight on it: the proxy reads
those as unknown (`proxy.py`). What it does know is that a call it has not yet sent cannot go over
a dead connection, so a call waits (up to `ready_wait` seconds) for the restarted one instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from mcp import ClientSession
from mcp.types import CONNECTION_CLOSED, ErrorData, JSONRPCError

from daybook import ConfigError, DaybookError

_CLOSED = ErrorData(code=CONNECTION_CLOSED, message="Connection closed")


class UpstreamDown(DaybookError):
    """The upstream server is not connected (it died and is being restarted); nothing was sent."""


class WatchedSession(ClientSession):
    """A client session that says when its connection ended (the server's output closed)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ended = asyncio.Event()

    async def _receive_loop(self) -> None:
        try:
            await super()._receive_loop()
        finally:
            self.ended.set()

    async def __aexit__(self, *exc: Any) -> bool | None:
        # Closing a session cancels its reader before the SDK can tell the requests waiting on
        # it that the connection closed (its own notice needs a checkpoint the cancel refuses):
        # tell them now, so each ends (unknown) instead of waiting for its timeout.
        self.ended.set()
        for request_id, stream in list(self._response_streams.items()):
            with contextlib.suppress(Exception):
                stream.send_nowait(JSONRPCError(jsonrpc="2.0", id=request_id, error=_CLOSED))
        return await super().__aexit__(*exc)


Connect = Callable[[], AbstractAsyncContextManager[WatchedSession]]
OnRestart = Callable[[dict[str, Any]], Awaitable[None]]


class Upstream:
    """The current session to the upstream server; reconnects it when it is lost."""

    def __init__(
        self,
        connect: Connect,
        *,
        on_restart: OnRestart | None = None,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        ready_wait: float = 60.0,
        probe: float | None = None,
    ) -> None:
        self._connect = connect
        self._on_restart = on_restart
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.ready_wait = ready_wait
        self.probe = probe
        self._session: WatchedSession | None = None
        self._task: asyncio.Task[None] | None = None
        self.restarts = 0

    async def start(self) -> WatchedSession:
        """Connect the first time (errors propagate: a wrong command, an unreachable URL)."""
        first: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._supervise(first))
        try:
            await first
        except ConfigError:
            raise
        except Exception as exc:
            raise UpstreamDown(
                f"the upstream MCP server could not be started or reached, or did not complete the "
                f"MCP handshake ({_cause(exc)}); check --upstream / --upstream-url, and run the "
                "server by hand to see its own errors"
            ) from None
        assert self._session is not None
        return self._session

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    def current(self) -> WatchedSession:
        """The live session, or UpstreamDown (nothing can be sent now)."""
        session = self._session
        if session is None or session.ended.is_set():
            raise UpstreamDown("the upstream MCP server is not connected (it is being restarted)")
        return session

    async def session(self) -> WatchedSession:
        """The live session, waiting up to `ready_wait` seconds for a restart to finish."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.ready_wait
        while True:
            session = self._session
            if session is not None and not session.ended.is_set():
                return session
            if loop.time() >= deadline:
                return self.current()  # raises UpstreamDown
            # A short poll: the session that just ended may not be replaced yet.
            await asyncio.sleep(0.05)

    def lost(self, session: WatchedSession) -> None:
        """A call saw `session`'s connection break: reconnect (it may not have noticed yet). A
        session that was already replaced is left alone (the new one is not broken)."""
        if session is self._session:
            session.ended.set()

    async def _supervise(self, first: asyncio.Future[None]) -> None:
        failures = 0
        while True:
            reason = "the connection closed"
            try:
                async with self._connect() as session:
                    self._session = session
                    failures = 0
                    if not first.done():
                        first.set_result(None)
                    await self._watch(session)
            except Exception as exc:  # any failure is a reason to reconnect
                if not first.done():
                    first.set_exception(exc)
                    return
                reason = _cause(exc)
            self._session = None
            delay = min(self.max_backoff, self.backoff * 2**failures)
            failures += 1
            self.restarts += 1
            await self._say(reason, delay, failures)
            await asyncio.sleep(delay)

    async def _watch(self, session: WatchedSession) -> None:
        """Until the session ends. An HTTP upstream that dies does not close anything a client
        sees (a reply stream just stops), so with `probe` it is pinged every `probe` seconds:
        no answer ends the session (its calls in flight are then unknown, and it reconnects)."""
        if self.probe is None:
            await session.ended.wait()
            return
        while not session.ended.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(session.ended.wait(), self.probe)
            if session.ended.is_set():
                return
            try:
                await asyncio.wait_for(session.send_ping(), max(self.probe * 5, 10.0))
            except Exception:  # the server is gone (or hung): leave, so the session closes
                return

    async def _say(self, reason: str, delay: float, failures: int) -> None:
        print(
            f"daybook proxy: the upstream MCP server is gone ({reason}); restarting it in "
            f"{delay:g} s (restart {self.restarts}). Calls in flight on it are unknown until settled.",
            file=sys.stderr,
            flush=True,
        )
        if self._on_restart is not None:
            info = {"reason": reason, "backoff": delay, "restart": self.restarts, "failures": failures}
            with contextlib.suppress(Exception):  # journaling it must not stop the restart
                await self._on_restart(info)


def _cause(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"


@contextlib.asynccontextmanager
async def supervised(connect: Connect, **how: Any) -> AsyncIterator[Upstream]:
    """An Upstream, connected, closed on exit."""
    upstream = Upstream(connect, **how)
    await upstream.start()
    try:
        yield upstream
    finally:
        await upstream.close()
