"""The MCP proxy against a real MCP server (a stdio subprocess that counts its own executions in a
ledger file) and a real MCP client from the SDK, on both stores. Every assertion about how many
times a tool ran reads the server's own ledger, never the journal."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp import ClientSession, StdioServerParameters, types  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from mcp.shared.memory import create_connected_server_and_client_session  # noqa: E402

from daybook import Daybook  # noqa: E402
from daybook.integrations.mcp import KEY_META, load_policy, open_proxy  # noqa: E402

HERE = Path(__file__).parent
SERVER = f"{sys.executable} {HERE / 'mcp_counter_server.py'}"


def ledger_of(path: Path) -> list[dict[str, Any]]:
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


@pytest.fixture
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "ledger.jsonl"
    monkeypatch.setenv("MCP_LEDGER", str(path))
    return path


@asynccontextmanager
async def client(book: Daybook, session: str = "s1", policy: str | None = None) -> AsyncIterator[ClientSession]:
    """A real MCP client session talking to an in-process proxy in front of the real server."""
    async with open_proxy(book, command=SERVER, session=session, policy=load_policy(policy)) as proxy:
        async with create_connected_server_and_client_session(proxy.server()) as c:
            yield c


def run(fn: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(fn())  # type: ignore[arg-type]


def test_each_tool_call_is_a_journaled_effect_with_its_key_sent_upstream(book: Daybook, ledger: Path) -> None:
    async def go() -> tuple[Any, Any]:
        async with client(book) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            assert {"send", "wire", "put", "sent", "count"} <= names
            first = body(await c.call_tool("send", {"to": "bob", "amount": 5}))
            counted = body(await c.call_tool("count", {}))
            return first, counted

    first, counted = run(go)
    assert first["execution"] == 1 and counted == {"count": 1}
    lines = ledger_of(ledger)
    assert len(lines) == 1
    effects = book.effects()
    assert len(effects) == 1  # the read (`count`) passed through, not journaled as an effect
    effect = effects[0]
    assert effect["status"] == "confirmed"
    assert lines[0]["key"] == effect["key"]  # the key that names the call reached the server
    run_id = book.find_effect(str(effect["key"]))[0]
    assert run_id == effect["key"] and run_id.startswith("mcp/s1/send/")
