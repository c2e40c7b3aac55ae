"""The approval outbox from the command line: `daybook outbox list` (each request and where its
delivery stands) and `daybook outbox deliver` (one pass, to the sinks its options configure),
plus the notify options `daybook worker` shares."""

from __future__ import annotations

from typing import Any

import click

from .. import Daybook
from ..gates import outbox as requests
from ..gates.delivery import DEFAULT_ATTEMPTS, Deliverer
from ..gates.sink import LogSink, Sink, from_env
from . import render
from .app import SafeGroup, json_option, listing, say, with_book

STATES = ("queued", "retrying", "delivered", "undelivered")


def notify_options(fn: Any) -> Any:
    """`--notify-url`, `--notify-secret-env`, `--notify-log` (as `notify_url`, `notify_secret_env`,
    `notify_log`)."""
    options = [
        click.option(
            "--notify-url",
            default=None,
            envvar="DAYBOOK_NOTIFY_URL",
            metavar="URL",
            help="Deliver approval requests to this webhook (http/https), signed with HMAC-SHA256 "
            "($DAYBOOK_NOTIFY_URL).",
        ),
        click.option(
            "--notify-secret-env",
            default="DAYBOOK_NOTIFY_SECRET",
            show_default=True,
            metavar="VAR",
            help="The environment variable holding the webhook's HMAC secret (never a flag: "
            "`ps` would show it).",
        ),
        click.option("--notify-log", is_flag=True, help="Also (or only) log each approval request."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def notify_sinks(notify_url: str | None, notify_secret_env: str, notify_log: bool) -> list[Sink]:
    """The sinks the notify options configure (a bad URL or a missing secret: a clear error)."""
    sinks = from_env(notify_url, notify_secret_env) if notify_url else []
    if notify_log and not sinks:
        sinks.append(LogSink())
    return sinks


@click.group(cls=SafeGroup)
def outbox() -> None:
    """Approval requests waiting to be (or already) delivered to the notification sinks."""


@outbox.command("list")
@json_option()
@click.option("--state", type=click.Choice(STATES), default=None, help="Only requests in this state.")
@with_book(read_only=True)
def outbox_list(book: Daybook, as_json: bool, state: str | None) -> None:
    """Each approval request (its delivery key), its gate, and where its delivery stands:
    queued, retrying, delivered, or undelivered (a sink gave up: see its last error)."""
    listing(
        requests.outbox(book.store, state),
        as_json,
        empty="no approval requests" + (f" {state}" if state else ""),
        headers=["key", "run", "gate", "action", "state", "tries", "last error"],
        row=_row,
    )


def _row(r: dict[str, Any]) -> list[str]:
    tries = r["tries"] or {}
    return [
        str(r["key"]),
        str(r["run_id"]),
        str(r["gate_id"]),
        str(r["action"]),
        str(r["state"]),
        ",".join(f"{k}:{v}" for k, v in tries.items()) or "-",
        render.brief(str(r["last_error"] or ""), 60),
    ]


@outbox.command("deliver")
@notify_options
@click.option(
    "--attempts",
    default=DEFAULT_ATTEMPTS,
    show_default=True,
    type=click.IntRange(1, 100),
    help="Tries per sink before a request is given up (shown undelivered).",
)
@with_book
def outbox_deliver(
    book: Daybook, notify_url: str | None, notify_secret_env: str, notify_log: bool, attempts: int
) -> None:
    """One delivery pass: send each due approval request to the sinks the options configure
    (a worker with --notify-url does this all the time)."""
    sinks = notify_sinks(notify_url, notify_secret_env, notify_log)
    if not sinks:
        raise click.UsageError(
            "configure a sink: --notify-url URL (with its secret's variable) or --notify-log"
        )
    done = Deliverer(book.store, sinks, attempts=attempts).run_once()
    say(
        f"{done.delivered} delivered, {done.failed} failed tries, {done.gave_up} given up, "
        f"{done.busy} held elsewhere"
    )


COMMANDS = (outbox,)
