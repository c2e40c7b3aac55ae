"""Commands on workflow code versions against stored runs: versions, replay-check."""

from __future__ import annotations

import sys

import click

from ..book import Daybook
from ..workflow import load_app
from . import render
from .app import EXIT_ERROR, json_out, with_book


@click.command()
@click.option("--json", "as_json", is_flag=True, help="JSON instead of a table.")
@with_book
def versions(book: Daybook, as_json: bool) -> None:
    """In-flight runs per workflow, code version and patch marker (when a marker can go)."""
    found = book.versions()
    if as_json:
        json_out(found)
        return
    if not found:
        click.echo("no runs")
        return
    rows = []
    for v in found:
        lacking = v["runs_without_marker"]
        markers = (
            ", ".join(f"{m}: {n} without" for m, n in lacking.items()) if isinstance(lacking, dict) else ""
        )
        rows.append([str(v["workflow"]), str(v["version"] or "-"), str(v["in_flight"]), markers or "-"])
    click.echo(render.table(["workflow", "version", "in flight", "patch markers"], rows))


@click.command("replay-check")
@click.argument("run_ids", nargs=-1)
@click.option(
    "--app",
    default=None,
    metavar="MODULE|FILE.py",
    help="Where the workflows are defined, if not importable from the stored reference.",
)
@click.option("--json", "as_json", is_flag=True, help="JSON instead of lines.")
@with_book
def replay_check(book: Daybook, run_ids: tuple[str, ...], app: str | None, as_json: bool) -> None:
    """Replay stored histories (default: all completed runs) against the current code."""
    if app:
        load_app(app)
    report = book.replay_check(list(run_ids) or None, app=app)
    if as_json:
        json_out(report)
    else:
        for row in report:
            click.echo(f"{row['state']:9} {row['run_id']}  {row.get('error', '')}".rstrip())
    bad = [r for r in report if r["state"] != "ok"]
    if bad:
        click.echo(f"{len(bad)} of {len(report)} histories do not replay cleanly", err=True)
        sys.exit(EXIT_ERROR)
    click.echo(f"{len(report)} histories replay cleanly", err=True)


COMMANDS = (versions, replay_check)
