"""Commands on runs and their journals: runs, show, export, resume, signal, budget."""

from __future__ import annotations

import json

import click

from .. import Daybook, DaybookError, RunInfo, RunStatus
from ..book import MAX_LIMIT, MAX_SECONDS
from ..records import bounded
from . import render
from .app import (
    EXIT_ATTENTION,
    Bounded,
    app_option,
    by_option,
    fail,
    json_option,
    json_out,
    listing,
    with_book,
)


@click.command()
@click.option(
    "--status",
    type=click.Choice([s.value for s in RunStatus]),
    default=None,
    help="Only runs in this status.",
)
@click.option(
    "--limit",
    default=100,
    show_default=True,
    type=click.IntRange(1, MAX_LIMIT),
    help="At most this many runs.",
)
@json_option()
@with_book(read_only=True)
def runs(book: Daybook, status: str | None, limit: int, as_json: bool) -> None:
    """List runs, newest first."""
    listing(
        book.runs(status, limit),
        as_json,
        empty=f"no runs{' with status ' + status if status else ''} in {book.url}",
        headers=["run", "workflow", "status", "created", "updated", "lease"],
        row=_run_row,
        data=RunInfo.as_dict,
    )


def _run_row(r: RunInfo) -> list[str]:
    return [
        r.run_id,
        r.workflow,
        r.status,
        render.when(r.created_at),
        render.when(r.updated_at),
        r.lease_owner or "",
    ]


@click.command()
@click.argument("run_id")
@json_option("The journal as JSON (same as export).")
@with_book(read_only=True)
def show(book: Daybook, run_id: str, as_json: bool) -> None:
    """Show a run's journal as a table: seq, step, kind, name, key, status, timing, detail."""
    if as_json:
        json_out(book.export(run_id))
        return
    click.echo(render.journal(book.get_run(run_id), book.journal(run_id)))


@click.command()
@click.argument("run_id")
@click.option(
    "--raw",
    is_flag=True,
    help="Salvage a damaged run: rows that do not decode as stored, each with an error.",
)
@click.option(
    "--checkpoint",
    is_flag=True,
    help="The checkpoint document instead: executor, environment and progress state "
    "(schema: docs/checkpoint.schema.json).",
)
@with_book(read_only=True)
def export(book: Daybook, run_id: str, raw: bool, checkpoint: bool) -> None:
    """The run and its whole journal as JSON on stdout."""
    if checkpoint:
        if raw:
            fail("--checkpoint and --raw do not go together: salvage with --raw alone")
        json_out(book.checkpoint(run_id))
        return
    found = book.export(run_id, raw=raw)
    json_out(found)
    if raw and (found["run_error"] or found["damaged_rows"]):
        click.echo(
            f"salvaged run {run_id}: {found['damaged_rows']} row(s) do not decode and are given "
            "as stored (raw, error)" + (f"; its header: {found['run_error']}" if found["run_error"] else ""),
            err=True,
        )


@click.command()
@click.argument("run_id")
@click.option(
    "--wait",
    default=0.0,
    show_default=True,
    type=Bounded(lambda v: bounded(v, "wait (seconds)", low=0.0, high=MAX_SECONDS)),
    metavar="SECONDS",
    help="Wait this long for another process's lease on the run to expire.",
)
@app_option("Where the workflow is defined, if not importable from the stored reference.")
@with_book
def resume(book: Daybook, run_id: str, wait: float, app: str | None) -> None:
    """Resume a stopped run in this process; prints its result as JSON."""
    try:
        result = book.resume(run_id, wait=wait, app=app)
    except DaybookError as exc:
        # Whatever the error, if it left the run waiting for a person, say so by exit code.
        info = book.store.get_run(run_id)
        if info is not None and info.status == "needs_attention":
            fail(str(exc), EXIT_ATTENTION)
        raise
    json_out(result)


@click.command()
@click.argument("run_id")
@click.argument("name")
@click.option(
    "--payload", metavar="JSON", default="null", show_default=True, help="What the signal carries, as JSON."
)
@by_option("sends")
@with_book
def signal(book: Daybook, run_id: str, name: str, payload: str, by: str | None) -> None:
    """Send signal NAME to a run; it wakes the run if it is suspended waiting for it."""
    try:
        value = json.loads(payload)
    except ValueError as exc:
        fail(f"--payload is not JSON: {exc}")
    inbox_id = book.signal(run_id, name, value, sender=by)
    click.echo(f"signal {name!r} #{inbox_id} sent to {run_id}")


@click.command()
@click.argument("run_id")
@click.option(
    "--raise",
    "raise_",
    default=None,
    metavar="NAME=AMOUNT[,NAME=AMOUNT]",
    help="Raise caps (journaled; applied when the run next needs it), e.g. usd=10.",
)
@by_option("raises")
@with_book(read_only=lambda options: not options["raise_"])
def budget(book: Daybook, run_id: str, raise_: str | None, by: str | None) -> None:
    """Show a run's budget (spent against caps), or raise a cap."""
    if raise_:
        amounts: dict[str, float] = {}
        try:
            for part in raise_.split(","):
                name, value = part.split("=", 1)
                amounts[name.strip()] = float(value)
        except ValueError:
            fail(f"--raise takes NAME=AMOUNT pairs, got {raise_!r}")
        signal_id = book.raise_budget(run_id, by=by, **amounts)
        click.echo(f"raise #{signal_id} sent to {run_id}: {amounts}")
        return
    state = book.budget(run_id)
    names = sorted(set(state["caps"]) | set(state["spent"]))
    if not names:
        click.echo(f"run {run_id} has no budget")
        return
    rows = [
        [n, f"{state['spent'].get(n, 0.0):g}", f"{state['caps'][n]:g}" if n in state["caps"] else "-"]
        for n in names
    ]
    click.echo(render.table(["quantity", "spent", "cap"], rows))


COMMANDS = (runs, show, export, resume, signal, budget)
