"""`effect_class="idempotent"` is a promise that a re-send under the same key is safe: an unknown
outcome (here a call past its start-to-close timeout) is re-sent with the same key rather than
left for a person, and the counterparty, deduplicating by key, pays once. Both stores."""

from __future__ import annotations

import time
from typing import Any

import agents

import daybook
from daybook import Daybook
from daybook.demo.bank import Bank


@daybook.tool(effect_class="idempotent", retry=daybook.Retry(max_attempts=3, backoff=0.01, timeout=0.4))
def late_pay(*, bank: str, n: int, idempotency_key: str) -> Any:
    done = agents.post(f"{bank}/payments", {"n": n}, idempotency_key)
    if not LATE:
        LATE.append(True)
        time.sleep(1.0)  # the first answer comes too late: the outcome is unknown
    return done


LATE: list[bool] = []


@daybook.workflow(name="idem_class")
def paying(ctx: daybook.Context, bank: str) -> Any:
    return ctx.effect(late_pay, bank=bank, n=7)


def test_an_idempotent_class_tool_is_re_sent_under_its_key_and_pays_once(book: Daybook, bank: Bank) -> None:
    LATE.clear()
    assert late_pay.idempotent and late_pay.profile()["effect_class"] == "idempotent"
    assert book.run(paying, bank.url, run_id="i")["n"] == 7
    rows = [(ev.kind, ev.status) for ev in book.journal("i") if ev.kind in ("outcome", "attempt")]
    assert rows == [("outcome", "unknown"), ("attempt", None), ("outcome", "confirmed")]
    assert len(bank.records["payments"]) == 1  # the re-send was deduplicated by its key
    assert sum(bank.stats()["executions_by_key"].values()) == 1
