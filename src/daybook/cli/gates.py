"""Approval gates from the command line: approvers (add, remove, list), approvals, approve, deny,
and the audit log of what people did in the web inspector (audit)."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import click

from .. import Daybook
from ..dispatch.search import when
from ..errors import ConfigError
from ..gates import audit as audit_log
from ..gates import roster
from ..gates.signing import write_key_file
from . import render
from .app import (
    SafeGroup,
    credential_option,
    json_option,
    json_out,
    listing,
    resume_hint,
    say,
    with_book,
)


@click.group(cls=SafeGroup)
def approvers() -> None:
    """People who may decide approval gates (role approver) and operate runs under their name
    (role operator), each with an Ed25519 key pair: the public key in the approvers file
    (outside the store), the private key with the person."""


@approvers.command("add")
@click.argument("name")
@click.option(
    "--role",
    "roles",
    multiple=True,
    type=click.Choice(roster.ROLES),
    help="approver (decides gates), operator (pause, cancel, retry, resolve, steer) or viewer "
    "(signs in to `daybook web` to read, nothing more); repeat for several. Default: the "
    "name's roles so far, else approver.",
)
@click.option(
    "--key-file",
    default=None,
    metavar="PATH",
    help="Write the private key to PATH (mode 0600) for the approver to keep, instead of printing it.",
)
@with_book
def approvers_add(book: Daybook, name: str, roles: tuple[str, ...], key_file: str | None) -> None:
    """Register NAME with a new key pair (or rotate its key: the old one stops working, web
    sessions included). The public key goes to the approvers file; the private key is printed
    once (or written to --key-file) and kept nowhere else."""
    if key_file:
        write_key_file(key_file, "")  # writable? else stop before the new key replaces the old
    token = book.add_approver(name, roles=roles or None)
    where = roster.path_for(book.store)
    if key_file:
        write_key_file(key_file, token)
        say(f"approver {name!r} registered in {where}; its private key is in {key_file}", err=True)
        return
    say(token)
    say(
        f"approver {name!r} registered in {where}; give them this key (it is not shown again)",
        err=True,
    )


@approvers.command("remove")
@click.argument("name")
@with_book
def approvers_remove(book: Daybook, name: str) -> None:
    """Unregister NAME: its key stops working at once (verdicts, acts, web sessions)."""
    if not book.remove_approver(name):
        raise click.ClickException(f"{name!r} is not a registered approver (`daybook approvers list`)")
    say(f"approver {name!r} removed from {roster.path_for(book.store)}")


@approvers.command("list")
@json_option("The names as a JSON list (with --roles: an object, name -> roles).")
@click.option("--roles", "with_roles", is_flag=True, help="Show each name's roles.")
@with_book(read_only=True)
def approvers_list(book: Daybook, as_json: bool, with_roles: bool) -> None:
    """List registered approvers (from the approvers file), with --roles their roles."""
    found = book.approvers()
    if as_json:
        json_out(found if with_roles else sorted(found))
        return
    if not found:
        say("no approvers registered; add one with `daybook approvers add NAME`")
    for name, roles in found.items():
        # One line per name, whatever characters it holds.
        say(f"{render.safe(name)}\t{','.join(roles)}" if with_roles else render.safe(name))


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
        headers=[
            "run",
            "gate",
            "action",
            "approvers",
            "approvals",
            "deadline",
            "on expiry",
            "facts",
            "notice",
            "tree",
        ],
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
    given = g.get("approved_by") or g.get("given") or []
    facts = g.get("facts")
    ask = f" (ask {g['ask']}, after {g['first']})" if (g.get("ask") or 1) > 1 else ""
    return [
        str(g["run_id"]),
        str(g["gate_id"]),
        str(g["action"]),
        ",".join(allowed) if isinstance(allowed, list) else "any",
        f"{len(given)}/{g.get('approvals') or 1}" + (f" ({','.join(given)})" if given else ""),
        render.when(g["deadline"]) + (" OVERDUE" if g.get("overdue") else ""),
        str(g.get("on_expiry") or "deny"),
        ("-" if facts is None else render.brief(json.dumps(facts, sort_keys=True), 40)) + ask,
        str(g.get("notice") or "none"),
        "" if g.get("parent") is None else f"child of {g['parent']} (root {g['root']})",
    ]


def _verdict(
    book: Daybook, run_id: str, gate: str, approver: str, token: str | None, reason: str, approve: bool
) -> None:
    if not token:
        raise click.UsageError(
            "give the approver's key in $DAYBOOK_TOKEN, or its file with --key-file / "
            "$DAYBOOK_KEY_FILE (or --token, which other users can see in `ps`)"
        )
    outcome = book.approve(run_id, gate, approver=approver, token=token, reason=reason, approve=approve)
    word = "approval" if approve else "denial"
    if outcome == "late":
        say(
            f"late: gate {gate} had already timed out or been decided; your {word} is "
            "recorded and does nothing"
        )
    else:
        tally = _tally(book, run_id, gate)
        say(f"{word} of gate {gate} delivered to {run_id}{tally}; {_who_continues(book, run_id)}")


def _tally(book: Daybook, run_id: str, gate: str) -> str:
    """How far a gate that needs several approvers got, counting the ones on their way."""
    rows = [g for g in book.approvals(run_id) if g["gate_id"] == gate]
    if not rows or (rows[0].get("approvals") or 1) == 1:
        return ""
    return f" (it needs {rows[0]['approvals']} distinct approvers; each counts once)"


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
        click.option("--reason", default="", help="Why (journaled with the verdict)."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return credential_option(fn)


@click.command()
@_with_verdict_options
@with_book
def approve(book: Daybook, run_id: str, gate: str, approver: str, token: str | None, reason: str) -> None:
    """Approve gate GATE of run RUN_ID, signed with the approver's private key."""
    _verdict(book, run_id, gate, approver, token, reason, approve=True)


