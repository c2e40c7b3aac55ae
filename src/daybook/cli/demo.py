"""The demo command: the treasury agent killed mid-wire and resumed, in its own store."""

from __future__ import annotations

import sys

import click

from .app import given_db


@click.command()
@click.option(
    "--db",
    default=None,
    metavar="URL",
    help="Store for the demo run (default: a fresh file in a temp directory).",
)
@click.pass_context
def demo(ctx: click.Context, db: str | None) -> None:
    """Treasury agent killed mid-wire by SIGKILL, resumed in a new process: one wire."""
    from ..demo import run_demo  # here, not at the top: only the demo needs its bank's HTTP server

    sys.exit(run_demo(db or given_db(ctx)))  # `daybook --db URL demo` too


COMMANDS = (demo,)
