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


def test_a_client_retry_under_the_same_key_does_not_execute_again(book: Daybook, ledger: Path) -> None:
    async def go() -> list[types.CallToolResult]:
        async with client(book) as c:
            meta = {KEY_META: "refund-42"}
            a = await c.call_tool("send", {"to": "bob", "amount": 5}, meta=meta)
            b = await c.call_tool("send", {"to": "bob", "amount": 5}, meta=meta)
            other = await c.call_tool("send", {"to": "bob", "amount": 500}, meta=meta)
        async with client(book, session="another-session") as c:  # the key outlives the session
            d = await c.call_tool("send", {"amount": 5, "to": "bob"}, meta=meta)
        return [a, b, other, d]

    a, b, other, d = run(go)
    assert body(a) == body(b) == body(d) == {"execution": 1, "tool": "send", "to": "bob", "amount": 5}
    assert other.isError and "already used" in text(other)  # a key names one call, not another
    lines = ledger_of(ledger)
    assert [line["key"] for line in lines] == ["mcp/key/send/refund-42"]


def test_the_idempotency_key_argument_is_filled_with_the_call_key(book: Daybook, ledger: Path) -> None:
    async def go() -> Any:
        async with client(book) as c:
            return body(await c.call_tool("put", {"name": "a", "value": "1"}))

    assert run(go)["execution"] == 1
    (line,) = ledger_of(ledger)
    assert line["args"]["idempotency_key"] == line["key"] and line["key"].startswith("mcp/s1/put/")


def test_a_restarted_proxy_on_the_same_run_answers_repeated_calls_from_the_journal(
    book: Daybook, ledger: Path
) -> None:
    calls = [("send", {"to": "bob", "amount": 5}), ("send", {"to": "bob", "amount": 5}), ("send", {"to": "amy", "amount": 1})]

    async def session(name: str) -> list[Any]:
        async with client(book, session=name) as c:
            return [body(await c.call_tool(tool, args)) for tool, args in calls]

    first = run(lambda: session("agent-7"))
    assert [r["execution"] for r in first] == [1, 2, 3]  # two identical calls are two acts
    again = run(lambda: session("agent-7"))  # the agent repeats its calls after a restart
    assert again == first
    assert len(ledger_of(ledger)) == 3
    run(lambda: session("agent-8"))  # a new session is new work
    assert len(ledger_of(ledger)) == 6


@pytest.mark.parametrize("through", ["direct", "daybook"])
def test_a_client_that_times_out_and_retries(book: Daybook, ledger: Path, through: str) -> None:
    """The same scenario with and without daybook: the client gives up waiting (the reply is
    slow) and sends the same call again while the first is still running. Direct to the
    server it executes twice (so this test can fail); through the proxy the retry joins it."""

    async def go() -> Any:
        @asynccontextmanager
        async def connect() -> AsyncIterator[ClientSession]:
            if through == "daybook":
                async with client(book) as c:
                    yield c
                return
            params = StdioServerParameters(command=sys.executable, args=[SERVER.split(" ", 1)[1]], env=dict(os.environ))
            async with stdio_client(params) as (r, w), ClientSession(r, w) as c:
                await c.initialize()
                yield c

        async with connect() as c:
            args = {"to": "bob", "amount": 5, "delay": 2}
            with suppress(Exception):
                await c.call_tool("send", args, read_timeout_seconds=timedelta(seconds=0.5))
            return body(await c.call_tool("send", args))

    result = run(go)
    assert result["execution"] == 1 if through == "daybook" else result["execution"] == 2
    assert len(ledger_of(ledger)) == (1 if through == "daybook" else 2)


def test_an_irreversible_tool_is_gated_until_approved_and_the_approval_is_bound_to_the_call(
    book: Daybook, ledger: Path
) -> None:
    token = book.add_approver("alice")

    async def call(args: dict[str, Any]) -> types.CallToolResult:
        async with client(book, session="gated") as c:
            return await c.call_tool("wire", args)

    pending = run(lambda: call({"to": "bob", "amount": 5}))
    assert pending.isError and "pending approval" in text(pending) and "daybook approve" in text(pending)
    assert ledger_of(ledger) == []  # nothing reached the server
    (gate,) = book.approvals()
    assert gate["run_id"].startswith("mcp/gated/wire/")
    assert book.approve(str(gate["run_id"]), str(gate["gate_id"]), approver="alice", token=token) == "delivered"
    other = run(lambda: call({"to": "bob", "amount": 500}))  # another call: the approval is not its
    assert other.isError and "pending approval" in text(other)
    done = run(lambda: call({"to": "bob", "amount": 5}))  # the approved call, made again
    assert body(done)["execution"] == 1
    again = run(lambda: call({"to": "bob", "amount": 5}))
    assert body(again)["execution"] == 1
    assert [line["args"] for line in ledger_of(ledger)] == [{"to": "bob", "amount": 5}]
    waiting = [g for g in book.approvals() if g["run_id"] != gate["run_id"]]
    assert len(waiting) == 1
    book.approve(str(waiting[0]["run_id"]), str(waiting[0]["gate_id"]), approver="alice", token=token, approve=False)
    declined = run(lambda: call({"to": "bob", "amount": 500}))
    assert declined.isError and "not approved (declined by alice" in text(declined)
    assert len(ledger_of(ledger)) == 1
