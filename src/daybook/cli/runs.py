"""Commands on runs and their journals: runs, show, export, resume, signal, budget."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import click

from .. import Daybook, DaybookError, RunInfo, RunStatus
from ..book import MAX_LIMIT
from ..coordination.budget import paused_at, paused_at_cap, paused_below, pending_raises
from ..records import MAX_SECONDS, bounded
from ..runtime.tree import descendants
from . import render
from .app import (
    EXIT_ATTENTION,
    Bounded,
    apps_option,
    by_option,
    credential_option,
    fail,
    import_apps,
    json_option,
    json_out,
    listing,
    say,
    with_book,
)


def search_options(fn: Any) -> Any:
    """The run search filters of `daybook runs` (as `Daybook.runs` takes them)."""
    for option in reversed(
        [
            click.option("--workflow", default=None, help="Only runs of this workflow."),
            click.option(
                "--since", default=None, metavar="TIME", help="Created at or after (ISO 8601, epoch)."
            ),
            click.option("--until", default=None, metavar="TIME", help="Created before (ISO 8601 or epoch)."),
            click.option("--parent", default=None, metavar="RUN_ID", help="Only children of this run."),
            click.option("--queue", default=None, metavar="NAME", help="Only runs of this queue."),
            click.option(
                "--attr",
                "attrs",
                multiple=True,
                metavar="NAME=VALUE",
                help="A search attribute it set (repeatable; VALUE is JSON if it parses, else text).",
            ),
            click.option("--cursor", default=None, help="Continue after the page that printed it."),
        ]
    ):
        fn = option(fn)
    return fn


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
@search_options
@json_option()
@with_book(read_only=True)
def runs(book: Daybook, status: str | None, limit: int, as_json: bool, **search: Any) -> None:
    """List runs, newest first; filter them, and page with --cursor."""
    attributes = dict(_attribute(a) for a in search.pop("attrs"))
    page = book.runs(status, limit, attributes=attributes or None, **search)
    capped = _at_cap(book, page)

    def row(r: RunInfo) -> list[str]:
        cells = _run_row(r)
        if r.run_id in capped:
            cells[2] = f"{r.status} (budget cap)"  # what it waits for: `daybook budget RUN`
        return cells

    def data(r: RunInfo) -> dict[str, Any]:
        # Added for a run waiting at a cap (what `daybook budget RUN` prints); the document of
        # any other run is the one it always was.
        out = r.as_dict()
        return {**out, "budget_paused": capped[r.run_id]} if r.run_id in capped else out

    listing(
        page,
        as_json,
        empty=f"no runs{' with status ' + status if status else ''} in {book.url}",
        headers=["run", "workflow", "status", "created", "updated", "lease"],
        row=row,
        data=data,
    )
    if page.cursor:
        say(f"more: daybook runs ... --cursor {page.cursor}", err=True)


def _at_cap(book: Daybook, found: Sequence[RunInfo]) -> dict[str, str]:
    """The suspended runs listed that wait at a budget cap (theirs, or an ancestor's for the
    tree), each with what it was told to do; only suspended runs' journals are read."""
    capped: dict[str, str] = {}
    for r in found:
        if r.status == RunStatus.SUSPENDED:
            try:
                said = paused_at_cap(book.journal(r.run_id)) or _waiting_below(book, r.run_id)
            except DaybookError:
                # A damaged journal, or one this handle has no codec for: the run is still
                # listed (flagged as the listing flags it), only without the reason it waits.
                continue
            if said:
                capped[r.run_id] = said
    return capped


def _waiting_below(book: Daybook, run_id: str) -> str | None:
    """What the first run below `run_id` waiting at its cap was told (a run that drives a
    LangGraph graph waits with its model call's run, which holds the pause)."""
    for below in paused_below(book.store, run_id):
        said = paused_at_cap(book.journal(below))
        if said:
            return said
    return None


def _attribute(text: str) -> tuple[str, Any]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise click.UsageError(f"--attr takes NAME=VALUE, e.g. --attr customer=acme; got {text!r}")
    try:
        return name, json.loads(value)
    except ValueError:
        return name, value


def _run_row(r: RunInfo) -> list[str]:
    return [
        r.run_id,
        r.workflow,
        r.status,
        render.when(r.created_at),
        render.when(r.updated_at),
        render.lease(r),
    ]


@click.command()
@click.argument("run_id")
@json_option("The journal as JSON (same as export).")
@click.option(
    "--width",
    type=click.IntRange(0, 10_000),
    default=None,
    metavar="COLUMNS",
    help="Fit the table to this many columns (0: no limit). Default: the terminal's width; "
    "whole lines when the output is not a terminal.",
)
@with_book(read_only=True)
def show(book: Daybook, run_id: str, as_json: bool, width: int | None) -> None:
    """Show a run's journal as a table: seq, step, kind, name, key, status, timing, detail."""
    if as_json:
        json_out(book.export(run_id))
        return
    fit = render.TERMINAL if width is None else width
    info = book.get_run(run_id)
    say(render.journal(info, book.journal(run_id), fit, _tree(book, run_id)))


