"""Workspaces from the command line: `daybook rewind` (a run's checkout back to after a step,
on a journal branch) and `daybook snapshots` (the snapshots a run's hidden git ref holds)."""

from __future__ import annotations

from typing import Any

import click

from .. import Daybook, Rewind
from ..workspace import snapshot
from . import render
from .app import by_option, credential_option, json_option, json_out, say, with_book


@click.command()
@click.argument("run_id")
@click.option(
    "--to", "to", type=int, required=True, help="The step to go back to (0: before the first edit)."
)
@click.option(
    "--force", is_flag=True, help="Overwrite paths changed after the run's last edit (not its own)."
)
@click.option("--dry-run", is_flag=True, help="Say what would be restored; change nothing.")
@by_option("rewinds")
@json_option("The rewind as JSON.")
@credential_option
@with_book
def rewind(book: Daybook, run_id: str, to: int, as_json: bool, **call: Any) -> None:
    """Put the files RUN_ID edited (through a daybook.Checkout) back as they were after step
    --to, and make the run pending on a journal branch: the steps after it run again on its
    next resume (a worker, or `daybook resume`). Ignored paths (dependencies, .env, build
    output) are live state: listed, never restored."""
    done = book.rewind(run_id, to, **call)  # call: force, dry_run, by, token
    if as_json:
        json_out(done.as_dict())
        return
    _say(done)


def _say(done: Rewind) -> None:
    mode = "would rewind" if done.dry_run else "rewound"
    say(f"{done.run_id}: {mode} to after step {done.to} (journal branch {done.branch})")
    for root, where in done.checkouts.items():
        say(f"  {root}: snapshot {str(where['snapshot'])[:12]} (step {where['step']}) on {where['ref']}")
    say(f"  restored: {', '.join(done.restored) or 'nothing'}")
    say(f"  removed: {', '.join(done.removed) or 'nothing'}")
    if done.unchanged:
        say(f"  already so: {', '.join(done.unchanged)}")
    say(f"  not restored (ignored, live state): {', '.join(done.live) or 'none'}")
    if not done.exact:
        say("  that step's snapshot was compacted and pruned by git: the files are as of the step above")
    steps = f"{done.superseded[0]}..{done.superseded[-1]}" if done.superseded else "none"
    soft = f"; effects outside the workspace replay, not repeat: steps {done.soft}" if done.soft else ""
    say(f"  steps run again: {steps}{soft}")
    if not done.dry_run:
        say(
            f"the run is pending: `daybook resume {done.run_id}` (or a worker) goes on from step "
            f"{done.to + 1}"
        )


@click.command()
@click.argument("run_id")
@click.argument("checkout", type=click.Path(exists=True, file_okay=False))
@json_option("The snapshots as JSON.")
@with_book(read_only=True)
def snapshots(book: Daybook, run_id: str, checkout: str, as_json: bool) -> None:
    """The snapshots RUN_ID's edits left in CHECKOUT (its hidden ref), oldest first, each with
    its step, decision, the bytes it touched and what the steps since the one before cost
    (model tokens, USD, seconds); then the ref's reflog, newest first."""
    rows = book.snapshots(run_id, checkout)
    root = snapshot.top(checkout)
    if as_json:
        json_out({"snapshots": rows, "reflog": snapshot.reflog(root, run_id)})
        return
    keys = ("step", "commit", "decision", "bytes", "files", "tokens", "usd", "seconds")
    table = [
        [str(r[k] if r[k] is not None else "")[: 12 if k == "commit" else None] for k in keys] for r in rows
    ]
    say(render.table(["step", "snapshot", "decision", "bytes", "files", "tokens", "usd", "seconds"], table))
    for line in snapshot.reflog(root, run_id):
        say(f"  {line}")


COMMANDS = [rewind, snapshots]
