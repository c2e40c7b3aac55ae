"""`daybook web` (the local inspector) and `daybook journal RUN --follow` (its live stream, in
the terminal)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable

import click

from .. import Daybook, DaybookError, Event
from ..journal.follow import follow, since
from ..records import MAX_SECONDS, bounded
from ..store.chunks import Chunk
from . import render
from .app import Bounded, apps_option, fail, import_apps, say, with_book


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535), help="Port.")
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME",
    help="Another Host name to answer besides 127.0.0.1, localhost, [::1] and --host "
    "(repeat for several; *.domain for its subdomains). Any other Host is refused (DNS rebinding).",
)
@click.option(
    "--otel",
    is_flag=True,
    envvar="DAYBOOK_OTEL",
    help="Export OpenTelemetry spans of runs and steps (daybook-runtime[otel]; OTEL_* settings).",
)
@click.option(
    "--read-only",
    is_flag=True,
    help="Show every page and view but take no action: every POST but sign-in and sign-out is "
    "refused (403) and no action form is shown. Attempts still go to the audit log.",
)
@click.option(
    "--require-sign-in",
    is_flag=True,
    help="Refuse every page, API answer and live stream to someone not signed in (any role: "
    "`daybook approvers add NAME --role viewer` makes a reader). Default: reading is open.",
)
@apps_option("The module or script defining the workflows, for Resume from the page.")
@with_book
def web(
    book: Daybook,
    host: str,
    port: int,
    allowed_hosts: tuple[str, ...],
    otel: bool,
    read_only: bool,
    require_sign_in: bool,
    apps: tuple[str, ...],
) -> None:
    """Serve the local web inspector: runs, timelines, approvals, attention, steering, live.

    People sign in with a name and key from `daybook approvers add NAME --role ROLE`: an
    approver decides the gates that list them (or list nobody), an operator pauses, resumes,
    retries, cancels, resolves and steers runs, a viewer only reads. Every sign-in (refused
    ones too), sign-out and act taken here, done or refused, is appended to the audit log with
    who and from where: `daybook audit`, or the /audit page (operators)."""
    hosts = _hosts(host, allowed_hosts)
    import_apps(apps)
    _announce(book, host, port, hosts, read_only, require_sign_in)
    from ..web import serve  # found: `_hosts` imported the package

    serve(book, host, port, apps, otel, allowed_hosts, read_only=read_only, require_sign_in=require_sign_in)


def _hosts(host: str, allowed_hosts: tuple[str, ...]) -> list[str]:
    """The Host names to answer; stops with what to install, or a usage error for a bad name."""
    try:
        from ..web.guard import hosts_for  # imports the whole `web` package, the extra's server
    except ImportError as exc:
        fail(f"the web inspector needs its extra: pip install 'daybook-runtime[web]' ({exc})")
    try:
        return hosts_for(host, allowed_hosts)
    except DaybookError as exc:
        raise click.UsageError(str(exc)) from None


def _announce(
    book: Daybook, host: str, port: int, hosts: list[str], read_only: bool, require_sign_in: bool
) -> None:
    """Say where the inspector listens, warning first when that is not loopback."""
    from ..web import is_loopback

    if not is_loopback(host):
        reading = "signing in is needed to read" if require_sign_in else "signing in is needed only to act"
        say(
            f"warning: listening on {host}, not loopback: anyone who can reach it reads every run "
            f"({reading}), and signing in sends the approver's token, and "
            "then the session cookie, over plain HTTP (put it behind TLS, or keep it on 127.0.0.1); "
            f"it answers only requests whose Host is one of {', '.join(hosts)} (add others with "
            "--allowed-host)",
            err=True,
        )
    mode = " read-only" if read_only else ""
    say(f"daybook{mode} inspector on http://{host}:{port}/ over {book.url} (Ctrl-C stops it)", err=True)


@click.command()
@click.argument("run_id")
@click.option("--follow", "-f", "following", is_flag=True, help="Keep printing rows as they commit.")
@click.option(
    "--after",
    default=0,
    type=click.IntRange(0, None),
    help="Only rows after this seq (with --stream: chunks after this cursor).",
)
@click.option(
    "--stream",
    "stream",
    default=None,
    metavar="NAME",
    help="Print the chunks of the run's durable stream NAME ('*': every stream) instead of its "
    "rows: cursor, stream, act#n, value.",
)
@click.option(
    "--reader",
    default=None,
    metavar="NAME",
    help="With --stream: read as the durable reader NAME, from the chunk after the last one it "
    "printed, and store its position as it goes (the store is opened for writing).",
)
@click.option(
    "--timeout",
    default=None,
    type=Bounded(lambda v: bounded(v, "timeout (seconds)", low=0.0, high=MAX_SECONDS)),
    metavar="SECONDS",
    help="With --follow: stop after this long even if the run has not ended.",
)
@with_book(read_only=lambda options: options["reader"] is None or options["stream"] is None)
def journal(
    book: Daybook,
    run_id: str,
    following: bool,
    after: int,
    stream: str | None,
    reader: str | None,
    timeout: float | None,
) -> None:
    """Print a run's journal rows, one a line; with --follow, keep printing as rows commit
    (the stream the web inspector's pages follow) until the run ends. With --stream NAME,
    print the chunks of that durable stream instead (`ctx.stream`), each once, in order; with
    --reader, from where that reader name left off."""
    if stream is not None:
        _print_chunks(book, run_id, None if stream == "*" else stream, following, after, reader, timeout)
        return
    if reader is not None:
        fail("--reader follows a durable stream: give --stream NAME ('*' for every stream) too")
    if following:
        end = None if timeout is None else time.monotonic() + timeout
        events = follow(book.store, run_id, after, stop=lambda: end is not None and time.monotonic() >= end)
    else:
        events = iter(since(book.store, run_id, after)[0])
    for ev in events:
        say(_line(ev))


def _print_chunks(
    book: Daybook,
    run_id: str,
    stream: str | None,
    following: bool,
    after: int,
    reader: str | None,
    timeout: float | None,
) -> None:
    """Print the stream's chunks after `after`, or after reader `reader`'s position. A reader's
    line is written (and flushed) before the next chunk is asked for, which is what stores the
    position past it: a reader killed in between prints that one line again, and no other."""
    if reader is None:
        if following:
            chunks: Iterable[Chunk] = book.follow(run_id, stream=stream, after=after, timeout=timeout)
        else:
            chunks = book.chunks(run_id, stream=stream, after=after)
        for chunk in chunks:
            say(_chunk_line(chunk))
        return
    if after:
        fail("--reader starts after the last chunk that reader printed: give --after or --reader, not both")
    with book.follow(run_id, stream=stream, reader=reader, timeout=timeout if following else 0.0) as named:
        for chunk in named:
            say(_chunk_line(chunk))


def _chunk_line(chunk: Chunk) -> str:
    value = chunk.value if isinstance(chunk.value, str) else json.dumps(chunk.value, ensure_ascii=False)
    return render.safe(f"{chunk.cursor}  {chunk.stream}  {chunk.act}#{chunk.n}  {value}")


def _line(ev: Event) -> str:
    step = "-" if ev.step is None else str(ev.step)
    parts = [str(ev.seq), step, ev.kind, ev.name, ev.key or "", ev.status or "", render.detail(ev)]
    return render.safe("  ".join(p for p in parts if p))


COMMANDS = (web, journal)
