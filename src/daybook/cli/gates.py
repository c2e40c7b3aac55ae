"""Approval gates from the command line: approvers (add, list), approvals, approve, deny."""

from __future__ import annotations

from typing import Any

import click

from .. import Daybook
from . import render
from .app import SafeGroup, json_option, json_out, listing, resume_hint, say, with_book


@click.group(cls=SafeGroup)
def approvers() -> None:
    """Approvers who may decide approval gates (each authenticated by a token)."""


@approvers.command("add")
@click.argument("name")
@with_book
def approvers_add(book: Daybook, name: str) -> None:
    """Register approver NAME (or replace its token); prints the token once."""
    token = book.add_approver(name)
    say(token)
    say(f"approver {name!r} registered; give them this token (it is not shown again)", err=True)


@approvers.command("list")
@json_option("The names as a JSON list.")
@with_book(read_only=True)
def approvers_list(book: Daybook, as_json: bool) -> None:
    """List registered approvers."""
    names = sorted(book.store.approvers())
    if as_json:
        json_out(names)
    elif not names:
        say("no approvers registered; add one with `daybook approvers add NAME`")
    for name in names if not as_json else ():
        say(render.safe(name))  # one line per name, whatever characters it holds


@click.command()
@json_option()
@with_book(read_only=True)
@click.option(
    "--history", is_flag=True, help="Every verdict attempt instead: delivered, late, refused, timed out."
)
@click.option(
    "--run", "run_id", default=None, metavar="RUN", help="Only this run's gates and its child runs'."
)
def approvals(book: Daybook, as_json: bool, history: bool, run_id: str | None) -> None:
    """Gates waiting for a verdict, then refused, late and timed-out verdicts."""
    if history:
        listing(
            book.verdicts(),
            as_json,
            empty="no verdicts",
            headers=["run", "gate", "state", "approver", "outcome", "at", "why"],
            row=_attempt_row,
        )
        return
    listing(
        book.approvals(run_id),
        as_json,
        empty="no gates waiting",
        headers=["run", "gate", "action", "approvers", "since", "deadline", "tree"],
        row=_gate_row,
    )
    if as_json:
        return
    odd = [v for v in book.verdicts() if v["state"] != "delivered"]
    if odd:
        say("\nrefused, late and timed-out verdicts:")
        say(
            render.table(
                ["run", "gate", "state", "approver", "outcome", "at", "why"], [_attempt_row(v) for v in odd]
            )
        )


def _attempt_row(v: dict[str, Any]) -> list[str]:
    return [
        str(v["run_id"]),
        str(v["gate_id"]),
        str(v["state"]),
        str(v["approver"] or "-"),
        str(v["outcome"] or "-"),
        render.when(v["at"]),
        render.brief(v["reason"] or "", 60),
    ]


def _gate_row(g: dict[str, Any]) -> list[str]:
    allowed = g["approvers"]
    return [
        str(g["run_id"]),
        str(g["gate_id"]),
        str(g["action"]),
        ",".join(allowed) if isinstance(allowed, list) else "any",
        render.when(g["since"]),
        render.when(g["deadline"]),
        "" if g.get("parent") is None else f"child of {g['parent']} (root {g['root']})",
    ]


def _verdict(
    book: Daybook, run_id: str, gate: str, approver: str, token: str | None, reason: str, approve: bool
) -> None:
    if not token:
        raise click.UsageError(
            "give the approver's token in $DAYBOOK_TOKEN (or --token, which other users can see in `ps`)"
        )
    outcome = book.approve(run_id, gate, approver=approver, token=token, reason=reason, approve=approve)
    word = "approval" if approve else "denial"
    if outcome == "late":
        say(
            f"late: gate {gate} had already timed out or been decided; your {word} is "
            "recorded and does nothing"
        )
    else:
        say(f"{word} of gate {gate} delivered to {run_id}; {_who_continues(book, run_id)}")


def _who_continues(book: Daybook, run_id: str) -> str:
    """After a verdict: whether the run goes on by itself (live in a process, or woken for a
    worker) or needs `daybook resume`."""
    info = book.get_run(run_id)
    if info.status == "running" and info.lease_owner and render.lease_state(info) == "held":
        return f"the run is live in {info.lease_owner} and sees the verdict at its next wait"
    if info.status in ("suspended", "pending", "running"):
        return (
            "the run is woken: a `daybook worker` on this store takes it up at its next poll; "
            f"if none is running, continue it with {resume_hint(book, run_id)}"
        )
    return f"the run is {info.status}"


def _with_verdict_options(fn: Any) -> Any:
    options = [
        click.argument("run_id"),
        click.argument("gate"),
        click.option("--as", "approver", required=True, help="Approver name."),
        click.option(
            "--token",
            envvar=["DAYBOOK_TOKEN", "DAYBOOK_APPROVER_TOKEN"],
            default=None,
            help="The approver's token; prefer $DAYBOOK_TOKEN (a flag is visible in `ps`).",
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
