"""`daybook proxy`: put the MCP proxy between an MCP client and an MCP server (`daybook-runtime[mcp]`)."""

from __future__ import annotations

import math
import os
import shlex
import shutil
from typing import Any, NoReturn

import click

from .. import ConfigError, Daybook
from .app import fail, say, with_book

TOKEN_ENV = "DAYBOOK_PROXY_TOKEN"
EXIT_USAGE = 2


upstream_option = click.option(
    "--upstream",
    "command",
    default=None,
    help="The upstream MCP server's command line (stdio), e.g. 'python server.py'.",
)
upstream_url_option = click.option(
    "--upstream-url", "url", default=None, help="The upstream MCP server's streamable-HTTP URL instead."
)
policy_option = click.option(
    "--tools-policy",
    "policy_file",
    default=None,
    metavar="FILE",  # a plain string: click.Path fails on a NUL; load_policy says what is wrong
    help="JSON or TOML file overriding each tool's class, gate, approvers, timeout, status query, "
    "secret arguments and trust in the server's hints.",
)
run_option = click.option(
    "--run",
    "session",
    default=None,
    help="The session id naming positional calls; give the same one to a restarted proxy to continue.",
)
listen_option = click.option(
    "--listen",
    default=None,
    metavar="127.0.0.1:PORT",
    help="Serve clients over streamable HTTP at http://127.0.0.1:PORT/mcp instead of stdio.",
)
token_env_option = click.option(
    "--token-env",
    default=None,
    metavar="VAR",
    help=f"With --listen: require `Authorization: Bearer <token>`, the token read from $VAR "
    f"(default: ${TOKEN_ENV} when it is set).",
)
drain_option = click.option(
    "--drain",
    default=30.0,
    type=click.FloatRange(0, 3600),
    callback=lambda _ctx, _param, value: _seconds(value),
    show_default=True,
    metavar="SECONDS",
    help="When the client hangs up, wait this long for the calls in flight to be journaled.",
)


@click.command()
@upstream_option
@upstream_url_option
@policy_option
@run_option
@listen_option
@token_env_option
@drain_option
@with_book
def proxy(
    book: Daybook,
    command: str | None,
    url: str | None,
    policy_file: str | None,
    session: str | None,
    listen: str | None,
    token_env: str | None,
    drain: float,
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
    try:
        _check_upstream(command)
        how: dict[str, Any] = {"command": command, "url": url, "session": session, "drain": drain}
        how["policy"] = load_policy(policy_file)
        token = _token(token_env, listen)
        import asyncio  # here, not at the top: every other daybook command runs without it

        asyncio.run(serve_http(book, listen, token=token, **how) if listen else serve_stdio(book, **how))
    except ConfigError as exc:
        _usage(str(exc))
    except (OSError, ExceptionGroup) as exc:
        # The upstream could not be started or reached, or stdio is not a stream (a test
        # harness): say which, never a traceback.
        cause = _root(exc)
        if isinstance(cause, ConfigError):
            _usage(str(cause))
        fail(f"`daybook proxy` stopped: {type(cause).__name__}: {cause}")


def _seconds(value: float) -> float:
    if math.isnan(value):  # FloatRange lets NaN through (every comparison with it is false)
        raise click.BadParameter("give seconds between 0 and 3600, not nan")
    return value


def _usage(message: str) -> NoReturn:
    """A wrong option or policy file: exit 2 (usage), one line on stderr, no traceback."""
    say(f"error: {message}", err=True)
    raise SystemExit(EXIT_USAGE)


def _token(token_env: str | None, listen: str | None) -> str | None:
    if token_env is None:
        return os.environ.get(TOKEN_ENV) or None
    if not listen:
        raise ConfigError("--token-env guards an HTTP listener: give it with --listen")
    token = os.environ.get(token_env, "")
    if not token:
        raise ConfigError(f"--token-env {token_env}: ${token_env} is not set or empty; set it to the token")
    return token


def _check_upstream(command: str | None) -> None:
    if not command:
        return
    try:
        program = shlex.split(command)[0]
    except (ValueError, IndexError):
        raise ConfigError(f"--upstream {command!r} is not a command line") from None
    if shutil.which(program) is None:
        raise ConfigError(f"--upstream: no program {program!r} on PATH (or not executable)")


def _root(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


COMMANDS = [proxy]
