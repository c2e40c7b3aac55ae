"""Unknown outcomes are resolved by asking, retried under one key, or handed to a person."""

from __future__ import annotations

import time

import agents
import pytest

import daybook
from daybook import Daybook, DedupWindowExpired, Kind, NeedsAttention, RunStatus


def _outcomes(book: Daybook, run_id: str, step: int) -> list[str | None]:
    return [e.status for e in book.journal(run_id) if e.step == step and e.kind == Kind.OUTCOME]


def test_counterparty_that_executes_and_drops_the_reply_gives_unknown_then_reconciled(
    book: Daybook,
    bank,  # type: ignore[no-untyped-def]
) -> None:
    bank.faults.drop_after_execute = 1
    result = book.run(agents.payments, bank.url, 2, run_id="drop")
    # J3: the dropped reply is `unknown`, never `failed` or `confirmed`; P2(a): asking the bank
    # confirms it with the bank's own id, and the bank executed it once.
    assert _outcomes(book, "drop", 2) == ["unknown", "confirmed"]
    assert bank.stats()["executions_by_key"]["drop/2"] == 1
    assert bank.stats()["requests_by_key"]["drop/2"] == 1
    assert result[0] == bank.records["payments"]["drop/2"]["id"]


def test_transient_failures_are_retried_under_the_same_key(
    book: Daybook,
    bank,  # type: ignore[no-untyped-def]
) -> None:
    bank.faults.refuse = 2  # 503 twice, then success
    book.run(agents.payments, bank.url, 1, run_id="flaky")
    # J12: three requests reach the counterparty, all with one key; it executes once.
    assert bank.stats()["requests_by_key"] == {"flaky/2": 3}
    assert bank.stats()["executions_by_key"] == {"flaky/2": 1}
    assert _outcomes(book, "flaky", 2) == ["failed", "failed", "confirmed"]
    attempts = [e.attempt for e in book.journal("flaky") if e.step == 2]
    assert attempts == [1, 1, 2, 2, 3, 3]


def test_retries_that_run_out_fail_the_run_with_the_error(
    book: Daybook,
    bank,  # type: ignore[no-untyped-def]
) -> None:
    bank.faults.refuse = 100
    with pytest.raises(daybook.RunFailed, match="EffectFailed"):
        book.run(agents.payments, bank.url, 1, run_id="down")
    assert book.get_run("down").status == RunStatus.FAILED
    assert bank.stats()["requests_by_key"] == {"down/2": 5}


def test_unknown_for_a_tool_with_no_reconcile_needs_attention_and_is_not_resent(
    book: Daybook,
    bank,  # type: ignore[no-untyped-def]
) -> None:
    @daybook.workflow
    def blind_id(ctx: daybook.Context, url: str) -> str:  # not `blind`: agents.blind has that name
        return str(ctx.effect(agents.pay_blind, bank=url, n=1)["id"])

    bank.faults.drop_after_execute = 1
    with pytest.raises(NeedsAttention) as err:
        book.run(blind_id, bank.url, run_id="blind")
    message = str(err.value)
    assert "blind/1" in message and "pay_blind" in message and "daybook resolve" in message
    assert book.get_run("blind").status == RunStatus.NEEDS_ATTENTION
    assert [u["key"] for u in book.unknowns()] == ["blind/1"]
    # Resuming again still does not guess: the bank saw exactly one request.
    with pytest.raises(NeedsAttention):
        book.resume("blind")
    assert bank.stats()["requests_by_key"] == {"blind/1": 1}

    # A person checks with the bank and records the evidence; the run then finishes.
    wire = bank.records["payments"]["blind/1"]
    book.resolve("blind", 1, confirmed=wire, by="treasurer", evidence="bank statement line 4")
    assert book.resume("blind") == wire["id"]
    last = [e for e in book.journal("blind") if e.step == 1][-1]
    assert last.data["by"] == "treasurer" and last.data["resolved_by"] == "manual"
    assert bank.stats()["requests_by_key"] == {"blind/1": 1}
    assert book.unknowns() == []


