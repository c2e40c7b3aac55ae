"""A sales agent: each prospect is a coordination entity (one agent works it at a time), and the
first contact with a prospect waits for a sales lead's approval (replay mode: support-like, the
commitments are rebuilt from the journal; the email is keyed by its decision, sent once).

    python examples/sales_agent.py          # two agents race for one prospect; one writes

The agent claims the prospect (a recorded step: replay sees the same outcome), records
`starting` in the prospect's log, drafts the email (scripted model), waits at the first-contact
gate (24 h), sends once approved, records `completed` and releases the prospect. A second agent
that finds the prospect held yields instead of writing to them too.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from typing import Any

import daybook
from daybook.demo.agent import http_json, status_of
from daybook.demo.bank import Bank


@daybook.tool(reconcile=status_of("emails", url_arg="outbox"))
def send_email(*, outbox: str, to: str, body: str, idempotency_key: str) -> Any:
    # Message-ID carries the key, so a re-send would be recognisable downstream.
    return http_json(
        "POST",
        f"{outbox}/emails",
        {"to": to, "body": body, "message_id": f"<{idempotency_key}@daybook>"},
        idempotency_key,
    )


def _draft(prompt: str) -> str:
    facts = json.loads(prompt)
    return f"Hi {facts['name']}, saw {facts['signal']}; worth a 15-minute call?"


@daybook.workflow(name="outreach")
def outreach(ctx: daybook.Context, outbox: str, prospect: str, agent: str) -> dict[str, Any]:
    entity = f"prospect:{prospect}"
    won = ctx.decide("claim", lambda: ctx.entity(entity).claim(agent, 600)).value
    if not won:
        return {"outcome": "yielded", "prospect": prospect}
    ctx.decide("log:starting", lambda: ctx.entity(entity).record(agent, "starting"))
    draft = ctx.llm(
        daybook.ScriptedLLM(_draft, model="scripted-sdr-1"),
        json.dumps({"name": prospect.title(), "signal": "your Series B"}),
    )
    verdict = ctx.gate("first_contact", decision=draft, approvers=["sales-lead"], timeout=24 * 3600)
    if not verdict.approved:
        ctx.decide("log:dropped", lambda: ctx.entity(entity).record(agent, "dropped"))
        ctx.decide("release", lambda: ctx.entity(entity).release(agent))
        return {"outcome": verdict.outcome, "prospect": prospect}
    sent = ctx.effect(
        send_email, decision=draft, outbox=outbox, to=f"{prospect}@example.com", body=draft.value["text"]
    )
    ctx.decide("log:completed", lambda: ctx.entity(entity).record(agent, "completed", {"email": sent["id"]}))
    ctx.decide("release", lambda: ctx.entity(entity).release(agent))
    return {"outcome": "sent", "prospect": prospect, "email": sent["id"]}


def main() -> int:
    db = os.environ.get("DAYBOOK_DB") or f"sqlite:///{tempfile.mkdtemp()}/sales.db"
    with Bank() as outbox, daybook.Daybook(db, inline_wait=0.2) as book:
        token = book.add_approver("sales-lead")
        try:
            book.run(outreach, outbox.url, "acme", "agent-a", run_id="sdr-a")
        except daybook.Suspended:
            print("[1] agent-a holds prospect acme and waits for first-contact approval")
        print(f"[2] agent-b: {book.run(outreach, outbox.url, 'acme', 'agent-b', run_id='sdr-b')}")
        book.approve("sdr-a", "sdr-a/3", approver="sales-lead", token=token, reason="good fit")
        print(f"[3] agent-a: {book.resume('sdr-a')}")
        log = [(e.agent, e.action) for e in book.entity("prospect:acme").view().log]
        print(f"[4] prospect log: {log}; emails sent: {outbox.stats()['executed'].get('emails', 0)}")
        return 0 if outbox.stats()["executed"].get("emails") == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
