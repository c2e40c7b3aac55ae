"""Running the proxy: connect to the upstream server (a stdio subprocess, or a streamable-HTTP
URL) under supervision (`upstream.py`: restarted with backoff when lost), list its tools, then
serve the client on stdio until it hangs up (waiting a bounded time for the calls in flight), or
serve HTTP clients on loopback, checking each request's Host and Origin (DNS rebinding) and, when
a token is set, its bearer token."""

from __future__ import annotations

import hmac
import os
import shlex
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp import StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.stdio import stdio_server

import daybook
from daybook import ConfigError, Context, Daybook

from .pipes import stdio_pipes
from .policy import Policy
from .proxy import McpProxy
from .upstream import WatchedSession, supervised

DRAIN = 30.0  # seconds a proxy whose client hung up waits for the calls in flight
PROBE = 2.0  # seconds between pings of an HTTP upstream


@asynccontextmanager
async def upstream_session(
    command: str | None = None, url: str | None = None
) -> AsyncIterator[WatchedSession]:
    """An initialized client session to the upstream server: `command` (a shell-style command
    line, run as a subprocess speaking stdio) or `url` (streamable HTTP)."""
    if (command is None) == (url is None):
        raise ConfigError(
            "give the upstream MCP server as a command (--upstream) or a URL (--upstream-url), one of them"
        )
    if command is not None:
        argv = shlex.split(command)
        if not argv:
            raise ConfigError("--upstream is empty; give the server's command line, e.g. 'python server.py'")
        # The upstream inherits the proxy's environment (the SDK would pass only a few variables).
        params = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))
        async with stdio_client(params) as (read, write), WatchedSession(read, write) as session:
            await session.initialize()
            yield session
        return
    assert url is not None
    async with streamable_http_client(url) as (read, write, _), WatchedSession(read, write) as session:
        await session.initialize()
        yield session


@daybook.workflow(name="daybook.mcp.upstream_restart")
async def upstream_restart(ctx: Context, info: dict[str, Any]) -> dict[str, Any]:
    """The journal's record of one restart of the upstream server (why, after how long)."""
    return info


@asynccontextmanager
async def open_proxy(
    book: Daybook,
    *,
    command: str | None = None,
    url: str | None = None,
    policy: Policy | None = None,
    session: str | None = None,
    backoff: float = 0.5,
) -> AsyncIterator[McpProxy]:
    """A proxy connected to its upstream, its tools listed (`session`: the run id prefix of
    positional keys; give the same one to a restarted proxy so it continues the session).
    The policy is checked against the upstream's tools (a ConfigError names what is wrong)."""
    session = session or uuid.uuid4().hex[:12]

    async def journal(info: dict[str, Any]) -> None:
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        run_id = f"mcp/{session}/upstream/{stamp}-{uuid.uuid4().hex[:6]}"
        await book.run_async(upstream_restart, {**info, "session": session}, run_id=run_id)

    def connect() -> Any:
        return upstream_session(command, url)

    # An HTTP upstream's death is noticed by pinging it (`upstream.py`); a stdio one's at once.
    probe = PROBE if url is not None else None
    async with supervised(connect, on_restart=journal, backoff=backoff, probe=probe) as up:
        tools = (await up.current().list_tools()).tools
        yield McpProxy(book, up, tools, policy or Policy(), session)


async def serve_stdio(book: Daybook, drain: float = DRAIN, **how: Any) -> None:
    """Serve one MCP client on this process's stdin/stdout through the proxy; when it hangs up,
    wait up to `drain` seconds for the calls in flight, so their outcomes are journaled."""
    async with open_proxy(book, **how) as proxy:
        server = proxy.server()
        async with stdio_pipes() as pipes:
            given: dict[str, Any] = {} if pipes is None else {"stdin": pipes[0], "stdout": pipes[1]}
            async with stdio_server(**given) as (read, write):
                await server.run(read, write, server.create_initialization_options())
        await proxy.drain(drain)


LOOPBACK = ("127.0.0.1", "localhost")


def listen_address(value: str) -> tuple[str, int]:
    """`PORT` or `127.0.0.1:PORT` (the proxy serves this machine only)."""
    host, _, port = value.rpartition(":")
    host = host or "127.0.0.1"
    if host not in LOOPBACK or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"--listen {value!r}: give 127.0.0.1:PORT (the proxy binds loopback only)")
    return host, int(port)


def security_for(port: int) -> Any:
    """Host and Origin checks for a loopback listener: a page on another site that rebinds its
    name to 127.0.0.1 sends its own Host and Origin, and is refused (421/403)."""
    from mcp.server.transport_security import TransportSecuritySettings

    hosts = [f"127.0.0.1:{port}", f"localhost:{port}"]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=hosts,
        allowed_origins=[f"http://{h}" for h in hosts],
    )


def authorized(headers: list[tuple[bytes, bytes]], token: str) -> bool:
    """Whether a request carries `Authorization: Bearer <token>` (compared in constant time)."""
    given = dict(headers).get(b"authorization", b"").decode("latin-1")
    scheme, _, value = given.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), token.encode())


async def serve_http(
    book: Daybook, listen: str, token: str | None = None, drain: float = DRAIN, **how: Any
) -> None:
    """Serve MCP clients over streamable HTTP at http://127.0.0.1:PORT/mcp through the proxy
    (`token`: every request must carry it as a bearer token, else 401)."""
    import uvicorn
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Route
    from starlette.types import Receive, Scope, Send

    host, port = listen_address(listen)
    async with open_proxy(book, **how) as proxy:
        manager = StreamableHTTPSessionManager(app=proxy.server(), security_settings=security_for(port))

        class Endpoint:  # an ASGI app (a plain function would be a GET-only endpoint)
            async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
                if token and not authorized(scope.get("headers", []), token):
                    refusal = Response(
                        "daybook proxy: a bearer token is required",
                        status_code=401,
                        headers={"WWW-Authenticate": "Bearer"},
                    )
                    await refusal(scope, receive, send)
                    return
                await manager.handle_request(scope, receive, send)

        app = Starlette(routes=[Route("/mcp", endpoint=Endpoint())])
        async with manager.run():
            await uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning")).serve()
        await proxy.drain(drain)
