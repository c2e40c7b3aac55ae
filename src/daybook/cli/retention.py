"""The gc command: retention. Erase the payloads of finished runs past an age, keep the spine."""

from __future__ import annotations

import re
from typing import Any

import click

from .. import Daybook
from ..store.retention import MAX_RETENTION
from . import render
from .app import _ParamType, credential_option, json_option, json_out, say, with_book

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
@credential_option
@json_option("The pass as JSON.")
@with_book(read_only=lambda options: bool(options["dry_run"]))
def gc(
    book: Daybook, older_than: float, dry_run: bool, by: str | None, token: str | None, as_json: bool
) -> None:
    """Erase the payloads of finished runs older than --older-than; keep the audit spine. Runs
    paused for longer than that, and finished runs whose environment was kept that long, are
    expired.

    Kinds, keys, statuses, fingerprints and times stay, with a keyed digest of each payload;
    the pass is logged (who, when, cutoff, counts) in an append-only gc log."""
    done = book.gc(older_than, dry_run=dry_run, by=by, token=token)
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
        removed = f"; its workspace {run['environment']} removed" if run["removed"] else ""
        kept = f"; its workspace {run['environment']} kept" if run["environment"] and not removed else ""
        say(f"{'would expire' if dry_run else 'expired'} {run['from']} run {run['run_id']}{removed}{kept}")


COMMANDS = (gc,)
