"""Transactions from the command line: `orphans` (staged records of atomic commits that never
committed, and sweeping them), `tx` (Atomix transactions: epoch, scopes, status, attempt) and
`frontiers` (what each open transaction holds, and what waits on it)."""

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


@click.command(name="tx")
@click.argument("run_id", required=False)
@json_option()
@with_book(read_only=True)
def tx(book: Daybook, run_id: str | None, as_json: bool) -> None:
    """Atomix transactions (every attempt), by epoch: run, scopes, status, attempt/retries."""
    listing(
        book.transactions(run_id),
        as_json,
        empty=f"no transactions in {book.url}" + (f" for run {run_id!r}" if run_id else ""),
        headers=["epoch", "run", "transaction", "scopes", "status", "attempt", "updated"],
        row=lambda t: [
            str(t["epoch"]),
            str(t["run_id"]),
            str(t["tx_id"]),
            " ".join(t["scopes"]),
            str(t["status"]),
            f"{t['attempt']}/{int(t['retries']) + 1}",
            render.when(t["updated_at"]),
        ],
    )


@click.command()
@json_option()
@with_book(read_only=True)
def frontiers(book: Daybook, as_json: bool) -> None:
    """Each scope an open transaction holds: its frontier, the transaction that holds it (the
    one that stalls the later ones) and the transactions waiting on it."""
    listing(
        book.frontiers(),
        as_json,
        empty=f"no open transactions in {book.url}: every frontier is clear",
        headers=["scope", "frontier", "held by", "run", "status", "waiting"],
        row=lambda f: [
            str(f["scope"]),
            str(f["frontier"]),
            str(f["held_by"]["tx_id"]),
            str(f["held_by"]["run_id"]),
            str(f["held_by"]["status"]),
            ", ".join(f"{w['tx_id']} (epoch {w['epoch']})" for w in f["waiting"]) or "-",
        ],
    )


COMMANDS = (orphans, tx, frontiers)
