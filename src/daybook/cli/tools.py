"""The tools command: the counterparty profile of every registered tool."""

from __future__ import annotations

from typing import Any

import click

from ..journal.tool import registered as registered_tools
from .app import apps_option, db_option, import_apps, json_option, listing


@click.command()
@apps_option("Import this module or script first so its tools are registered.")
@json_option()
@db_option
def tools(apps: tuple[str, ...], as_json: bool, db: str | None) -> None:
    """Counterparty profiles of the registered tools: keys, dedup window, status query, inverse,
    effect class, and whether the agent loop gates them by default. (--db is accepted like on
    every command; the profiles come from the code, not the store.)"""
    import_apps(apps)
    listing(
        [t.profile() for t in registered_tools()],
        as_json,
        empty="no tools registered; pass --app MODULE to import the code that declares them",
        headers=["tool", "class", "in tx", "keys", "window", "asks by", "inverse", "default"],
        row=_profile_row,
    )


def _profile_row(p: dict[str, Any]) -> list[str]:
    asks = [("status", p["status_query"]), ("lookup", p["lookup_by_reference"]), ("verify", p["verify"])]
    return [
        str(p["name"]),
        str(p["effect_class"]),
        str(p["in_transaction"]),
        "yes" if p["accepts_keys"] else "no",
        "-" if p["dedup_window"] is None else f"{p['dedup_window']:g}s",
        ",".join(n for n, on in asks if on) or "-",
        str(p["inverse"] or "-"),
        "gated by agent loop" if p["gated_by_agent_loop"] else "-",
    ]


COMMANDS = (tools,)
