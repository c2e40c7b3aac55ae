"""The books a run keeps, read and settled: the effect, decision and obligation ledgers (effects,
why, obligations) and the effects whose outcome is in doubt (unknowns, resolve, reconcile)."""

from __future__ import annotations

import datetime
import json
import sys
from typing import Any

import click

from .. import Daybook
from ..records import Event
from . import render
from .app import (
    EXIT_ERROR,
    apps_option,
    by_option,
    credential_option,
    import_apps,
    json_option,
    json_out,
    listing,
    resume_hint,
    say,
    with_book,
)


@click.command()
@click.argument("run_id", required=False)
@click.option(
    "--status",
    type=click.Choice(["confirmed", "failed", "unknown", "in flight"]),
    default=None,
    help="Only effects in this state.",
)
@click.option("--tool", default=None, help="Only this tool's effects.")
@click.option("--history", is_flag=True, help="Show each effect's status history.")
@json_option()
@with_book(read_only=True)
def effects(
    book: Daybook, run_id: str | None, status: str | None, tool: str | None, history: bool, as_json: bool
) -> None:
    """The effect ledger: what runs did (request, key, reference, status, compensation)."""
    found = book.effects(run_id, status=status, tool=tool)
    shown = listing(
        found,
        as_json,
        empty="no effects" + (f" in run {run_id}" if run_id else ""),
        headers=["run", "step", "tool", "key", "status", "ref", "decision", "undo"],
        row=_effect_row,
    )
    if shown and history:
        for e in found:
            hist = e["history"]
            assert isinstance(hist, list)
            trail = " -> ".join(_history_step(h) for h in hist if isinstance(h, dict))
            say(f"{e['key']}: {trail}")


def _history_step(h: dict[str, Any]) -> str:
    """One step of an effect's history: its status and, when a person or a query settled it,
    who (`by`), how (`resolved_by`) and on what evidence."""
    status = "absent (resume sends it again)" if h.get("resolution") == "absent" else str(h.get("status"))
    notes = []
    if h.get("resolved_by"):
        notes.append(f"resolved {render.brief(h['resolved_by'], 20)}")
    if h.get("by"):
        notes.append(f"by {render.brief(h['by'], 30)}")
    if h.get("evidence"):
        notes.append(f"evidence {render.brief(h['evidence'], 60)}")
    return status + (f" [{', '.join(notes)}]" if notes else "")


def _effect_row(e: dict[str, Any]) -> list[str]:
    return [
        str(e["run_id"]),
        str(e["step"]),
        str(e["tool"]),
        str(e["key"]),
        str(e["status"]),
        "-" if e["ref"] is None else render.brief(e["ref"], 24),
        str(e["decision"] or "-"),
        "yes" if e["compensation"] else "-",
    ]


@click.command()
@click.argument("effect")
@click.argument("step", type=int, required=False)
@json_option("JSON instead of text.")
@with_book(read_only=True)
def why(book: Daybook, effect: str, step: int | None, as_json: bool) -> None:
    """The decision behind an effect: EFFECT is its idempotency key, or RUN_ID STEP."""
    found = book.why(effect, step)
    if as_json:
        json_out(found)
        return
    eff = found["effect"]
    assert isinstance(eff, dict)
    say(
        f"effect    {eff['run_id']} step {eff['step']} {eff['tool']} key {eff['key']} ({eff['status']}"
        + (f", ref {eff['ref']}" if eff.get("ref") is not None else "")
        + ")"
    )
    say(f"          args {render.brief(eff['args'], 100)}")
    dec = found["decision"]
    mandate = found["mandate"]
    assert isinstance(mandate, dict)
    if not isinstance(dec, dict):
        say(
            f"why       no decision before it: it follows from the run's mandate, "
            f"{mandate['workflow']}({render.brief(mandate['input'], 80)})"
        )
        return
    say(f"why       decision {dec['id']} {dec['name']!r} at {render.when(dec['at'])}")
    say(f"          chose {render.brief(dec['value'], 200)}")
    for field in ("policy", "version", "observation", "alternatives", "model", "tokens", "cost", "note"):
        if dec.get(field) is not None:
            say(f"          {field:<12} {render.brief(dec[field], 100)}")
    say(f"          context digest {dec['digest']}")


@click.command()
@click.option(
    "--status",
    type=click.Choice(["open", "fulfilled", "cancelled", "breached"]),
    default=None,
    help="Only obligations in this state.",
)
@json_option()
@with_book(read_only=True)
def obligations(book: Daybook, status: str | None, as_json: bool) -> None:
    """What runs owe: promises, expiries, approvals pending; breached when past due and open."""
    listing(
        book.obligations(status),
        as_json,
        empty="no obligations" + (f" {status}" if status else ""),
        headers=["obligation", "kind", "owner", "state", "due", "about"],
        row=_obligation_row,
    )