def test_resolve_absent_resends_under_the_same_key(
    book: Daybook,
    bank,  # type: ignore[no-untyped-def]
) -> None:
    @daybook.workflow
    def blind2(ctx: daybook.Context, url: str) -> str:
        return str(ctx.effect(agents.pay_blind, bank=url, n=1)["id"])

    bank.faults.refuse = 0
    bank.faults.drop_after_execute = 1
    with pytest.raises(NeedsAttention):
        book.run(blind2, bank.url, run_id="absent")
    bank.records["payments"].clear()  # the bank lost it (as if it never arrived)
    book.resolve("absent", 1, absent=True, by="ops")
    book.resume("absent")
    assert bank.stats()["requests_by_key"] == {"absent/1": 2}
    assert _outcomes(book, "absent", 1) == ["unknown", "unknown", "confirmed"]


def test_idempotent_tool_is_resent_with_the_same_key_after_an_unknown(
    book: Daybook,
    bank,  # type: ignore[no-untyped-def]
) -> None:
    @daybook.workflow
    def idem(ctx: daybook.Context, url: str) -> str:
        return str(ctx.effect(agents.pay_idem, bank=url, n=1)["id"])

    bank.faults.drop_after_execute = 1
    book.run(idem, bank.url, run_id="idem")
    # Re-fired under one key; the bank's dedup returned the original, executed once.
    assert bank.stats()["requests_by_key"] == {"idem/1": 2}
    assert bank.stats()["executions_by_key"] == {"idem/1": 1}


def test_reconcile_not_found_resends_under_the_same_key(
    book: Daybook,
    bank,  # type: ignore[no-untyped-def]
) -> None:
    calls: list[str] = []

    @daybook.tool(reconcile=lambda key, args: daybook.NotFound())
    def lossy(*, n: int, idempotency_key: str) -> int:
        calls.append(idempotency_key)
        if len(calls) == 1:
            raise TimeoutError("no answer")
        return n

    @daybook.workflow
    def lossy_wf(ctx: daybook.Context) -> int:
        return ctx.effect(lossy, n=5)

    assert book.run(lossy_wf, run_id="lossy") == 5
    assert calls == ["lossy/1", "lossy/1"]  # P2(b): absent -> re-sent, same key


def test_counterparty_that_cannot_say_escalates_after_the_configured_rounds(
    book: Daybook,
) -> None:
    asked: list[str] = []

    def pending(key: str, args: dict[str, object]) -> daybook.StillUnknown:
        asked.append(key)
        return daybook.StillUnknown()

    @daybook.tool(reconcile=pending, retry=daybook.Retry(backoff=0.001, reconcile_rounds=3))
    def vague(*, idempotency_key: str) -> None:
        raise TimeoutError("no answer")

    @daybook.workflow
    def vague_wf(ctx: daybook.Context) -> None:
        ctx.effect(vague)

    with pytest.raises(NeedsAttention, match="still could not say after 3"):
        book.run(vague_wf, run_id="vague")
    assert asked == ["vague/1"] * 3


def test_expired_dedup_window_is_never_trusted_for_a_resend(
    book: Daybook,
) -> None:
    sent: list[str] = []

    @daybook.tool(idempotent=True, dedup_window=0.2)
    def windowed(*, idempotency_key: str) -> str:
        sent.append(idempotency_key)
        time.sleep(0.3)
        raise TimeoutError("no answer")

    @daybook.workflow
    def windowed_wf(ctx: daybook.Context) -> None:
        ctx.effect(windowed)

    with pytest.raises(DedupWindowExpired, match=r"forgets keys after 0\.2s"):
        book.run(windowed_wf, run_id="window")
    assert sent == ["window/1"]  # K4: not re-sent past the window
    assert book.get_run("window").status == RunStatus.NEEDS_ATTENTION


def test_a_tool_that_refuses_for_certain_fails_without_retry(book: Daybook) -> None:
    attempts: list[int] = []

    @daybook.tool
    def refuses(*, idempotency_key: str) -> None:
        attempts.append(1)
        raise ValueError("insufficient funds")

    @daybook.workflow
    def refuse_wf(ctx: daybook.Context) -> str:
        try:
            ctx.effect(refuses)
        except daybook.EffectFailed as exc:
            return f"handled: {exc.error['message']}"
        return "no"

    assert book.run(refuse_wf, run_id="refuse") == "handled: insufficient funds"
    # Attaching to the finished run returns its recorded result without calling the tool.
    assert book.run(refuse_wf, run_id="refuse") == "handled: insufficient funds"
    assert attempts == [1]
