"""The tools command: the counterparty profile of every registered tool."""

from __future__ import annotations

import click

from ..tool import registered as registered_tools
from ..workflow import load_app
from . import render
from .app import json_out


@click.command()
@click.option(
    "--app",
    "apps",
    multiple=True,
    metavar="MODULE|FILE.py",
    help="Import this module or script first so its tools are registered (repeatable).",
)
@click.option("--json", "as_json", is_flag=True, help="JSON instead of a table.")
def tools(apps: tuple[str, ...], as_json: bool) -> None:
    """Counterparty profiles of the registered tools: keys, dedup window, status query, inverse,
    effect class, and whether the agent loop gates them by default."""
    for app in apps:
        load_app(app)
    found = [t.profile() for t in registered_tools()]
    if as_json:
        json_out(found)
        return
    if not found:
        click.echo("no tools registered; pass --app MODULE to import the code that declares them")
        return
    rows = [
        [
            str(p["name"]),
            str(p["effect_class"]),
            "buffered" if p["bufferable"] else "now",
            "yes" if p["accepts_keys"] else "no",
            "-" if p["dedup_window"] is None else f"{p['dedup_window']:g}s",
            ",".join(
                n
                for n, on in (
                    ("status", p["status_query"]),
                    ("lookup", p["lookup_by_reference"]),
                    ("verify", p["verify"]),
                )
                if on
            )
            or "-",
            str(p["inverse"] or "-"),
            "gated" if p["gated_by_default"] else "-",
        ]
        for p in found
    ]
    click.echo(
        render.table(["tool", "class", "when", "keys", "window", "asks by", "inverse", "default"], rows)
    )


COMMANDS = (tools,)
