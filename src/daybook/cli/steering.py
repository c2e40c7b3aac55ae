"""`daybook steer`: revise a live run by addition, revision or retraction, and see it acknowledged."""

from __future__ import annotations

import click

from .. import Daybook
from ..book import MAX_SECONDS
from ..records import bounded
from .app import Bounded, json_option, json_out, say, with_book


@click.command()
@click.argument("run_id")
@click.argument("kind", type=click.Choice(["add", "revise", "retract"]))
@click.argument("text")
@click.option("--as", "author", default=None, metavar="NAME", help="Who steers (default: the OS user).")
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
) -> None:
    """Steer a live run: add ("also include X"), revise ("8000 words, not 6000") or retract
    ("skip the translation"). The revision is journaled in order with its author; the run reads
    it at its next step boundary and acknowledges it, which this command waits for."""
    ack = book.steer(run_id, kind, text, author=author, target=target, wait=wait)
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


COMMANDS = (steer,)
