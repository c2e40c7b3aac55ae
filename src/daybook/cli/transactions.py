"""The orphans command: staged records of transactions that never committed, and sweeping them."""

from __future__ import annotations

import click

from .. import Daybook
from ..book import MAX_SWEEP
from ..records import bounded
from . import render
from .app import Bounded, json_option, json_out, listing, say, with_book


@click.command()
@click.option(
    "--sweep",
    "sweep",
    default=None,
    type=Bounded(lambda v: bounded(v, "seconds", low=0.0, high=MAX_SWEEP)),
    metavar="SECONDS",
    help="Delete orphaned staging areas older than this.",
)
@json_option()
@with_book(read_only=lambda options: options["sweep"] is None)
def orphans(book: Daybook, sweep: float | None, as_json: bool) -> None:
    """Staged records of transactions that never committed; --sweep deletes old ones."""
    if sweep is not None:
        swept = book.sweep_orphans(sweep)
        if as_json:
            json_out({"swept": swept})
        else:
            say(f"swept {swept} abandoned transaction(s)")
        return
    listing(
        book.orphans(),
        as_json,
        empty="no orphans",
        headers=["transaction", "collection", "record", "staged"],
        row=lambda o: [str(o["txid"]), str(o["collection"]), str(o["record_id"]), render.when(o["at"])],
    )


COMMANDS = (orphans,)
