"""Timeouts: a run's execution timeout, a decision's start-to-close timeout with a retry
policy, and an effect's: a timed-out act is journaled `unknown` (TimedOut) and resolved by
asking the counterparty, so it happens once. Asserted at the bank, on both stores."""

from __future__ import annotations

import time
from typing import Any

import agents
import pytest

import daybook
from daybook import Daybook, RunStatus
from daybook.demo.bank import Bank


@daybook.workflow(name="to_waiting", timeout=1.0)
def waiting(ctx: daybook.Context) -> str:
    ctx.wait_for("go", timeout=3600)
    return "went"


@daybook.workflow(name="to_steps", timeout=1.0)
def stepping(ctx: daybook.Context) -> int:
    for i in range(50):
        ctx.decide(f"tick{i}", time.sleep, 0.1)
    return 50


def test_a_run_past_its_execution_timeout_fails_with_timed_out(book: Daybook) -> None:
    with pytest.raises(daybook.RunFailed, match="TimedOut"):
        book.run(stepping, run_id="slow")
    assert book.get_run("slow").status == RunStatus.FAILED
    ticks = [ev for ev in book.journal("slow") if ev.kind == "decision"]
    assert 3 <= len(ticks) < 50  # it stopped at a step boundary past the deadline


def test_a_waiting_run_is_woken_at_its_deadline_and_times_out(book: Daybook) -> None:
    book.inline_wait = 0
    with pytest.raises(daybook.Suspended):
        book.run(waiting, run_id="idle")
    info = book.get_run("idle")
    assert info.wake_at is not None and info.wake_at <= info.created_at + 1.0 + 1e-6
    time.sleep(1.1)
    with pytest.raises(daybook.RunFailed, match="TimedOut"):
        book.resume("idle")
    assert book.get_run("idle").status == RunStatus.FAILED


def test_a_bad_workflow_timeout_is_refused() -> None:
    with pytest.raises(daybook.ConfigError, match="timeout"):
        daybook.workflow(lambda ctx: None, name="to_bad", timeout=-1)


SLOW: list[float] = []


def _flaky_answer() -> str:
    SLOW.append(time.monotonic())
    if len(SLOW) == 1:
        time.sleep(1.0)  # the first attempt hangs past the timeout
    return "answer"


@daybook.workflow(name="to_decide")
def deciding(ctx: daybook.Context, retries: int) -> str:
    retry = daybook.Retry(max_attempts=retries, backoff=0.01)
    return str(ctx.decide("ask", _flaky_answer, timeout=0.3, retry=retry).value)


def test_a_decision_past_its_timeout_is_retried_by_its_policy_and_fails_when_spent(book: Daybook) -> None:
    SLOW.clear()
    assert book.run(deciding, 3, run_id="ok") == "answer"
    assert len(SLOW) == 2
    recorded = [ev for ev in book.journal("ok") if ev.kind == "decision"]
    assert [ev.status for ev in recorded] == ["recorded"]  # one row: the final outcome
    SLOW.clear()
    with pytest.raises(daybook.RunFailed, match="TimedOut"):
        book.run(deciding, 1, run_id="spent")
    failed = [ev for ev in book.journal("spent") if ev.kind == "decision"]
    assert failed[0].status == "failed" and failed[0].data["error"]["type"] == "TimedOut"


@daybook.tool(reconcile=agents.status, retry=daybook.Retry(max_attempts=3, backoff=0.01, timeout=0.4))
def slow_transfer(*, bank: str, n: int, idempotency_key: str) -> Any:
    done = agents.post(f"{bank}/payments", {"n": n}, idempotency_key)  # it lands at the bank...
    time.sleep(1.5)  # ...and the answer comes too late
    return done


@daybook.workflow(name="to_effect")
def transfer(ctx: daybook.Context, bank: str) -> Any:
    return ctx.effect(slow_transfer, bank=bank, n=1)


def test_an_effect_past_its_timeout_is_unknown_and_resolved_by_asking_so_it_happens_once(
    book: Daybook, bank: Bank
) -> None:
    done = book.run(transfer, bank.url, run_id="t")
    assert done["n"] == 1
    outcomes = [ev for ev in book.journal("t") if ev.kind == "outcome"]
    assert [ev.status for ev in outcomes] == ["unknown", "confirmed"]
    assert outcomes[0].data["error"]["type"] == "TimedOut"
    assert outcomes[1].data.get("resolved_by")
    assert len(bank.records["payments"]) == 1
