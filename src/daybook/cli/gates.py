"""Approval gates from the command line: approvers (add, list), approvals, approve, deny."""

from __future__ import annotations

from typing import Any

import click

from ..book import Daybook
from . import render
from .app import fail, json_out, with_book


@click.group()
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


@click.command()
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


@click.command()
@_with_verdict_options
@with_book
def approve(book: Daybook, run_id: str, gate: str, approver: str, token: str | None, reason: str) -> None:
    """Approve gate GATE of run RUN_ID (as an authenticated approver)."""
    _verdict(book, run_id, gate, approver, token, reason, approve=True)


@click.command()
@_with_verdict_options
@with_book
def deny(book: Daybook, run_id: str, gate: str, approver: str, token: str | None, reason: str) -> None:
    """Decline gate GATE of run RUN_ID (as an authenticated approver)."""
    _verdict(book, run_id, gate, approver, token, reason, approve=False)


COMMANDS = (approvers, approvals, approve, deny)
