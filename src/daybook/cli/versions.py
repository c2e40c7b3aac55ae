"""Commands on workflow code versions against stored runs: versions, replay-check."""

from __future__ import annotations

import sys
from typing import Any

import click

from .. import Daybook
from .app import EXIT_ERROR, apps_option, import_apps, json_option, json_out, listing, say, with_book


@click.command()
@json_option()
@with_book(read_only=True)
def versions(book: Daybook, as_json: bool) -> None:
    """In-flight runs per workflow, code version and patch marker (when a marker can go)."""
    listing(
        book.versions(),
        as_json,
        empty="no runs",
        headers=["workflow", "version", "in flight", "patch markers"],
        row=_version_row,
    )


def _version_row(v: dict[str, Any]) -> list[str]:
    lacking = v["runs_without_marker"]
    markers = ", ".join(f"{m}: {n} without" for m, n in lacking.items()) if isinstance(lacking, dict) else ""
    return [str(v["workflow"]), str(v["version"] or "-"), str(v["in_flight"]), markers or "-"]


@click.command("replay-check")
@click.argument("run_ids", nargs=-1)
@apps_option(
    "The module or script that defines the workflows (or list them in $DAYBOOK_APP); nothing "
    "else is imported, never a run's stored reference."
)
@json_option("JSON instead of lines.")
@with_book(read_only=True)
def replay_check(book: Daybook, run_ids: tuple[str, ...], apps: tuple[str, ...], as_json: bool) -> None:
    """Replay stored histories (default: all completed runs) against the current code. Each is
    ok, changed (another result), diverged (the code asks what the journal does not hold),
    raised (the code raises where the run did not) or not loaded (no --app defines it)."""
    import_apps(apps)
    report = book.replay_check(list(run_ids) or None, app=apps)
    if as_json:
        json_out(report)
    else:
        for row in report:
            say(f"{row['state']:10} {row['run_id']}  {row.get('error', '')}".rstrip())
    bad = [r for r in report if r["state"] not in ("ok", "erased")]  # erased: by gc, nothing to check
    if bad:
        say(f"{len(bad)} of {len(report)} histories do not replay cleanly", err=True)
        sys.exit(EXIT_ERROR)
    say(f"{len(report)} histories replay cleanly", err=True)


COMMANDS = (versions, replay_check)
