"""Steering a run: `daybook steer` (revise it live, see it acknowledged) and `daybook fork` (edit a
past turn)."""

from __future__ import annotations

import json
from typing import Any

import click

from .. import Daybook
from ..records import MAX_SECONDS, bounded
from . import render
from .app import (
    Bounded,
    apps_option,
    credential_option,
    import_apps,
    json_option,
    json_out,
    resume_hint,
    say,
    with_book,
)


@click.command()
@click.argument("run_id")
@click.argument("kind", type=click.Choice(["add", "revise", "retract"]))
@click.argument("text")
@click.option(
    "--as",
    "author",
    default=None,
    metavar="NAME",
    help="Who steers (default: the OS user); a registered approver's name needs its key.",
)
@click.option(
    "--target",
    default=None,
    help="What it is about (a step, a topic): opposite revisions of one target conflict.",
)
@click.option(
    "--wait",
    default=10.0,
    show_default=True,
    type=Bounded(lambda v: bounded(v, "wait (seconds)", low=0.0, high=MAX_SECONDS)),
    metavar="SECONDS",
    help="How long to wait for the run to acknowledge it.",
)
@json_option("The acknowledgement as JSON.")
@credential_option
@with_book
def steer(
    book: Daybook,
    run_id: str,
    kind: str,
    text: str,
    author: str | None,
    target: str | None,
    wait: float,
    as_json: bool,
    token: str | None,
) -> None:
    """Steer a live run: add ("also include X"), revise ("8000 words, not 6000") or retract
    ("skip the translation"). The revision is journaled in order with its author; the run reads
    it at its next step boundary and acknowledges it, which this command waits for."""
    ack = book.steer(run_id, kind, text, author=author, target=target, wait=wait, token=token)
    if as_json:
        json_out(ack)
        return
    if not ack["acked"]:
        say(
            f"revision #{ack['id']} queued for run {run_id}; not acknowledged within {wait:g} s: "
            "the run reads it at its next step boundary (is it running? `daybook show "
            f"{run_id}`)"
        )
        return
    say(f"revision #{ack['id']} acknowledged by run {run_id} at step {ack['step']}")
    for conflict in ack["conflicts"] or []:
        say(f"conflict: revisions {conflict['ids']} pull target {conflict['target']!r} two ways")


@click.command()
@click.argument("run_id")
@click.option("--at", "at", type=int, required=True, help="The last step the fork shares with RUN.")
@click.option(
    "--input",
    "input_",
    default=None,
    metavar="JSON",
    help='The edited input: {"args": [...], "kwargs": {...}} or a list of args (default: RUN\'s).',
)
@click.option("--run-id", "new_run_id", default=None, help="The fork's run id (default RUN~fork-<hex>).")
@click.option(
    "--confirm", is_flag=True, help="Fork although RUN made effects after STEP that cannot be undone."
)
@click.option("--keep-original", is_flag=True, help="A what-if fork: undo nothing RUN did after STEP.")
@click.option("--by", default=None, help="Who forks it (default: the OS user).")
@credential_option
@apps_option("The module or script defining RUN's tools, so their classes can be told and undone.")
@json_option("The fork's id and the later effects as JSON.")
@with_book
def fork(
    book: Daybook,
    run_id: str,
    at: int,
    input_: str | None,
    new_run_id: str | None,
    confirm: bool,
    keep_original: bool,
    by: str | None,
    token: str | None,
    apps: tuple[str, ...],
    as_json: bool,
) -> None:
    """Edit a past turn: start a new run sharing RUN's journal up to step --at (replayed, never
    re-fired), then going on with the same or an edited input. What RUN did after that step is
    undone first where it can be (compensable acts, by their inverses, once) and listed; effects
    that cannot be undone block the fork until --confirm, and the fork never repeats them."""
    args, kwargs = _edited(input_)
    import_apps(apps)  # the tools it registers say which later effects can be undone
    fork_id, later = book.fork(
        run_id,
        at,
        args=args,
        kwargs=kwargs,
        new_run_id=new_run_id,
        confirm=confirm,
        by=by,
        undo=not keep_original,
        app=apps,
        token=token,
    )
    if as_json:
        json_out({"run_id": fork_id, "later_effects": later})
        return
    say(f"forked {run_id} at step {at} as {fork_id} (pending): run it with {resume_hint(book, fork_id)}")
    if later:
        say(f"what {run_id} did after step {at}:")
        say(_later_table(later))


def _later_table(later: list[dict[str, Any]]) -> str:
    """The original's later acts, and whether each was undone or stands in the world."""
    columns = ("step", "tool", "key", "status", "class")
    rows = [[*(str(e[c]) for c in columns), "undone" if e.get("undone") else "stands"] for e in later]
    return render.table([*columns, "now"], rows)


def _edited(text: str | None) -> tuple[list[Any] | None, dict[str, Any] | None]:
    if text is None:
        return None, None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--input") from None
    if isinstance(value, list):
        return value, {}
    if isinstance(value, dict) and set(value) <= {"args", "kwargs"}:
        args, kwargs = value.get("args", []), value.get("kwargs", {})
        if isinstance(args, list) and isinstance(kwargs, dict):
            return args, kwargs
    raise click.BadParameter('give {"args": [...], "kwargs": {...}} or a list of args', param_hint="--input")


COMMANDS = (steer, fork)
