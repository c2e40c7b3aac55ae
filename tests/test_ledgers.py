"""The books a run keeps beyond its steps: why an effect happened, and what the run owes."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

import daybook
from daybook import Daybook, Suspended


@daybook.tool
def refund(*, amount: int, idempotency_key: str) -> dict[str, int]:
    return {"refunded": amount}


def test_a_promise_is_an_open_obligation_that_survives_a_suspend_and_is_fulfilled_later(
    db_url: str,
) -> None:
    @daybook.workflow
    def support(ctx: daybook.Context) -> str:
        reply = ctx.llm(daybook.ScriptedLLM(lambda p: "We'll refund $50 by Friday."), "turn 2")
        promise = ctx.obligation(
            "refund", owner="support-bot", due_in=2 * 86400, about={"amount": 50}, decision=reply
        )
        ctx.wait_for("turn-5")  # days may pass here; nothing runs
        ctx.effect(refund, decision=reply, amount=50)
        ctx.fulfil(promise, "refund sent")
        return promise

    with Daybook(db_url, inline_wait=0.05) as book:
        with pytest.raises(Suspended):
            book.run(support, run_id="ticket-9")
        [open_one] = book.obligations("open")
        assert open_one["id"] == "ticket-9/2" and open_one["kind"] == "refund"
        book.signal("ticket-9", "turn-5")
        assert book.resume("ticket-9") == "ticket-9/2"
        assert [o["state"] for o in book.obligations()] == ["fulfilled"]
        # `daybook why` shows the decision behind the refund.
        why = book.why("ticket-9", 4)
        assert why["decision"]["id"] == "ticket-9/1"  # type: ignore[index]
        assert "refund $50" in why["decision"]["value"]["text"]  # type: ignore[index]
    out = subprocess.run(
        [sys.executable, "-m", "daybook", "why", "ticket-9", "4", "--db", db_url],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0 and "decision ticket-9/1" in out.stdout


def test_an_obligation_past_due_shows_as_breached(db_url: str) -> None:
    @daybook.workflow
    def quote(ctx: daybook.Context) -> str:
        return ctx.obligation("quote_expiry", owner="sales", due_in=0.05, about="Q-17")

    with Daybook(db_url) as book:
        book.run(quote, run_id="quote")
        time.sleep(0.1)
        assert [o["state"] for o in book.obligations()] == ["breached"]
    out = subprocess.run(
        [sys.executable, "-m", "daybook", "obligations", "--status", "breached", "--db", db_url],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0 and "quote/1" in out.stdout and "breached" in out.stdout


def test_reconcile_reports_both_kinds_of_mismatch(db_url: str) -> None:
    import agents

    from daybook.demo.agent import http_json
    from daybook.demo.bank import Bank

    with Bank() as bank:

        @daybook.tool(reconcile=agents.status, list_keys=lambda: http_json("GET", f"{bank.url}/payments"))
        def pay_listed(*, bank: str, n: int, idempotency_key: str) -> object:
            return agents.post(f"{bank}/payments", {"n": n}, idempotency_key)

        @daybook.workflow
        def two(ctx: daybook.Context, url: str) -> None:
            ctx.effect(pay_listed, bank=url, n=1)
            ctx.effect(pay_listed, bank=url, n=2)

        with Daybook(db_url) as book:
            book.run(two, bank.url, run_id="rec")
            assert book.reconcile("rec") == []
            agents.post(f"{bank.url}/payments", {"n": 9}, "rec/99")  # the bank has one we never sent
            del bank.records["payments"]["rec/1"]  # and lost one we confirmed
            found = {(m["kind"], m["key"]) for m in book.reconcile("rec")}
            assert found == {("absent_there", "rec/1"), ("never_issued", "rec/99")}
            assert book.reconcile(day="1999-01-01") == []
