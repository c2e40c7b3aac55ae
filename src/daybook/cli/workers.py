"""The worker command: execute pending runs and take over orphaned ones until stopped."""

from __future__ import annotations

import signal
from typing import Any

import click

from .. import DaybookError
from ..book import lease_ttl_of
from ..records import bounded
from ..worker import DEFAULT_GRACE, MAX_CONCURRENCY, MAX_POLL, Worker
from . import render
from .app import Bounded, apps_option, db_option, fail, import_apps, say, with_db
from .outbox import notify_options, notify_sinks
from .retention import Age

# The numbers a worker takes, checked as `Worker` checks them (a bad one is a usage error).
concurrency_option = click.option(
    "--concurrency",
    default=1,
    show_default=True,
    type=click.IntRange(1, MAX_CONCURRENCY),
    help="Runs executed at once.",
)
poll_option = click.option(
    "--poll",
    default=0.5,
    show_default=True,
    type=Bounded(lambda v: bounded(v, "seconds", low=0.0, high=MAX_POLL, above=True)),
    help="Seconds between looks when idle.",
)
lease_ttl_option = click.option(
    "--lease-ttl",
    default=15.0,
    show_default=True,
    type=Bounded(lease_ttl_of),
    help="Seconds a run stays this worker's without a heartbeat.",
)
pin_option = click.option(
    "--version",
    "pin",
    default=None,
    metavar="VERSION",
    help="Take only runs that started on this workflow code version (pinning).",
)
queue_option = click.option(
    "--queue",
    "queues",
    multiple=True,
    metavar="NAME",
    help="Take only runs of this queue (repeat for several). Default: any run.",
)
grace_option = click.option(
    "--grace",
    default=DEFAULT_GRACE,
    show_default=True,
    type=Bounded(lambda v: bounded(v, "seconds", low=0.0, high=MAX_POLL)),
    help="On SIGTERM/Ctrl-C, seconds the runs executing get to finish or suspend before it exits.",
)


@click.command()
@db_option
@apps_option(
    "The module or script that defines the workflows (or list them in $DAYBOOK_APP): the only "
    "code this worker imports. A run whose workflow none defines is set aside as needs "
    "attention, its stored reference named in the message, never imported."
)
@concurrency_option
@poll_option
@lease_ttl_option
@click.option("--until-idle", is_flag=True, help="Exit once no run is pending or running.")
@click.option("--quiet", is_flag=True, help="Do not print a line per run.")
@pin_option
@queue_option
@click.option("--no-schedules", is_flag=True, help="Do not start the runs of schedule firings.")
@grace_option
@click.option(
    "--otel",
    is_flag=True,
    envvar="DAYBOOK_OTEL",
    help="Export OpenTelemetry spans of the runs this worker executes (daybook-runtime[otel]; "
    "OTEL_* settings).",
)
@notify_options
@click.option(
    "--retention",
    default="30d",
    show_default=True,
    type=Age(),
    help="Expire runs paused, or finished with an environment, longer than this (e.g. 30d, 12h), "
    "destroying each environment with its workflow's destroy hook (found in the --app code; else "
    "kept and listed as awaiting destroy); checked on the worker's schedule, with or without `daybook gc`.",
)
def worker(db: str | None, apps: tuple[str, ...], until_idle: bool, quiet: bool, **options: Any) -> None:
    """Execute pending runs and take over orphaned ones (lapsed leases) until stopped."""
    import_apps(apps)
    w = _worker(db, apps, quiet, **options)
    signal.signal(signal.SIGTERM, lambda *_: w.stop.set())
    signal.signal(signal.SIGINT, lambda *_: w.stop.set())
    try:
        stats = w.run(until_idle=until_idle)
    except DaybookError as exc:
        fail(str(exc))
    say(
        f"worker stopped: {stats.completed} completed, {stats.failed} failed, "
        f"{stats.attention} need attention, {stats.suspended} suspended, {stats.errors} errors"
    )


def _worker(db: str | None, apps: tuple[str, ...], quiet: bool, **options: Any) -> Worker:
    """The worker the options describe; its per-run lines on stdout (unless quiet), and lost or
    regained capacity on stderr even with --quiet."""

    def echo(line: str) -> None:  # from the worker's threads: no click context there
        click.echo(render.safe(with_db(line, db), lines=True))

    def warn(line: str) -> None:
        click.echo(render.safe(line, lines=True), err=True)

    schedules = not options.pop("no_schedules")
    try:
        options["notify"] = notify_sinks(
            options.pop("notify_url"), options.pop("notify_secret_env"), options.pop("notify_log")
        )
        return Worker(
            db,
            apps=apps,
            echo=None if quiet else echo,
            version=options.pop("pin"),
            schedules=schedules,
            warn=warn,
            **options,
        )
    except DaybookError as exc:
        fail(str(exc))


COMMANDS = (worker,)
