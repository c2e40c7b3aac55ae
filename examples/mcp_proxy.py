"""An MCP client's tool calls, journaled by the daybook MCP proxy (needs `daybook[mcp]`).

    python examples/mcp_proxy.py          # the whole story, against a payments MCP server
    python examples/mcp_proxy.py serve    # just the payments server (stdio), for `daybook proxy`

The upstream is a real MCP server (this file with `serve`) that counts its own executions in a
file. A real MCP client calls it through the proxy: a payment sent twice under one key runs once;
an agent that repeats its session after a restart gets its answers from the journal; a wire
(no annotations: irreversible) waits for an approver, then runs once.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import daybook

LEDGER = Path(os.environ.get("PAYMENTS_LEDGER", Path(tempfile.gettempdir()) / "payments.jsonl"))


def executions() -> int:
    return len(LEDGER.read_text().splitlines()) if LEDGER.exists() else 0


async def serve() -> None:
    from mcp import types
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    server: Server[Any, Any] = Server("payments")
    schema = {"type": "object", "properties": {"to": {"type": "string"}, "amount": {"type": "number"}}}
    additive = types.ToolAnnotations(destructiveHint=False)

    @server.list_tools()  # type: ignore[misc]
    async def tools() -> list[types.Tool]:
        return [types.Tool(name="pay", inputSchema=schema, annotations=additive),
                types.Tool(name="wire", inputSchema=schema)]  # fmt: skip

    @server.call_tool()  # type: ignore[misc]
    async def call(name: str, args: dict[str, Any]) -> dict[str, Any]:
        with LEDGER.open("a") as f:
            f.write(json.dumps({"tool": name, **args}) + "\n")
        return {"done": name, "execution": executions(), **args}

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


async def story(book: daybook.Daybook) -> None:
    from mcp.shared.memory import create_connected_server_and_client_session as connect

    from daybook.integrations.mcp import KEY_META, open_proxy

    upstream = f"{sys.executable} {os.path.abspath(__file__)} serve"

    async def session(calls: list[tuple[str, dict[str, Any], dict[str, Any] | None]]) -> None:
        async with (
            open_proxy(book, command=upstream, session="agent-1") as proxy,
            connect(proxy.server()) as c,
        ):
            for name, args, meta in calls:
                result = await c.call_tool(name, args, meta=meta)
                # An error's words come first (a pending approval carries its gate request as
                # structured content too); a result is shown as its structured content.
                shown = None if result.isError else result.structuredContent
                text = json.dumps(shown) if shown is not None else result.content[0].text  # type: ignore[union-attr]
                print(f"  {name}{args} -> {'ERROR ' if result.isError else ''}{text[:150]}")

    print("a payment sent twice under one key, and another without a key:")
    pay = {"to": "bob", "amount": 5}
    await session([("pay", pay, {KEY_META: "invoice-17"}), ("pay", pay, {KEY_META: "invoice-17"}),
                   ("pay", {"to": "amy", "amount": 1}, None)])  # fmt: skip
    print(f"  the server executed {executions()} calls")
    print("the agent restarts and repeats its session: answered from the journal")
    await session([("pay", {"to": "amy", "amount": 1}, None)])
    print(f"  the server executed {executions()} calls")
    print("a wire (irreversible) waits for an approver:")
    await session([("wire", {"to": "acme", "amount": 900}, None)])
    token = book.add_approver("treasury")
    (gate,) = book.approvals()
    book.approve(str(gate["run_id"]), str(gate["gate_id"]), approver="treasury", token=token)
    print("  approved; the agent makes the same call again:")
    await session([("wire", {"to": "acme", "amount": 900}, None)])
    print(f"  the server executed {executions()} calls")


def main() -> None:
    if sys.argv[1:] == ["serve"]:
        asyncio.run(serve())
        return
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["PAYMENTS_LEDGER"] = str(Path(tmp) / "payments.jsonl")
        global LEDGER
        LEDGER = Path(os.environ["PAYMENTS_LEDGER"])
        with daybook.Daybook(f"sqlite:///{tmp}/proxy.db") as book:
            asyncio.run(story(book))
        print(f"result: {executions()} executions at the server for 3 distinct acts")


if __name__ == "__main__":
    main()
