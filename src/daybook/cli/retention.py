"""The gc command: retention. Erase the payloads of finished runs past an age, keep the spine."""

from __future__ import annotations

import re
from typing import Any

import click

from .. import Daybook
from ..store.retention import MAX_RETENTION
from . import render
from .app import _ParamType, apps_option, credential_option, json_option, json_out, say, with_book

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86_400.0, "w": 7 * 86_400.0}


class Age(_ParamType):
    """An age: `30d`, `12h`, `90m`, `45s`, `2w`, or plain seconds."""

    name = "age"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, int | float):
            return float(value)
        found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", str(value))
        if not found:
            self.fail(f"{value!r} is not an age: give a number and a unit, e.g. 30d, 12h, 90m", param, ctx)
        seconds = float(found.group(1)) * _UNITS[found.group(2) or "s"]
        if seconds > MAX_RETENTION:
            self.fail(f"{value!r} is more than 100 years", param, ctx)
        return seconds


@click.command()
@click.option("--older-than", "older_than", required=True, type=Age(), help="Age, e.g. 30d, 12h, 90m.")
@click.option("--dry-run", is_flag=True, help="Count what would be erased; erase nothing.")
@click.option("--by", default=None, help="Who runs it, for the gc log (default: the OS user).")
@apps_option("The workflows' code, where expired runs' destroy hooks are found (else they wait).")
@credential_option
@json_option("The pass as JSON.")
@with_book(read_only=lambda options: bool(options["dry_run"]))
def gc(
    book: Daybook,
    older_than: float,
    dry_run: bool,
    by: str | None,
    apps: tuple[str, ...],
    token: str | None,
    as_json: bool,
) -> None:
    """Erase the payloads of finished runs older than --older-than; keep the audit spine. Runs
    paused for longer than that, and finished runs whose environment was kept that long, are
    expired.

    Kinds, keys, statuses, fingerprints and times stay, with a keyed digest of each payload;
    the pass is logged (who, when, cutoff, counts) in an append-only gc log."""
    done = book.gc(older_than, dry_run=dry_run, by=by, token=token, app=list(apps))
    if as_json:
        json_out(done)
        return
    verb = "would erase" if dry_run else "erased"
    say(
        f"{verb} the payloads of {done['runs']} finished run(s), {done['rows']} journal row(s), "
        f"last updated before {render.when(done['cutoff'])}"
        + ("" if dry_run else f" (gc {done['gc_id']} by {done['who']})")
    )
    if done.get("requests"):
        pending = f", {done['given_up']} of them given up undelivered first" if done.get("given_up") else ""
        say(f"{verb} the payloads of {done['requests']} approval request(s) in the outbox{pending}")
    if done.get("kept"):
        kept = ", ".join(done["kept"])
        say(f"kept {len(done['kept'])} finished run(s) an unfinished run still reads: {kept}")
    for run in done["expired"]:
        verb = "would expire" if dry_run else "expired"
        say(f"{verb} {run['from']} run {run['run_id']}{_fate(run, dry_run)}")


def _fate(run: dict[str, Any], dry_run: bool) -> str:
    """What became of an expired run's environment."""
    where = run["environment"]
    if not where:
        return ""
    if run.get("error"):
        error = run["error"]
        return f"; its environment {where} kept: its destroy hook failed ({error}); the next pass tries again"
    if run.get("awaiting_destroy"):
        return (
            f"; its environment {where} kept, awaiting destroy: the workflow's destroy hook "
            f"{run['destroy']!r} is not loaded here (pass the workflow's code with --app)"
        )
    if dry_run:
        hook = run.get("destroy")
        return f"; its environment {where} would be destroyed ({hook})" if hook else ""
    done = f"; its environment {where} destroyed" if run.get("destroyed") else ""
    gone = f"; its workspace {where} removed" if run["removed"] else ""
    return done + gone if done or gone else f"; its workspace {where} kept"


COMMANDS = (gc,)