def _obligation_row(o: dict[str, Any]) -> list[str]:
    return [
        str(o["id"]),
        str(o.get("kind")),
        str(o.get("owner")),
        str(o["state"]),
        render.when(o.get("due")),
        render.brief(o.get("about"), 40),
    ]


@click.command()
@json_option()
@with_book(read_only=True)
def unknowns(book: Daybook, as_json: bool) -> None:
    """Effects whose outcome is not known: in flight, unknown, or waiting to retry."""
    listing(
        book.unknowns(),
        as_json,
        empty="no unknown outcomes",
        headers=["run", "step", "tool", "key", "state", "run status", "since"],
        row=_unknown_row,
    )


def _unknown_row(u: dict[str, Any]) -> list[str]:
    return [
        str(u["run_id"]),
        str(u["step"]),
        str(u["tool"]),
        str(u["key"]),
        str(u["state"]),
        str(u["run_status"]),
        render.when(u["since"]),
    ]


@click.command()
@click.argument("effect")
@click.argument("step", type=int, required=False)
@click.option(
    "--confirmed",
    metavar="REF|JSON",
    default=None,
    help="It happened: the counterparty's reference, or (JSON) the result the tool would have returned.",
)
@click.option("--ref", default=None, help="The counterparty's reference, when --confirmed is a JSON result.")
@click.option("--failed", metavar="MESSAGE", default=None, help="It did not happen and will not.")
@click.option(
    "--absent", is_flag=True, help="The counterparty never received it: resume sends it again, same key."
)
@by_option("resolves")
@click.option("--evidence", default="", help="What the resolution rests on (ticket, statement).")
@credential_option
@with_book
def resolve(
    book: Daybook,
    effect: str,
    step: int | None,
    confirmed: str | None,
    ref: str | None,
    failed: str | None,
    absent: bool,
    by: str | None,
    evidence: str,
    token: str | None,
) -> None:
    """Record by hand what happened to an effect whose outcome is unknown (journaled, with who).
    EFFECT is its idempotency key, or RUN_ID STEP."""
    if sum([confirmed is not None, failed is not None, absent]) != 1:
        raise click.UsageError("give exactly one of --confirmed REF|JSON, --failed MESSAGE, --absent")
    kwargs: dict[str, Any] = {"ref": ref}
    if confirmed is not None:
        try:
            kwargs["confirmed"] = json.loads(confirmed)
        except ValueError:
            kwargs["confirmed"] = confirmed  # a bare reference, e.g. a wire id
    ev = book.resolve(
        effect, step, failed=failed, absent=absent, by=by, evidence=evidence, token=token, **kwargs
    )
    say(_resolved(book, ev, absent))


def _resolved(book: Daybook, ev: Event, absent: bool) -> str:
    """What `resolve` says it did: journaled here, taken by the live run, or queued for it."""
    where = f"step {ev.step} of {ev.run_id} (key {ev.key})"
    if ev.data.get("queued"):
        return (
            f"{where}: the run is live in another process; the resolution ({ev.status}, by "
            f"{ev.data.get('by')}) is in its inbox (message {ev.data.get('inbox_id')}), and the run "
            "journals it at its next status round"
        )
    what = (
        "recorded as absent: the counterparty never received it, so resuming the run sends it "
        "again under the same key"
        if absent
        else f"resolved as {ev.status}"
    )
    done = f"{where} {what} (seq {ev.seq}, by {ev.data.get('by')})"
    if ev.data.get("inbox_id") is not None:
        return f"{done}: the live run took it from its inbox and goes on"
    return f"{done}; continue it with {resume_hint(book, ev.run_id)}"


def _day(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """--day as the API takes it (YYYY-MM-DD), checked: a bad date is a usage error, not a
    silent "0 mismatch(es)"."""
    if value is None:
        return None
    try:
        return datetime.date.fromisoformat(value).isoformat()
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a date; give YYYY-MM-DD, e.g. 2026-11-23") from None


@click.command()
@click.argument("run_id", required=False)
@click.option("--day", default=None, metavar="YYYY-MM-DD", callback=_day, help="Only effects of that day.")
@apps_option("Import the tools' code first.")
@json_option("JSON instead of lines.")
@with_book(read_only=True)
def reconcile(
    book: Daybook, run_id: str | None, day: str | None, apps: tuple[str, ...], as_json: bool
) -> None:
    """Compare the journal with the counterparties' records; exit 1 on any mismatch."""
    import_apps(apps)
    found = book.reconcile(run_id, day)
    if as_json:
        json_out(found)
    else:
        for m in found:
            say(f"{m['kind']:13} {m['tool']}  {m['key']}")
        say(f"{len(found)} mismatch(es)", err=True)
    if found:
        sys.exit(EXIT_ERROR)


COMMANDS = (effects, why, obligations, unknowns, resolve, reconcile)
