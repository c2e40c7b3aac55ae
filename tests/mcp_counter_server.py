"""A real MCP server over stdio that counts its own executions (the counterparty of the MCP proxy
tests). Every execution of a world-changing tool appends one JSON line to the file named by
$MCP_LEDGER: the test reads the server's own count there, never the journal.

    send(to, amount, delay=0)  destructiveHint false: a new transfer per execution; `delay`
                               seconds pass after it is recorded and before the reply
    wire(to, amount)           unannotated: irreversible by MCP's defaults (gated by the proxy)
    put(name, value, idempotency_key)  idempotentHint: the server dedupes by the key itself
    sent(key)                  readOnlyHint: the status of the call with key `key`
    count()                    readOnlyHint: how many executions so far
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

LEDGER = Path(os.environ["MCP_LEDGER"])
server: Server[Any, Any] = Server("counter")

NUM = {"type": "number"}
STR = {"type": "string"}


def _tool(name: str, props: dict[str, Any], annotations: types.ToolAnnotations | None) -> types.Tool:
    schema = {"type": "object", "properties": props}
    return types.Tool(name=name, inputSchema=schema, annotations=annotations)


TOOLS = [
    _tool(
        "send",
        {"to": STR, "amount": NUM, "delay": NUM},
        types.ToolAnnotations(destructiveHint=False, idempotentHint=False),
    ),
    _tool("wire", {"to": STR, "amount": NUM}, None),
    _tool(
        "put",
        {"name": STR, "value": STR, "idempotency_key": STR},
        types.ToolAnnotations(destructiveHint=False, idempotentHint=True),
    ),
    _tool("sent", {"key": STR}, types.ToolAnnotations(readOnlyHint=True)),
    _tool("count", {}, types.ToolAnnotations(readOnlyHint=True)),
]


def _lines() -> list[dict[str, Any]]:
    if not LEDGER.exists():
        return []
    return [json.loads(line) for line in LEDGER.read_text().splitlines() if line.strip()]


def _record(entry: dict[str, Any]) -> None:
    with LEDGER.open("a") as f:
        f.write(json.dumps(entry) + "\n")
        f.flush()
        os.fsync(f.fileno())


@server.list_tools()
async def list_tools() -> list[types.Tool]:
    return TOOLS


@server.call_tool()
async def call_tool(name: str, args: dict[str, Any]) -> dict[str, Any]:
    meta = server.request_context.meta
    key = (meta.model_dump() if meta is not None else {}).get("daybook/idempotency_key")
    if name == "count":
        return {"count": len(_lines())}
    if name == "sent":
        for line in _lines():
            if line["key"] == args["key"]:
                return {"status": "confirmed", "result": line["result"]}
        return {"status": "absent"}
    if name == "put":
        for line in _lines():
            if line["tool"] == "put" and line["key"] == args.get("idempotency_key"):
                return dict(line["result"])  # a repeat of a key the server has seen: not executed
        key = args.get("idempotency_key")
    n = len(_lines()) + 1
    result = {"execution": n, "tool": name, **{k: v for k, v in args.items() if k != "delay"}}
    _record(
        {
            "tool": name,
            "key": key,
            "args": args,
            "result": result,
            "ppid": os.getppid(),
            "pid": os.getpid(),
            "at": time.time(),
        }
    )
    if args.get("delay"):
        await anyio.sleep(float(args["delay"]))
    return result


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
