"""Coordination entities from the command line: leases (every entity and its lease) and entity
(one entity's lease and log)."""

from __future__ import annotations

import click

from .. import Daybook
from . import render
from .app import fail, json_option, json_out, listing, say, with_book


@click.command()
@json_option()
@with_book(read_only=True)
def leases(book: Daybook, as_json: bool) -> None:
    """Coordination entities with their lease: holder, deadline, state (held, expired, free)."""
    listing(
        book.leases(),
        as_json,
        empty=f"no entities in {book.url}",
        headers=["entity", "holder", "deadline", "state"],
        row=lambda lease: [lease.name, lease.holder or "-", render.when(lease.deadline), lease.state],
        data=lambda lease: lease.as_dict(),
    )


@click.command()
@click.argument("name")
@json_option()
@with_book(read_only=True)
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
    say(f"entity {view.name}  {lease}\n")
    say(render.table(["id", "time", "at", "agent", "action", "data"], rows))


COMMANDS = (leases, entity)
