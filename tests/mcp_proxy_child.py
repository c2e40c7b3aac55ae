"""`daybook proxy` over stdio as its own process, as the CLI runs it, with a crash point on its
journal writes for the proxy's crash tests (`--kill-before KIND:N` / `--kill-after KIND:N`, see
crashpoint.py): `python mcp_proxy_child.py DB_URL SESSION [--tools-policy FILE] [crash point]`."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from crashpoint import kill_at_journal_write, take

from daybook import Daybook
from daybook.integrations.mcp import load_policy, serve_stdio

SERVER = f"{sys.executable} {Path(__file__).parent / 'mcp_counter_server.py'}"


def main(argv: list[str]) -> None:
    policy = take(argv, "--tools-policy")
    with Daybook(argv[0]) as book:
        kill_at_journal_write(book, argv)
        how = {"command": SERVER, "session": argv[1], "policy": load_policy(policy)}
        asyncio.run(serve_stdio(book, **how))


if __name__ == "__main__":
    main(sys.argv[1:])
