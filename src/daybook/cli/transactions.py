"""The orphans command: staged records of transactions that never committed, and sweeping them."""

from __future__ import annotations

import click

from .. import Daybook
from ..book import MAX_SWEEP
from ..records import bounded
from . import render
from .app import Bounded, with_book


@click.command()
@click.option(
    "--sweep",
    "sweep",
    default=None,
    type=Bounded(lambda v: bounded(v, "seconds", low=0.0, high=MAX_SWEEP)),
    metavar="SECONDS",
    help="Delete orphaned staging areas older than this.",
)
@with_book(read_only=lambda options: options["sweep"] is None)
def orphans(book: Daybook, sweep: float | None) -> None:
    """Staged records of transactions that never committed; --sweep deletes old ones."""
    if sweep is not None:
        click.echo(f"swept {book.sweep_orphans(sweep)} abandoned transaction(s)")
        return
    found = book.orphans()
    if not found:
        click.echo("no orphans")
        return
    rows = [[str(o["txid"]), str(o["collection"]), str(o["record_id"]), render.when(o["at"])] for o in found]
    click.echo(render.table(["transaction", "collection", "record", "staged"], rows))


COMMANDS = (orphans,)
