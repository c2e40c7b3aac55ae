"""Commands that change where a run is in its life, from outside its code: retry, cancel, pause."""

from __future__ import annotations

import click

from .. import Daybook, RunStatus
from .app import (
    apps_option,
    by_option,
    credential_option,
    import_apps,
    json_out,
    parked_exit,
    resume_hint,
    say,
    with_book,
)


@click.command()
@click.argument("run_id")
@apps_option(
    "The module or script that defines the workflow, after the fix (or list it in $DAYBOOK_APP); "
    "the run's stored reference is never imported."
)
@by_option("retries")
@click.option(
    "--submit",
    is_flag=True,
    help="Only mark the run due; a worker (`daybook worker`) runs it. Default: run it here.",
)
@credential_option
@with_book
def retry(
    book: Daybook, run_id: str, apps: tuple[str, ...], by: str | None, submit: bool, token: str | None
) -> None:
    """Continue a failed, parked or stuck run from its journal after a code fix.

    Confirmed effects and recorded decisions are replayed, never repeated; the step that raised
    runs again. Journaled with who asked. Prints the result as JSON (or, with --submit, that
    the run is due for a worker)."""
    import_apps(apps)
    with parked_exit(book, run_id):
        result = book.retry(run_id, by=by, app=apps, submit=submit, token=token)
    if submit:
        say(f"run {run_id} is due again: a worker (`daybook worker`) picks it up")
        return
    json_out(result)


@click.command()
@click.argument("run_id")
@click.option(
    "--compensate",
    is_flag=True,
    help="Also undo the run's confirmed effects, newest first, with each tool's inverse (once).",
)
@apps_option("The module or script that defines the workflow and its tools (needed with --compensate).")
@by_option("cancels")
@credential_option
@with_book
def cancel(
    book: Daybook, run_id: str, compensate: bool, apps: tuple[str, ...], by: str | None, token: str | None
) -> None:
    """End a run for good (status `cancelled`), journaled with who asked.

    With --compensate, its confirmed effects are unwound as `ctx.compensate` does; if one cannot
    be undone the command says what remains and exits 3. Run it again to finish an unwind a
    crash interrupted: nothing is undone twice."""
    import_apps(apps)
    before = book.get_run(run_id).status
    report = book.cancel(run_id, compensate, by=by, app=apps, token=token)
    if report is None:
        was = "was already" if before == RunStatus.CANCELLED else "is"
        say(f"run {run_id} {was} cancelled; nothing was undone (--compensate undoes its effects)")
        return
    json_out(
        {
            "run_id": run_id,
            "status": "cancelled",
            "compensated": report.compensated,
            "stuck": report.stuck,
            "no_inverse": report.no_inverse,
        }
    )


@click.command()
@click.argument("run_id")
@by_option("pauses")
@credential_option
@with_book
def pause(book: Daybook, run_id: str, by: str | None, token: str | None) -> None:
    """Pause a run: at once if no process executes it, else at its next step boundary (an act in
    flight finishes and is journaled first). Workers leave it alone; `daybook resume RUN` goes
    on from its last committed step, from any process, any time."""
    done = book.pause(run_id, by=by, token=token)
    if done == "requested":
        say(
            f"pause requested: run {run_id} stops at its next step boundary, within "
            f"{book.lease_ttl / 3:.0f} s of its owner's next heartbeat; `daybook show {run_id}` "
            "then says `paused`"
        )
    else:
        was = "was already" if done == "already" else "is"
        say(f"run {run_id} {was} paused; {resume_hint(book, run_id)} goes on from its last step")


COMMANDS = (retry, cancel, pause)
