"""Queues and schedules from the command line: queues, schedule (add, ls, rm, pause, resume)."""

from __future__ import annotations

import json

import click

from .. import Daybook, Queue, Schedule
from . import render
from .app import SafeGroup, apps_option, fail, import_apps, json_option, listing, say, with_book


@click.command()
@json_option()
@with_book(read_only=True)
def queues(book: Daybook, as_json: bool) -> None:
    """Queues with their limits and how many of their runs wait and execute now."""
    listing(
        book.queues(),
        as_json,
        empty=f"no queues in {book.url}",
        headers=["queue", "concurrency", "per worker", "rate", "pending", "executing"],
        row=_queue_row,
        data=Queue.as_dict,
    )


def _queue_row(q: Queue) -> list[str]:
    rate = f"{q.rate[0]} per {q.rate[1]:g}s" if q.rate else "-"
    limits = [str(v) if v is not None else "-" for v in (q.concurrency, q.per_worker)]
    return [q.name, *limits, rate, str(q.pending), str(q.active)]


@click.group(cls=SafeGroup)
def schedule() -> None:
    """Cron schedules: each firing starts exactly one run, from whichever worker sees it first."""


@schedule.command("add")
@click.argument("name")
@click.argument("workflow")
@click.option("--cron", required=True, help="Cron expression, UTC: '0 6 * * *' (six fields: seconds last).")
@click.option(
    "--args", "args_json", default="[]", metavar="JSON", help="The workflow's arguments, a JSON list."
)
@click.option(
    "--kwargs", "kwargs_json", default="{}", metavar="JSON", help="Keyword arguments, a JSON object."
)
@click.option("--queue", default=None, metavar="NAME", help="Submit each firing's run to this queue.")
@click.option(
    "--catchup",
    type=click.Choice(["skip", "all"]),
    default="skip",
    show_default=True,
    help="Firings missed while no worker was up: start only those at most --grace late, or all.",
)
@click.option("--grace", default=60.0, show_default=True, type=float, help="Seconds a firing may be late.")
@apps_option("The module or script that defines WORKFLOW.")
@with_book
def schedule_add(
    book: Daybook,
    name: str,
    workflow: str,
    cron: str,
    args_json: str,
    kwargs_json: str,
    queue: str | None,
    catchup: str,
    grace: float,
    apps: tuple[str, ...],
) -> None:
    """Add schedule NAME (or redefine it): start WORKFLOW at every firing of --cron."""
    import_apps(apps)
    try:
        args, kwargs = json.loads(args_json), json.loads(kwargs_json)
    except ValueError as exc:
        fail(f"--args and --kwargs take JSON ({exc})")
    if not isinstance(args, list) or not isinstance(kwargs, dict):
        fail("--args takes a JSON list and --kwargs a JSON object")
    found = book.schedule(
        name, workflow, cron=cron, args=args, kwargs=kwargs, queue=queue, catchup=catchup, grace=grace
    )
    say(f"schedule {name!r} added: {workflow} at {cron!r}, next at {render.when(found.next_at)}")


@schedule.command("ls")
@json_option()
@with_book(read_only=True)
def schedule_ls(book: Daybook, as_json: bool) -> None:
    """Every schedule with its next firing."""
    listing(
        book.schedules(),
        as_json,
        empty=f"no schedules in {book.url}",
        headers=["schedule", "workflow", "cron", "queue", "catchup", "next", "state"],
        row=_schedule_row,
        data=Schedule.as_dict,
    )


def _schedule_row(s: Schedule) -> list[str]:
    state = "paused" if s.paused else "active"
    return [s.name, s.workflow, s.cron, s.queue or "-", s.catchup, render.when(s.next_at), state]


@schedule.command("rm")
@click.argument("name")
@with_book
def schedule_rm(book: Daybook, name: str) -> None:
    """Delete schedule NAME (the runs it started stay)."""
    if not book.unschedule(name):
        fail(f"no schedule {name!r} in {book.url}")
    say(f"schedule {name!r} removed")


@schedule.command("pause")
@click.argument("name")
@with_book
def schedule_pause(book: Daybook, name: str) -> None:
    """Stop schedule NAME firing until `daybook schedule resume NAME`."""
    if not book.pause_schedule(name):
        fail(f"no schedule {name!r} in {book.url}")
    say(f"schedule {name!r} paused")


@schedule.command("resume")
@click.argument("name")
@with_book
def schedule_resume(book: Daybook, name: str) -> None:
    """Let schedule NAME fire again, from now (firings while paused are not caught up)."""
    if not book.resume_schedule(name):
        fail(f"no schedule {name!r} in {book.url}")
    say(f"schedule {name!r} resumed")


COMMANDS = (queues, schedule)
