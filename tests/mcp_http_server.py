"""A streamable-HTTP MCP server on 127.0.0.1 (port argv[1]) that counts its executions in
$MCP_LEDGER: the upstream for the proxy's --upstream-url tests."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations

LEDGER = Path(os.environ["MCP_LEDGER"])
server = FastMCP("counter-http", host="127.0.0.1", port=int(sys.argv[1]))


@server.tool(annotations=ToolAnnotations(destructiveHint=False))
def send(to: str, amount: float, delay: float = 0) -> dict[str, object]:
    """Send `amount` to `to`: one ledger line per execution (`delay`: seconds slept after it is
    recorded, before the reply)."""
    with LEDGER.open("a") as f:
        f.write(json.dumps({"to": to, "amount": amount, "pid": os.getpid()}) + "\n")
    time.sleep(delay)
    return {"execution": len(LEDGER.read_text().splitlines()), "to": to, "amount": amount}


if __name__ == "__main__":
    server.run(transport="streamable-http")
