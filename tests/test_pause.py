"""Pause a run and resume it later from another process (S3, S4): a paused run holds no process,
no worker takes it, and resuming goes on from its last committed step without repeating one.
Asserted at the bank (its own counts), on both stores."""

from __future__ import annotations

import time
from pathlib import Path

import agents
import pytest
from conftest import cli_in_process, last_json, run_child, run_worker, start_child, wait_until

import daybook
from daybook import Daybook, RunStatus
from daybook.demo.bank import Bank


def test_pausing_a_run_mid_flight_stops_it_at_the_next_step_and_resume_elsewhere_pays_each_once(
    db_url: str, bank: Bank
) -> None:
    # A child process pays 10 times, 0.3 s each; the pause arrives while it pays.
    child = start_child(db_url, "start", "long", "slow_payments", f'["{bank.url}", 10, 0.3]')
    with Daybook(db_url) as book:
        wait_until(lambda: len(bank.records.get("payments", {})) >= 1)
        assert book.pause("long", by="ana") == "requested"
        wait_until(lambda: book.get_run("long").status == RunStatus.PAUSED)
    out, err = child.communicate(timeout=300)
    assert child.returncode == 3 and "RunPaused" in out, out + err
    paid_at_pause = len(bank.records["payments"])
    assert 1 <= paid_at_pause < 10
    with Daybook(db_url) as book:
        journal = book.journal("long")
        # The act in flight when the request came finished and was journaled before the pause.
        intents = [ev for ev in journal if ev.kind == "intent"]
        outcomes = [ev for ev in journal if ev.kind == "outcome" and ev.status == "confirmed"]
        assert len(intents) == len(outcomes) == paid_at_pause
        paused = [ev for ev in journal if ev.kind == "run_paused"]
        assert len(paused) == 1 and paused[0].data["by"] == "ana"
        assert book.get_run("long").lease_owner is None  # no process holds it
    # A worker leaves a paused run alone.
    proc = run_worker(db_url)
    assert proc.returncode == 0, proc.stderr
    assert len(bank.records["payments"]) == paid_at_pause
    # Resumed from a fresh process: it goes on, each payment made once.
    proc = run_child(db_url, "resume", "long")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(last_json(proc.stdout)["result"]) == 10  # type: ignore[index]
    assert len(bank.records["payments"]) == 10
    assert all(n == 1 for n in bank.stats()["executions_by_key"].values())


def test_a_waiting_run_pauses_at_once_and_a_due_timer_does_not_wake_it(db_url: str, bank: Bank) -> None:
    with Daybook(db_url, inline_wait=0) as book:
        with pytest.raises(daybook.Suspended):
            book.run(agents.timed, bank.url, 0.2, run_id="timer")
        assert book.pause("timer", by="ops") == "paused"
        assert book.pause("timer") == "already"
        time.sleep(0.3)  # the timer is due now
    assert run_worker(db_url).returncode == 0
    with Daybook(db_url) as book:
        assert book.get_run("timer").status == RunStatus.PAUSED
        assert "payments" not in bank.records
        assert book.resume("timer").startswith("payment-")
    assert len(bank.records["payments"]) == 1


def test_a_paused_run_can_be_cancelled_and_a_finished_one_cannot_be_paused(book: Daybook) -> None:
    @daybook.workflow
    def waits(ctx: daybook.Context) -> object:
        return ctx.wait_for("go", timeout=3600)

    book.inline_wait = 0
    with pytest.raises(daybook.Suspended):
        book.run(waits, run_id="w")
    book.pause("w")
    book.cancel("w")
    assert book.get_run("w").status == RunStatus.CANCELLED
    with pytest.raises(daybook.ConfigError, match="cannot be paused: it was cancelled"):
        book.pause("w")
    with pytest.raises(daybook.ConfigError, match="reserved"):
        book.signal("w", "pause:", {})


def test_the_cli_pauses_and_resumes(db_url: str, bank: Bank, tmp_path: Path) -> None:
    with Daybook(db_url, inline_wait=0) as book, pytest.raises(daybook.Suspended):
        book.run(agents.timed, bank.url, 3600, run_id="cli-timer")
    paused = cli_in_process("pause", "cli-timer", "--by", "ana", db=db_url)
    assert paused.returncode == 0 and "is paused" in paused.stdout, paused.stderr
    runs = cli_in_process("runs", "--status", "paused", db=db_url)
    assert "cli-timer" in runs.stdout
    again = cli_in_process("pause", "cli-timer", db=db_url)
    assert "already paused" in again.stdout
    missing = cli_in_process("pause", "nope", db=db_url)
    assert missing.returncode == 1 and "no run 'nope'" in missing.stderr
