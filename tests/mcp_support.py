"""What the MCP proxy tests share: the counter server's ledger (its own record of executions),
reading a tool result, and the ways to reach the proxy (in process, or `daybook proxy` as a
process of its own, which is what an IDE runs) or the server directly (no daybook)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TextIO

import pytest
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.shared.memory import create_connected_server_and_client_session

from daybook import Daybook
from daybook.integrations.mcp import load_policy, open_proxy

HERE = Path(__file__).parent
SERVER = f"{sys.executable} {HERE / 'mcp_counter_server.py'}"


@pytest.fixture
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The counter server's ledger file (the server reads its path from $MCP_LEDGER)."""
    path = tmp_path / "ledger.jsonl"
    monkeypatch.setenv("MCP_LEDGER", str(path))
    return path


def run(fn: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(fn())  # type: ignore[arg-type]


def ledger_of(path: Path) -> list[dict[str, Any]]:
    """The server's own ledger: one line per execution of a world-changing tool."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def body(result: types.CallToolResult) -> Any:
    assert not result.isError, result.content
    if result.structuredContent is not None:
        return result.structuredContent
    first = result.content[0]
    assert isinstance(first, types.TextContent)
    return json.loads(first.text)


def text(result: types.CallToolResult) -> str:
    first = result.content[0]
    assert isinstance(first, types.TextContent)
    return first.text


@asynccontextmanager
async def client(
    book: Daybook, session: str = "s1", policy: str | Path | None = None
) -> AsyncIterator[ClientSession]:
    """A real MCP client session talking to an in-process proxy in front of the real server."""
    how = {"command": SERVER, "session": session, "policy": load_policy(policy)}
    async with (
        open_proxy(book, **how) as proxy,
        create_connected_server_and_client_session(proxy.server()) as c,
    ):
        yield c


@asynccontextmanager
async def proxy_process(
    db_url: str,
    session: str,
    policy: Path | None = None,
    *,
    errlog: TextIO | None = None,
    extra: tuple[str, ...] = (),
) -> AsyncIterator[ClientSession]:
    """A real MCP client over stdio to `daybook proxy` as its own process (what an IDE runs)."""
    args = ["-m", "daybook", "proxy", "--db", db_url, "--run", session, "--upstream", SERVER, *extra]
    args += ["--tools-policy", str(policy)] if policy is not None else []
    params = StdioServerParameters(command=sys.executable, args=args, env=dict(os.environ))
    async with stdio_client(params, errlog=errlog or sys.stderr) as (r, w), ClientSession(r, w) as c:
        await c.initialize()
        yield c


@asynccontextmanager
async def direct() -> AsyncIterator[ClientSession]:
    """A real MCP client straight to the server, no daybook."""
    params = StdioServerParameters(
        command=sys.executable, args=[SERVER.split(" ", 1)[1]], env=dict(os.environ)
    )
    async with stdio_client(params) as (r, w), ClientSession(r, w) as c:
        await c.initialize()
        yield c
