"""A streamable-HTTP MCP server on 127.0.0.1 (port argv[1]) that counts its executions in
$MCP_LEDGER: the upstream for the proxy's --upstream-url tests."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations

LEDGER = Path(os.environ["MCP_LEDGER"])
server = FastMCP("counter-http", host="127.0.0.1", port=int(sys.argv[1]))


@server.tool(annotations=ToolAnnotations(destructiveHint=False))
def send(to: str, amount: float) -> dict[str, object]:
    """Send `amount` to `to`: one ledger line per execution."""
    with LEDGER.open("a") as f:
        f.write(json.dumps({"to": to, "amount": amount}) + "\n")
    return {"execution": len(LEDGER.read_text().splitlines()), "to": to, "amount": amount}


if __name__ == "__main__":
    server.run(transport="streamable-http")
