"""The `daybook` command line: run the demo, list and inspect runs, resume, export, resolve."""

from __future__ import annotations

from typing import Any

import click

from ..book import Daybook
from . import books, demo, render, runs, tools, transactions, versions, workers
from .app import fail, json_out, main, with_book

__all__ = ["main"]


@main.group()
def approvers() -> None:
    """Approvers who may decide approval gates (each authenticated by a token)."""


@approvers.command("add")
@click.argument("name")
@with_book
def approvers_add(book: Daybook, name: str) -> None:
    """Register approver NAME (or replace its token); prints the token once."""
    token = book.add_approver(name)
    click.echo(token)
    click.echo(f"approver {name!r} registered; give them this token (it is not shown again)", err=True)


@approvers.command("list")
@with_book
def approvers_list(book: Daybook) -> None:
    """List registered approvers."""
    for name in sorted(book.store.approvers()):
        click.echo(name)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="JSON instead of a table.")
@with_book
def approvals(book: Daybook, as_json: bool) -> None:
    """Gates waiting for a verdict."""
    found = book.approvals()
    if as_json:
        json_out(found)
        return
    if not found:
        click.echo("no gates waiting")
        return
    rows = []
    for g in found:
        allowed = g["approvers"]
        rows.append(
            [
                str(g["run_id"]),
                str(g["gate_id"]),
                str(g["action"]),
                ",".join(allowed) if isinstance(allowed, list) else "any",
                render.when(g["since"]),
                render.when(g["deadline"]),
            ]
        )
    click.echo(render.table(["run", "gate", "action", "approvers", "since", "deadline"], rows))


def _verdict(
    book: Daybook, run_id: str, gate: str, approver: str, token: str | None, reason: str, approve: bool
) -> None:
    if not token:
        fail("give --token or set DAYBOOK_APPROVER_TOKEN")
    outcome = book.approve(run_id, gate, approver=approver, token=token, reason=reason, approve=approve)
    word = "approval" if approve else "denial"
    if outcome == "late":
        click.echo(
            f"late: gate {gate} had already timed out or been decided; your {word} is "
            "recorded and does nothing"
        )
    else:
        click.echo(f"{word} of gate {gate} delivered to {run_id}")


def _with_verdict_options(fn: Any) -> Any:
    options = [
        click.argument("run_id"),
        click.argument("gate"),
        click.option("--as", "approver", required=True, help="Approver name."),
        click.option(
            "--token",
            envvar="DAYBOOK_APPROVER_TOKEN",
            default=None,
            help="The approver's token (or $DAYBOOK_APPROVER_TOKEN).",
        ),
        click.option("--reason", default="", help="Why (journaled with the verdict)."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


@main.command()
@_with_verdict_options
@with_book
def approve(book: Daybook, run_id: str, gate: str, approver: str, token: str | None, reason: str) -> None:
    """Approve gate GATE of run RUN_ID (as an authenticated approver)."""
    _verdict(book, run_id, gate, approver, token, reason, approve=True)


@main.command()
@_with_verdict_options
@with_book
def deny(book: Daybook, run_id: str, gate: str, approver: str, token: str | None, reason: str) -> None:
    """Decline gate GATE of run RUN_ID (as an authenticated approver)."""
    _verdict(book, run_id, gate, approver, token, reason, approve=False)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="JSON instead of a table.")
@with_book
def leases(book: Daybook, as_json: bool) -> None:
    """Coordination entities with their lease: holder, deadline, state (held, expired, free)."""
    found = book.leases()
    if as_json:
        json_out([lease.as_dict() for lease in found])
        return
    if not found:
        click.echo(f"no entities in {book.url}")
        return
    rows = [[lease.name, lease.holder or "-", render.when(lease.deadline), lease.state] for lease in found]
    click.echo(render.table(["entity", "holder", "deadline", "state"], rows))


@main.command()
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="JSON instead of a table.")
@with_book
def entity(book: Daybook, name: str, as_json: bool) -> None:
    """Show coordination entity NAME: its lease and its log (time, agent, action, data)."""
    view = book.entity(name).view()
    if not view.log and view.holder is None:
        fail(
            f"no entity {name!r} in {book.url} (an entity exists once claimed); "
            "list entities with `daybook leases`"
        )
    if as_json:
        json_out(view.as_dict())
        return
    lease = f"lease {view.state}"
    if view.holder is not None:
        lease += f" ({view.holder} until {render.when(view.deadline)})"
    start = view.log[0].at if view.log else view.read_at
    rows = [
        [
            str(e.id),
            render.when(e.at),
            f"+{e.at - start:.3f}s",
            e.agent,
            e.action,
            "" if e.data is None else render.brief(e.data),
        ]
        for e in view.log
    ]
    click.echo(f"entity {view.name}  {lease}\n")
    click.echo(render.table(["id", "time", "at", "agent", "action", "data"], rows))


def _register() -> None:
    for noun in (runs, workers, demo, versions, books, tools, transactions):
        for command in noun.COMMANDS:
            main.add_command(command)


_register()
