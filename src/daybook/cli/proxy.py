"""`daybook proxy`: put the MCP proxy between an MCP client and an MCP server (`daybook-runtime[mcp]`)."""

from __future__ import annotations

import asyncio
import shlex
import shutil

import click

from .. import ConfigError, Daybook
from .app import with_book


@click.command()
@click.option(
    "--upstream",
    "command",
    default=None,
    help="The upstream MCP server's command line (stdio), e.g. 'python server.py'.",
)
@click.option(
    "--upstream-url", "url", default=None, help="The upstream MCP server's streamable-HTTP URL instead."
)
@click.option(
    "--tools-policy",
    "policy_file",
    default=None,
    metavar="FILE",  # a plain string: click.Path fails on a NUL; load_policy says what is wrong
    help="JSON or TOML file overriding each tool's class, gate, approvers, timeout and status query.",
)
@click.option(
    "--run",
    "session",
    default=None,
    help="The session id naming positional calls; give the same one to a restarted proxy to continue.",
)
@click.option(
    "--listen",
    default=None,
    metavar="127.0.0.1:PORT",
    help="Serve clients over streamable HTTP at http://127.0.0.1:PORT/mcp instead of stdio.",
)
@with_book
def proxy(
    book: Daybook,
    command: str | None,
    url: str | None,
    policy_file: str | None,
    session: str | None,
    listen: str | None,
) -> None:
    """Serve MCP clients on stdio (or HTTP: --listen), journaling their calls to the upstream.

    Each call that is not read-only is an effect under a key naming the call (intent before it
    is forwarded, outcome after); irreversible tools wait for `daybook approve`; a call whose
    outcome is unknown is never re-sent blindly. Tool listings, resources and prompts pass through.
    """
    try:
        from ..integrations.mcp import load_policy, serve_http, serve_stdio
    except ImportError as exc:
        raise ConfigError(
            f"`daybook proxy` needs the MCP SDK: pip install 'daybook-runtime[mcp]' ({exc})"
        ) from None
    _check_upstream(command)
    how = {"command": command, "url": url, "policy": load_policy(policy_file), "session": session}
    try:
        asyncio.run(serve_http(book, listen, **how) if listen else serve_stdio(book, **how))
    except (OSError, ExceptionGroup) as exc:
        # The upstream could not be started or reached, or stdio is not a stream (a test
        # harness): say which, never a traceback.
        raise ConfigError(f"`daybook proxy` stopped: {_cause(exc)}") from None


def _check_upstream(command: str | None) -> None:
    if not command:
        return
    try:
        program = shlex.split(command)[0]
    except (ValueError, IndexError):
        raise ConfigError(f"--upstream {command!r} is not a command line") from None
    if shutil.which(program) is None:
        raise ConfigError(f"--upstream: no program {program!r} on PATH (or not executable)")


def _cause(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"


COMMANDS = [proxy]
