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