@click.command()
@_with_verdict_options
@with_book
def deny(book: Daybook, run_id: str, gate: str, approver: str, token: str | None, reason: str) -> None:
    """Decline gate GATE of run RUN_ID, signed with the approver's private key."""
    _verdict(book, run_id, gate, approver, token, reason, approve=False)


_AGO = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _since(text: str | None) -> float | None:
    """--since as epoch seconds: ISO 8601, epoch seconds, or an age (90s, 30m, 2h, 7d ago)."""
    if text is None:
        return None
    ago = _AGO.fullmatch(text.strip())
    if ago:
        return time.time() - float(ago.group(1)) * _UNIT[ago.group(2)]
    found = when(text, "--since")
    assert found is not None  # text is not None
    return found


@click.command()
@click.option(
    "--since",
    default=None,
    metavar="TIME",
    help="Only entries at or after TIME: ISO 8601, epoch seconds, or an age (30m, 2h, 7d).",
)
@click.option(
    "--limit",
    default=100,
    show_default=True,
    type=click.IntRange(1, 100_000),
    help="At most the newest this many entries.",
)
@json_option("The entries as a JSON list, oldest first.")
@with_book(read_only=True)
def audit(book: Daybook, since: str | None, limit: int, as_json: bool) -> None:
    """The web inspector's audit log, oldest first: every sign-in (refused ones too), sign-out,
    verdict and act on a run taken there, done or refused, with who, from which address and
    user agent. Append-only in the store; no token or session id is ever in it."""
    try:
        cutoff = _since(since)
    except ConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="--since") from None
    listing(
        audit_log.entries(book.store, cutoff, limit),
        as_json,
        empty="the audit log is empty (nobody has signed in or acted in `daybook web` on this store)",
        headers=["at", "who", "action", "outcome", "on", "said", "client", "user agent"],
        row=lambda e: [
            render.when(e.at),
            e.who or "-",
            e.action,
            f"{e.outcome} {e.status}",
            " ".join(f"{k}={v}" for k, v in e.detail.items()) or "-",
            e.said,
            e.client or "-",
            e.user_agent or "-",
        ],
        data=lambda e: e.as_dict(),
    )


COMMANDS = (approvers, approvals, approve, deny, audit)
