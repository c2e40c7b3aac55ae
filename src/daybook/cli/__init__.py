"""The `daybook` command line: run the demo, list and inspect runs, resume, export, resolve."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from ..book import Daybook
from ..tool import registered as registered_tools
from ..workflow import load_app
from . import demo, render, runs, versions, workers
from .app import EXIT_ERROR, fail, json_out, main, with_book

__all__ = ["main"]


@main.command()
@click.option(
    "--status",
    type=click.Choice(["open", "fulfilled", "cancelled", "breached"]),
    default=None,
    help="Only obligations in this state.",
)
@click.option("--json", "as_json", is_flag=True, help="JSON instead of a table.")
@with_book
def obligations(book: Daybook, status: str | None, as_json: bool) -> None:
    """What runs owe: promises, expiries, approvals pending; breached when past due and open."""
    found = book.obligations(status)
    if as_json:
        json_out(found)
        return
    if not found:
        click.echo("no obligations" + (f" {status}" if status else ""))
        return
    rows = [
        [
            str(o["id"]),
            str(o.get("kind")),
            str(o.get("owner")),
            str(o["state"]),
            render.when(o.get("due")),
            render.brief(o.get("about"), 40),
        ]
        for o in found
    ]
    click.echo(render.table(["obligation", "kind", "owner", "state", "due", "about"], rows))


@main.command()
@click.argument("effect")
@click.argument("step", type=int, required=False)
@click.option("--json", "as_json", is_flag=True, help="JSON instead of text.")
@with_book
def why(book: Daybook, effect: str, step: int | None, as_json: bool) -> None:
    """The decision behind an effect: EFFECT is its idempotency key, or RUN_ID STEP."""
    found = book.why(effect, step)
    if as_json:
        json_out(found)
        return
    eff = found["effect"]
    assert isinstance(eff, dict)
    click.echo(
        f"effect    {eff['run_id']} step {eff['step']} {eff['tool']} key {eff['key']} ({eff['status']}"
        + (f", ref {eff['ref']}" if eff.get("ref") is not None else "")
        + ")"
    )
    click.echo(f"          args {render.brief(eff['args'], 100)}")
    dec = found["decision"]
    mandate = found["mandate"]
    assert isinstance(mandate, dict)
    if not isinstance(dec, dict):
        click.echo(
            f"why       no decision before it: it follows from the run's mandate, "
            f"{mandate['workflow']}({render.brief(mandate['input'], 80)})"
        )
        return
    click.echo(f"why       decision {dec['id']} {dec['name']!r} at {render.when(dec['at'])}")
    click.echo(f"          chose {render.brief(dec['value'], 200)}")
    for field in ("policy", "version", "observation", "alternatives", "model", "tokens", "cost", "note"):
        if dec.get(field) is not None:
            click.echo(f"          {field:<12} {render.brief(dec[field], 100)}")
    click.echo(f"          context digest {dec['digest']}")


@main.command()
@click.argument("run_id", required=False)
@click.option(
    "--status",
    type=click.Choice(["confirmed", "failed", "unknown", "in flight"]),
    default=None,
    help="Only effects in this state.",
)
@click.option("--tool", default=None, help="Only this tool's effects.")
@click.option("--history", is_flag=True, help="Show each effect's status history.")
@click.option("--json", "as_json", is_flag=True, help="JSON instead of a table.")
@with_book
def effects(
    book: Daybook, run_id: str | None, status: str | None, tool: str | None, history: bool, as_json: bool
) -> None:
    """The effect ledger: what runs did (request, key, reference, status, compensation)."""
    found = book.effects(run_id, status=status, tool=tool)
    if as_json:
        json_out(found)
        return
    if not found:
        click.echo("no effects" + (f" in run {run_id}" if run_id else ""))
        return
    rows = [
        [
            str(e["run_id"]),
            str(e["step"]),
            str(e["tool"]),
            str(e["key"]),
            str(e["status"]),
            "-" if e["ref"] is None else render.brief(e["ref"], 24),
            str(e["decision"] or "-"),
            "yes" if e["compensation"] else "-",
        ]
        for e in found
    ]
    click.echo(render.table(["run", "step", "tool", "key", "status", "ref", "decision", "undo"], rows))
    if history:
        for e in found:
            hist = e["history"]
            assert isinstance(hist, list)
            trail = " -> ".join(str(h["status"]) for h in hist if isinstance(h, dict))
            click.echo(f"{e['key']}: {trail}")


@main.command()
@click.option(
    "--app",
    "apps",
    multiple=True,
    metavar="MODULE|FILE.py",
    help="Import this module or script first so its tools are registered (repeatable).",
)
@click.option("--json", "as_json", is_flag=True, help="JSON instead of a table.")
def tools(apps: tuple[str, ...], as_json: bool) -> None:
    """Counterparty profiles of the registered tools: keys, dedup window, status query, inverse,
    effect class, and whether the agent loop gates them by default."""
    for app in apps:
        load_app(app)
    found = [t.profile() for t in registered_tools()]
    if as_json:
        json_out(found)
        return
    if not found:
        click.echo("no tools registered; pass --app MODULE to import the code that declares them")
        return
    rows = [
        [
            str(p["name"]),
            str(p["effect_class"]),
            "buffered" if p["bufferable"] else "now",
            "yes" if p["accepts_keys"] else "no",
            "-" if p["dedup_window"] is None else f"{p['dedup_window']:g}s",
            ",".join(
                n
                for n, on in (
                    ("status", p["status_query"]),
                    ("lookup", p["lookup_by_reference"]),
                    ("verify", p["verify"]),
                )
                if on
            )
            or "-",
            str(p["inverse"] or "-"),
            "gated" if p["gated_by_default"] else "-",
        ]
        for p in found
    ]
    click.echo(
        render.table(["tool", "class", "when", "keys", "window", "asks by", "inverse", "default"], rows)
    )


@main.command()
@click.option(
    "--sweep",
    "sweep",
    default=None,
    type=float,
    metavar="SECONDS",
    help="Delete orphaned staging areas older than this.",
)
@with_book
def orphans(book: Daybook, sweep: float | None) -> None:
    """Staged records of transactions that never committed; --sweep deletes old ones."""
    if sweep is not None:
        click.echo(f"swept {book.sweep_orphans(sweep)} abandoned transaction(s)")
        return
    found = book.orphans()
    if not found:
        click.echo("no orphans")
        return
    rows = [[str(o["txid"]), str(o["collection"]), str(o["record_id"]), render.when(o["at"])] for o in found]
    click.echo(render.table(["transaction", "collection", "record", "staged"], rows))


@main.command()
@click.argument("run_id", required=False)
@click.option("--day", default=None, metavar="YYYY-MM-DD", help="Only effects of that day.")
@click.option(
    "--app",
    "apps",
    multiple=True,
    metavar="MODULE|FILE.py",
    help="Import the tools' code first (repeatable).",
)
@click.option("--json", "as_json", is_flag=True, help="JSON instead of lines.")
@with_book
def reconcile(
    book: Daybook, run_id: str | None, day: str | None, apps: tuple[str, ...], as_json: bool
) -> None:
    """Compare the journal with the counterparties' records; exit 1 on any mismatch."""
    for app in apps:
        load_app(app)
    found = book.reconcile(run_id, day)
    if as_json:
        json_out(found)
    else:
        for m in found:
            click.echo(f"{m['kind']:13} {m['tool']}  {m['key']}")
        click.echo(f"{len(found)} mismatch(es)", err=True)
    if found:
        sys.exit(EXIT_ERROR)


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
def unknowns(book: Daybook, as_json: bool) -> None:
    """Effects whose outcome is not known: in flight, unknown, or waiting to retry."""
    found = book.unknowns()
    if as_json:
        json_out(found)
        return
    if not found:
        click.echo("no unknown outcomes")
        return
    rows = [
        [
            str(u["run_id"]),
            str(u["step"]),
            str(u["tool"]),
            str(u["key"]),
            str(u["state"]),
            str(u["run_status"]),
            render.when(u["since"]),
        ]
        for u in found
    ]
    click.echo(render.table(["run", "step", "tool", "key", "state", "run status", "since"], rows))


@main.command()
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
@click.option("--by", default=None, help="Who resolves it (default: the OS user).")
@click.option("--evidence", default="", help="What the resolution rests on (ticket, statement).")
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
) -> None:
    """Record by hand what happened to an effect whose outcome is unknown (journaled, with who).
    EFFECT is its idempotency key, or RUN_ID STEP."""
    if sum([confirmed is not None, failed is not None, absent]) != 1:
        fail("give exactly one of --confirmed REF|JSON, --failed MESSAGE, --absent")
    kwargs: dict[str, Any] = {"ref": ref}
    if confirmed is not None:
        try:
            kwargs["confirmed"] = json.loads(confirmed)
        except ValueError:
            kwargs["confirmed"] = confirmed  # a bare reference, e.g. a wire id
    ev = book.resolve(effect, step, failed=failed, absent=absent, by=by, evidence=evidence, **kwargs)
    click.echo(
        f"step {ev.step} of {ev.run_id} (key {ev.key}) resolved as {ev.status} (seq {ev.seq}); "
        f"continue it with `daybook resume {ev.run_id}`"
    )


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
    for noun in (runs, workers, demo, versions):
        for command in noun.COMMANDS:
            main.add_command(command)


_register()