def _tree(book: Daybook, run_id: str) -> list[tuple[int, RunInfo]]:
    """The run's child runs, each with its depth below it (parents before children)."""
    depth = {run_id: 0}
    out = []
    for kid in descendants(book.store, run_id):
        depth[kid.run_id] = depth.get(kid.parent_run or "", 0) + 1
        out.append((depth[kid.run_id] - 1, kid))
    return out


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
            raise click.UsageError("--checkpoint and --raw do not go together: salvage with --raw alone")
        json_out(book.checkpoint(run_id))
        return
    found = book.export(run_id, raw=raw)
    json_out(found)
    if raw and (found["run_error"] or found["damaged_rows"]):
        say(
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
@apps_option(
    "The module or script that defines the run's workflow (or list it in $DAYBOOK_APP); the "
    "run's stored reference is shown in the error, never imported."
)
@with_book
def resume(book: Daybook, run_id: str, wait: float, apps: tuple[str, ...]) -> None:
    """Resume a stopped run in this process; prints its result as JSON."""
    import_apps(apps)
    try:
        result = book.resume(run_id, wait=wait, app=apps)
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
@credential_option
@with_book
def signal(book: Daybook, run_id: str, name: str, payload: str, by: str | None, token: str | None) -> None:
    """Send signal NAME to a run; it wakes the run if it is suspended waiting for it. A
    registered approver's name as --by needs its key; any other is journaled unauthenticated."""
    try:
        value = json.loads(payload)
    except ValueError as exc:
        raise click.BadParameter(f"is not JSON: {exc}", param_hint="'--payload'") from None
    inbox_id = book.signal(run_id, name, value, sender=by, token=token)
    say(f"signal {name!r} #{inbox_id} sent to {run_id}")


@click.command()
@click.argument("run_id")
@click.option(
    "--raise",
    "raise_",
    default=None,
    metavar="NAME=AMOUNT[,NAME=AMOUNT]",
    help="Raise caps (journaled; applied when the run next needs it), e.g. usd=10.",
)
@click.option(
    "--stop",
    is_flag=True,
    help="Answer a run paused at a cap with no: cancel it (as `daybook cancel`).",
)
@by_option("raises")
@credential_option
@json_option("JSON instead of a table: {caps, spent, paused} (with --raise: {signal, raised}).")
@with_book(read_only=lambda options: not options["raise_"] and not options["stop"])
def budget(
    book: Daybook,
    run_id: str,
    raise_: str | None,
    stop: bool,
    by: str | None,
    token: str | None,
    as_json: bool,
) -> None:
    """Show a run's budget (spent against caps, and whether it is paused at a cap), raise a cap
    (a registered approver's name as --by needs its key and the operator role), or stop a run
    paused at a cap (`--stop`: it is cancelled)."""
    if raise_ and stop:
        raise click.UsageError("give --raise (go on) or --stop (cancel the run), not both")
    if stop:
        book.cancel(run_id, by=by, token=token)
        if as_json:
            json_out({"stopped": run_id})
        else:
            say(f"run {run_id} stopped at its budget: cancelled")
        return
    if raise_:
        amounts = _amounts(raise_)
        events = book.journal(run_id)
        # A run only its parent continues, at an ancestor's cap: the raise goes to the cap's run.
        owner = paused_at(events) if paused_at(events, woken=True) is None else None
        signal_id = book.raise_budget(run_id, by=by, token=token, **amounts)
        if as_json:
            json_out({"signal": signal_id, "raised": amounts})
        else:
            to = f"{owner} (the run whose cap {run_id} waits at)" if owner else run_id
            say(f"raise #{signal_id} sent to {to}: {amounts}")
        return
    _show_budget(book, run_id, as_json)


def _show_budget(book: Daybook, run_id: str, as_json: bool) -> None:
    """Spent against caps, and what a run paused at a cap waits for."""
    state = book.budget(run_id)
    paused = paused_at_cap(book.journal(run_id)) if book.get_run(run_id).status == "suspended" else None
    if as_json:
        # `paused` only when the run waits at a cap: the document for a run that does not is
        # the one it always was.
        json_out({**state, "paused": paused} if paused else state)
        return
    below = descendants(book.store, run_id)
    tree = dict(state["spent"])  # a cap holds across the runs below too: show what they spent
    for run in below:
        for n, v in book.budget(run.run_id)["spent"].items():
            tree[n] = tree.get(n, 0.0) + v
    names = sorted(set(state["caps"]) | set(state["spent"]) | set(tree))
    journal = book.journal(run_id)
    taken = {int(e.data["inbox_id"]) for e in journal if e.kind == "signal" and "inbox_id" in e.data}
    sent = pending_raises(book.store, run_id, taken)  # raises the run has not taken yet

    def cap(n: str) -> str:
        shown = f"{state['caps'][n]:g}" if n in state["caps"] else "-"
        return f"{shown} (+{sent[n]:g} sent)" if n in sent else shown

    if names:
        rows = [
            [n, f"{state['spent'].get(n, 0.0):g}"] + ([f"{tree.get(n, 0.0):g}"] if below else []) + [cap(n)]
            for n in names
        ]
        say(render.table(["quantity", "spent", *(["with runs below"] if below else []), "cap"], rows))
    elif not paused:
        say(f"run {run_id} has no budget")
    if paused:  # a child paused at an ancestor's cap may have no budget of its own
        say(paused)
    for waiting in paused_below(book.store, run_id):
        said = paused_at_cap(book.journal(waiting)) or ""
        say(f"run {waiting} waits at this run's cap for its tree: {said}")


def _amounts(text: str) -> dict[str, float]:
    """`usd=10,calls=5` as {name: amount}: each name non-empty (and not `by`, the facade's own
    keyword), each amount a finite number above zero (anything else is a usage error, exit 2)."""
    amounts: dict[str, float] = {}
    for part in text.split(","):
        name, eq, value = part.partition("=")
        try:
            amount = float(value)
        except ValueError:
            amount = math.nan
        if not eq or name.strip() in ("", "by") or not math.isfinite(amount) or amount <= 0:
            raise click.BadParameter(
                f"takes NAME=AMOUNT pairs (a name, and a finite amount > 0), e.g. usd=10; got {part!r}",
                param_hint="'--raise'",
            )
        amounts[name.strip()] = amount
    return amounts


COMMANDS = (runs, show, export, resume, signal, budget)
