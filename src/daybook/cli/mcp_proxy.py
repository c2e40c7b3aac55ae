"""`daybook mcp-proxy [OPTIONS] -- CMD [ARGS]...`: the MCP proxy in the spelling MCP users know.

MCP tools (`mcp-proxy`, client configs) name the upstream server as the command's own arguments
after `--`, not as one quoted string. This is `daybook proxy` with that spelling: the same
options (shared with it, so the two never drift), the upstream command line joined with shell
quoting and handed to `daybook proxy --upstream`; a single `http(s)://` argument is the
upstream's streamable-HTTP URL (`--upstream-url`).
"""

from __future__ import annotations

import shlex
import shutil
from typing import Any

import click

from .app import fail
from .proxy import proxy

_UPSTREAM = ("command", "url")


def _relay(upstream: tuple[str, ...], **options: Any) -> Any:
    if len(upstream) == 1 and upstream[0].startswith(("http://", "https://")):
        where = {"command": None, "url": upstream[0]}
    elif shutil.which(upstream[0]) is None:
        fail(
            f"no program {upstream[0]!r} on PATH (or not executable): after `--` give the upstream "
            "MCP server's command line, e.g. `daybook mcp-proxy -- python server.py`"
        )
    else:
        where = {"command": shlex.join(upstream), "url": None}
    assert proxy.callback is not None  # a click command always has one
    return click.get_current_context().invoke(proxy.callback, **options, **where)


mcp_proxy = click.Command(
    "mcp-proxy",
    params=[
        *(param for param in proxy.params if param.name not in _UPSTREAM),
        click.Argument(["upstream"], nargs=-1, required=True, metavar="-- CMD [ARGS]... | URL"),
    ],
    callback=_relay,
    help="`daybook proxy` spelled as MCP tools spell it: the upstream MCP server's command line "
    "after `--` (e.g. `daybook mcp-proxy --run s1 -- python server.py`), or its streamable-HTTP "
    "URL. Serves MCP clients on stdio (or HTTP: --listen), journaling their calls to the upstream.",
    short_help="the MCP proxy, upstream as `-- CMD ARGS...` (as mcp-proxy spells it)",
)

COMMANDS = [mcp_proxy]
