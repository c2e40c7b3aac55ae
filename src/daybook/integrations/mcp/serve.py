"""Running the proxy: connect to the upstream server (a stdio subprocess, or a streamable-HTTP
URL), list its tools, then serve the client on stdio until it hangs up."""

from __future__ import annotations

import os
import shlex
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.stdio import stdio_server

from ...book import Daybook
from ...errors import ConfigError
from .policy import Policy
from .proxy import McpProxy


@asynccontextmanager
async def upstream_session(
    command: str | None = None, url: str | None = None
) -> AsyncIterator[ClientSession]:
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
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session
        return
    assert url is not None
    async with streamable_http_client(url) as (read, write, _), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@asynccontextmanager
async def open_proxy(
    book: Daybook,
    *,
    command: str | None = None,
    url: str | None = None,
    policy: Policy | None = None,
    session: str | None = None,
) -> AsyncIterator[McpProxy]:
    """A proxy connected to its upstream, its tools listed (`session`: the run id prefix of
    positional keys; give the same one to a restarted proxy so it continues the session)."""
    async with upstream_session(command, url) as up:
        tools = (await up.list_tools()).tools
        yield McpProxy(book, up, tools, policy or Policy(), session or uuid.uuid4().hex[:12])


async def serve_stdio(book: Daybook, **how: Any) -> None:
    """Serve one MCP client on this process's stdin/stdout through the proxy."""
    async with open_proxy(book, **how) as proxy:
        server = proxy.server()
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())


LOOPBACK = ("127.0.0.1", "localhost")


def listen_address(value: str) -> tuple[str, int]:
    """`PORT` or `127.0.0.1:PORT` (the proxy serves this machine only)."""
    host, _, port = value.rpartition(":")
    host = host or "127.0.0.1"
    if host not in LOOPBACK or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"--listen {value!r}: give 127.0.0.1:PORT (the proxy binds loopback only)")
    return host, int(port)


async def serve_http(book: Daybook, listen: str, **how: Any) -> None:
    """Serve MCP clients over streamable HTTP at http://127.0.0.1:PORT/mcp through the proxy."""
    import uvicorn
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from starlette.applications import Starlette
    from starlette.routing import Route
    from starlette.types import Receive, Scope, Send

    host, port = listen_address(listen)
    async with open_proxy(book, **how) as proxy:
        manager = StreamableHTTPSessionManager(app=proxy.server())

        class Endpoint:  # an ASGI app (a plain function would be a GET-only endpoint)
            async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
                await manager.handle_request(scope, receive, send)

        app = Starlette(routes=[Route("/mcp", endpoint=Endpoint())])
        async with manager.run():
            await uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning")).serve()
