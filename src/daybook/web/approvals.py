"""The inspector's approval views: the approvals inbox (open gates across runs, with approve /
deny forms) and a run's gates section. Each gate shows its request as journaled: the act, who
may decide now, the approvals needed and given, its deadline and expiry policy, and the facts
its precheck read. Everything is escaped by `html`; the forms post to `actions`."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import quote

from ..book import Daybook
from ..gates.approval import gates
from ..gates.expiry import standing
from ..records import Event
from .html import Markup, field, form, hidden, join, link, payload, status, table, tag, when


def _run_href(run_id: str) -> str:
    return "/runs/" + quote(run_id, safe="")


def _terms(g: dict[str, Any]) -> list[Any]:
    """The cells every gate listing shares: approvals (given/needed, by whom), deadline (and
    overdue), what happens at expiry, and the facts the approvers saw (with the ask number)."""
    given = g.get("approved_by") or g.get("given") or []
    tally = f"{len(given)}/{g.get('approvals') or 1}" + (f" ({', '.join(map(str, given))})" if given else "")
    deadline: Any = when(g.get("deadline"))
    if g.get("overdue"):
        deadline = join([deadline, " ", tag("strong", "overdue", class_="overdue")])
    facts: Any = "-" if g.get("facts") is None else payload(g.get("facts"))
    if (g.get("ask") or 1) > 1:
        facts = join([facts, f" (asked again: ask {g['ask']}, after {g.get('first')})"])
    return [tally, deadline, g.get("on_expiry") or "deny", facts]


def gate_section(book: Daybook, run_id: str, events: list[Event]) -> Markup:
    """A run's gates (each request and where it stands) and every verdict attempt."""
    now = time.time()
    found = [standing(g, now) for g in gates(run_id, events)]
    verdicts = book.verdicts(run_id)
    if not found and not verdicts:
        return Markup("")
    return tag(
        "section",
        tag("h2", "Gates"),
        table(
            ["gate", "action", "approvers", "state", "since", "approvals", "deadline", "on expiry", "facts"],
            (
                [
                    g["gate_id"],
                    payload(g["action"]),
                    payload(g["approvers"]),
                    status(g["state"]),
                    when(g["since"]),
                    *_terms(g),
                ]
                for g in found
            ),
        ),
        table(
            ["gate", "verdict", "approver", "outcome", "at", "why"],
            (
                [
                    v["gate_id"],
                    v["state"],
                    v["approver"] or "-",
                    v["outcome"] or "-",
                    when(v["at"]),
                    v["reason"] or "",
                ]
                for v in verdicts
            ),
        ),
    )


def approvals_page(
    book: Daybook, csrf: str | None, who: str | None = None, why_not: str = "sign in to decide"
) -> Markup:
    """Open gates across runs, each with its request, where its approval request's delivery
    stands (`notice`) and approve / deny forms: given `csrf` (the signed-in `who` may decide),
    only on the gates whose approvers list `who` (or list nobody); the others say who may,
    as `Daybook.approve` refuses anyone else. Without `csrf`, each says `why_not`."""
    rows = []
    for g in book.approvals():
        acts: Any = why_not
        listed = g["approvers"]
        if csrf is not None and isinstance(listed, list) and who not in listed:
            acts = tag(
                "span",
                f"not yours to decide: approvers are {', '.join(map(str, listed))}",
                class_="not-listed",
            )
        elif csrf is not None:
            ids = join([hidden("run_id", str(g["run_id"])), hidden("gate", str(g["gate_id"]))])
            acts = join(
                [
                    form(
                        "/approvals/approve",
                        csrf,
                        ids,
                        field("reason", "reason"),
                        button="Approve",
                        class_="approve",
                    ),
                    form(
                        "/approvals/deny", csrf, ids, field("reason", "reason"), button="Deny", class_="deny"
                    ),
                ]
            )
        rows.append(
            [
                link(_run_href(str(g["run_id"])), g["run_id"]),
                g["gate_id"],
                payload(g["action"]),
                payload(g.get("about")),
                payload(g["approvers"]),
                when(g["since"]),
                *_terms(g),
                str(g.get("notice") or "none"),  # the outbox: queued, retrying, delivered, undelivered
                acts,
            ]
        )
    if not rows:
        return tag("p", "No gates waiting.", id="no-gates")
    headers = ["run", "gate", "action", "about", "approvers", "since", "approvals", "deadline", "on expiry"]
    return table([*headers, "facts", "notice", ""], rows, id="gates")
