"""The treasury agent of the demo: read balances, plan the sweep (scripted model), wire, book, post.

Its tools talk HTTP to the bank with the run's idempotency key in an `Idempotency-Key` header,
and declare `reconcile` (ask the bank by key) so an unknown outcome is resolved by asking.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from ..context import Context
from ..journal.llm import ScriptedLLM
from ..journal.tool import Confirmed, NotFound, ReconcileResult, StillUnknown, TransientError, tool
from ..records import Why
from ..runtime.workflow import workflow

POLICY = {
    "version": "cfo-policy-2026-11-22",
    "targets": {"USD-operating": 1_000_000},
    "sweep_to": {"USD-operating": "MMF-GOVT-7"},
    "ask_me_first_above": 5_000_000,
}


def http_json(method: str, url: str, body: Any = None, key: str | None = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("Idempotency-Key", key)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        if exc.code >= 500:
            raise TransientError(f"{method} {url}: HTTP {exc.code}") from None
        raise


def status_of(collection: str, url_arg: str = "bank") -> Any:
    """A reconcile hook: ask the counterparty (whose URL is the call's `url_arg` argument) about
    a key in `collection`."""

    def reconcile(key: str, args: dict[str, Any]) -> ReconcileResult:
        try:
            return Confirmed(http_json("GET", f"{args[url_arg]}/{collection}/{key}"))
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return NotFound()
            return StillUnknown()
        except (TransientError, OSError):
            return StillUnknown()

    return reconcile


def _id(result: Any) -> Any:
    return result.get("id") if isinstance(result, dict) else None


@tool(reconcile=status_of("wires"), reference=_id)
def send_wire(*, bank: str, to: str, amount: int, currency: str, idempotency_key: str) -> Any:
    return http_json(
        "POST", f"{bank}/wires", {"to": to, "amount": amount, "currency": currency}, idempotency_key
    )


@tool(reconcile=status_of("bookings"), reference=_id)
def book_custody(*, bank: str, wire_id: str, fund: str, idempotency_key: str) -> Any:
    return http_json("POST", f"{bank}/bookings", {"wire_id": wire_id, "fund": fund}, idempotency_key)


@tool(reconcile=status_of("gl"), reference=_id)
def post_gl(*, bank: str, lines: list[dict[str, Any]], idempotency_key: str) -> Any:
    return http_json("POST", f"{bank}/gl", {"lines": lines}, idempotency_key)


def planner() -> ScriptedLLM:
    """The scripted model: reads the prompt's balances and answers with a sweep plan."""

    def answer(prompt: str) -> str:
        facts = json.loads(prompt.split("FACTS:", 1)[1])
        legs = []
        for account, target in facts["policy"]["targets"].items():
            excess = facts["balances"].get(account, 0) - target
            if excess > 0:
                legs.append(
                    {
                        "from": account,
                        "to": facts["policy"]["sweep_to"][account],
                        "amount": excess,
                        "currency": account[:3],
                    }
                )
        return json.dumps({"legs": legs, "why": "sweep the excess over target to the fund"})

    return ScriptedLLM(answer, model="scripted-treasury-1")


@workflow(name="treasury")
def treasury(ctx: Context, bank: str, day: str) -> dict[str, Any]:
    balances = ctx.decide("read_balances", http_json, "GET", f"{bank}/balances").value
    prompt = "Plan today's sweeps. FACTS:" + json.dumps({"policy": POLICY, "balances": balances})
    plan = ctx.llm(
        planner(),
        prompt,
        why=Why(
            policy="cfo-sweep-policy",
            version=str(POLICY["version"]),
            observation={"balances": balances},
            alternatives=["hold the excess in the operating accounts", "ask the treasurer first"],
        ),
    )
    legs = json.loads(plan.value["text"])["legs"]
    # What the run owes, as data: the GL entry for today's sweeps (fulfilled below), and the fund's
    # settlement confirmation, which comes days later on another channel (stays open).
    gl_due = ctx.obligation("post-gl-entry", owner="treasury-agent", due_in=3600, about={"day": day})
    done = []
    for leg in legs:
        wire = ctx.effect(
            send_wire, decision=plan, bank=bank, to=leg["to"], amount=leg["amount"], currency=leg["currency"]
        )
        booking = ctx.effect(book_custody, decision=plan, bank=bank, wire_id=wire["id"], fund=leg["to"])
        ctx.obligation(
            "settlement-confirmation",
            owner="treasury-ops",
            due_in=2 * 24 * 3600,
            about={"wire": wire["id"], "fund": leg["to"]},
            decision=plan,
        )
        done.append({"wire": wire["id"], "amount": leg["amount"], "booking": booking["id"]})
    entry = ctx.effect(
        post_gl,
        decision=plan,
        bank=bank,
        lines=[{"account": leg["from"], "credit": leg["amount"]} for leg in legs]
        + [{"account": leg["to"], "debit": leg["amount"]} for leg in legs],
    )
    ctx.fulfil(gl_due, note=f"GL entry {entry['id']}")
    return {"day": day, "policy": POLICY["version"], "sweeps": done, "gl": entry["id"]}
