"""Transactions from the command line: `orphans` (staged records of atomic commits that never
committed, and sweeping them), `tx` (Atomix transactions: epoch, scopes, status, attempt; `tx
release` frees an attempt's scopes) and `frontiers` (what each open transaction holds, and what
waits on it)."""

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


class _TxGroup(click.Group):
    """`daybook tx [RUN]` lists attempts; `daybook tx release ATTEMPT ...` releases one. A first
    argument that names no subcommand is the listing's (a run id, an option)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in ctx.help_option_names):
            args = ["list", *args]
        return super().parse_args(ctx, args)


@click.group(name="tx", cls=_TxGroup)
def tx() -> None:
    """Atomix transactions: `daybook tx [RUN]` lists every attempt by epoch (run, scopes,
    status, attempt/retries); `daybook tx release ATTEMPT --as NAME --reason TEXT` releases an
    attempt that holds its scopes with no execution to finish it."""


@tx.command(name="list", hidden=True)
@click.argument("run_id", required=False)
@json_option()
@with_book(read_only=True)
def tx_list(book: Daybook, run_id: str | None, as_json: bool) -> None:
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


@tx.command(name="release")
@click.argument("tx_id", metavar="ATTEMPT")
@click.option("--as", "by", required=True, metavar="NAME", help="Who releases it (journaled).")
@click.option("--reason", required=True, metavar="TEXT", help="Why (journaled).")
@json_option()
@with_book
def tx_release(book: Daybook, tx_id: str, by: str, reason: str, as_json: bool) -> None:
    """Release an open attempt (its header `aborted`, a `tx_released` row in its run's journal)
    so it stops holding its scopes; refused while a live process executes its run. If the run
    executes again, it aborts the attempt (inverses run once) and retries under a fresh epoch."""
    done = book.release_transaction(tx_id, by=by, reason=reason)
    if as_json:
        json_out(done)
        return
    say(
        f"released transaction {tx_id} (run {done['run_id']}, epoch {done['epoch']}, was "
        f"{done['from']}): its scopes are free; what it ran now stands until its run aborts it "
        f"(`daybook resume {done['run_id']}`) or a person undoes it"
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
