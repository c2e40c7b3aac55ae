"""No dead end after a bug: a parked or failed run continues after a fix without repeating an
act (`retry`), a run can be ended for good and its effects unwound once (`cancel`), and `show`
prints where the workflow raised. Asserted at the bank (its own counts), on both stores."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import agents
import pytest
from conftest import HERE, cli, cli_in_process, killed, last_json, run_child, run_worker

import daybook
from daybook import Daybook, RunStatus
from daybook.demo.bank import Bank


def _payments(bank: Bank) -> int:
    return len(bank.records.get("payments", {}))


def test_a_bug_after_a_confirmed_payment_parks_the_run_and_retry_after_the_fix_pays_once(
    book: Daybook, bank: Bank, tmp_path: Path
) -> None:
    fixed = tmp_path / "fixed"
    with pytest.raises(daybook.RunParked) as err:
        book.run(agents.buggy_legs, bank.url, 2, str(fixed), run_id="bug")
    assert isinstance(err.value, daybook.NeedsAttention) and isinstance(err.value, daybook.RunFailed)
    assert "daybook retry bug" in str(err.value)
    info = book.get_run("bug")
    assert info.status == RunStatus.NEEDS_ATTENTION and info.error is not None
    assert info.error["type"] == "KeyError" and "booked_by_leg[legs]" in info.error["traceback"]
    assert _payments(bank) == 2

    fixed.write_text("the fix")
    result = book.retry("bug", by="ops@example.com")
    assert len(result["booked"]) == 2
    assert _payments(bank) == 2  # the two confirmed payments were replayed, not made again
    assert all(n == 1 for n in bank.stats()["executions_by_key"].values())
    retried = [ev for ev in book.journal("bug") if ev.kind == "run_retried"]
    assert [(ev.data["by"], ev.data["from"]) for ev in retried] == [("ops@example.com", "needs_attention")]
    assert book.get_run("bug").status == RunStatus.COMPLETED


def test_without_retry_a_new_run_after_the_fix_pays_again(book: Daybook, bank: Bank, tmp_path: Path) -> None:
    # What daybook's retry exists to prevent: the only way on after a dead end was a new run.
    fixed = tmp_path / "fixed"
    with pytest.raises(daybook.RunFailed):
        book.run(agents.buggy_legs, bank.url, 2, str(fixed), run_id="first")
    fixed.write_text("the fix")
    book.run(agents.buggy_legs, bank.url, 2, str(fixed), run_id="second")
    assert _payments(bank) == 4


def test_a_run_that_fails_on_purpose_is_failed_and_retry_continues_it(book: Daybook, bank: Bank) -> None:
    state = {"refuse": True}

    @daybook.workflow
    def refusing(ctx: daybook.Context, url: str) -> str:
        paid = ctx.effect(agents.book_leg, bank=url, n=0, fail_inverse_of=-1)
        if state["refuse"]:
            raise daybook.WorkflowFailed("the customer is over their limit")
        return str(paid["id"])

    with pytest.raises(daybook.RunFailed) as err:
        book.run(refusing, bank.url, run_id="refused")
    assert not isinstance(err.value, daybook.RunParked)
    assert book.get_run("refused").status == RunStatus.FAILED
    with pytest.raises(daybook.RunFailed):
        book.resume("refused")  # resume gives the stored failure back: it is terminal
    state["refuse"] = False
    assert book.retry("refused").startswith("payment-")
    assert _payments(bank) == 1


def test_exceptions_a_workflow_declares_in_fail_on_end_the_run_as_failed(book: Daybook) -> None:
    class OutOfStock(Exception):
        pass

    @daybook.workflow(fail_on=(OutOfStock,))
    def shop(ctx: daybook.Context) -> None:
        raise OutOfStock("none left")

    with pytest.raises(daybook.RunFailed) as err:
        book.run(shop, run_id="shop")
    assert not isinstance(err.value, daybook.RunParked)
    assert book.get_run("shop").status == RunStatus.FAILED
    with pytest.raises(daybook.ConfigError, match="fail_on"):
        daybook.workflow(fail_on=[OutOfStock])  # type: ignore[arg-type]


def test_on_error_fail_makes_every_exception_terminal(db_url: str) -> None:
    @daybook.workflow
    def broken(ctx: daybook.Context) -> None:
        raise KeyError("bug")

    with Daybook(db_url, on_error="fail") as book:
        with pytest.raises(daybook.RunFailed) as err:
            book.run(broken, run_id="b")
        assert not isinstance(err.value, daybook.RunParked)
        assert book.get_run("b").status == RunStatus.FAILED
    with pytest.raises(daybook.ConfigError, match="on_error"):
        Daybook(db_url, on_error="ignore")


def test_retry_and_cancel_refuse_a_completed_run_and_say_why(book: Daybook) -> None:
    @daybook.workflow
    def fine(ctx: daybook.Context) -> int:
        return 1

    book.run(fine, run_id="done")
    with pytest.raises(daybook.ConfigError, match="cannot be retried: it completed"):
        book.retry("done")
    with pytest.raises(daybook.ConfigError, match="cannot be cancelled: it completed"):
        book.cancel("done")
    with pytest.raises(daybook.RunNotFound):
        book.retry("nope")


def test_retry_submit_leaves_the_run_to_a_worker(db_url: str, bank: Bank, tmp_path: Path) -> None:
    fixed = tmp_path / "fixed"
    with Daybook(db_url) as book:
        with pytest.raises(daybook.RunParked):
            book.run(agents.buggy_legs, bank.url, 1, str(fixed), run_id="w")
        fixed.write_text("the fix")
        assert book.retry("w", submit=True) is None
        assert book.get_run("w").status == RunStatus.PENDING
    proc = run_worker(db_url)
    assert proc.returncode == 0, proc.stderr
    with Daybook(db_url) as book:
        assert book.get_run("w").status == RunStatus.COMPLETED
    assert _payments(bank) == 1


def test_cancel_ends_a_waiting_run_for_good(book: Daybook) -> None:
    @daybook.workflow
    def waits(ctx: daybook.Context) -> Any:
        got = ctx.wait_for("go", timeout=3600)
        return None if got is None else got.payload

    book.inline_wait = 0
    with pytest.raises(daybook.Suspended):
        book.run(waits, run_id="waiting")
    assert book.cancel("waiting", by="ops") is None
    info = book.get_run("waiting")
    assert info.status == RunStatus.CANCELLED
    cancelled = [ev for ev in book.journal("waiting") if ev.kind == "run_cancelled"]
    assert cancelled[0].data["by"] == "ops" and cancelled[0].data["from"] == "suspended"
    with pytest.raises(daybook.RunCancelled):
        book.resume("waiting")
    with pytest.raises(daybook.ConfigError, match="cannot be retried: it was cancelled"):
        book.retry("waiting")
    assert book.cancel("waiting") is None  # cancelling again changes nothing
    assert len([ev for ev in book.journal("waiting") if ev.kind == "run_cancelled"]) == 1
    with pytest.raises(daybook.DaybookError):
        book.signal("waiting", "go", 1)  # a signal does not bring it back
    assert book.get_run("waiting").status == RunStatus.CANCELLED


def test_a_cancelled_run_is_never_taken_by_a_worker(db_url: str, bank: Bank) -> None:
    with Daybook(db_url) as book:
        book.submit(agents.payments, bank.url, 2, run_id="queued")
        book.cancel("queued")
    proc = run_worker(db_url)
    assert proc.returncode == 0, proc.stderr
    assert _payments(bank) == 0


def test_cancel_with_compensate_undoes_each_confirmed_effect_once_newest_first(
    book: Daybook, bank: Bank, tmp_path: Path
) -> None:
    with pytest.raises(daybook.RunParked):
        book.run(agents.buggy_legs, bank.url, 3, str(tmp_path / "never"), run_id="undo")
    report = book.cancel("undo", compensate=True)
    assert report is not None and report.complete
    assert report.compensated == ["undo/3", "undo/2", "undo/1"]
    assert list(bank.records["cancels"]) == ["comp/undo/3", "comp/undo/2", "comp/undo/1"]
    again = book.cancel("undo", compensate=True)  # already unwound: the stored report, nothing sent
    assert again is not None and again.compensated == report.compensated
    assert all(n == 1 for n in bank.stats()["executions_by_key"].values())
    assert book.get_run("undo").status == RunStatus.CANCELLED


def test_a_cancel_killed_mid_unwind_finishes_when_run_again_without_undoing_twice(
    db_url: str, bank: Bank, tmp_path: Path
) -> None:
    with Daybook(db_url) as book, pytest.raises(daybook.RunParked):
        book.run(agents.buggy_legs, bank.url, 3, str(tmp_path / "never"), run_id="cut")
    # Killed right after the second inverse's intent is journaled (before it is sent).
    proc = run_child(db_url, "cancel", "cut", "--kill-after", "intent:2")
    assert killed(proc), proc.stdout + proc.stderr
    assert len(bank.records.get("cancels", {})) == 1
    proc = run_child(db_url, "cancel", "cut")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert last_json(proc.stdout) == {"result": {"compensated": ["cut/3", "cut/2", "cut/1"]}}
    assert list(bank.records["cancels"]) == ["comp/cut/3", "comp/cut/2", "comp/cut/1"]
    assert all(n == 1 for n in bank.stats()["executions_by_key"].values())


def test_the_cli_shows_the_traceback_retries_and_cancels(db_url: str, bank: Bank, tmp_path: Path) -> None:
    fixed = tmp_path / "fixed"
    with Daybook(db_url) as book:
        for run_id in ("cli-a", "cli-b"):
            with pytest.raises(daybook.RunParked):
                book.run(agents.buggy_legs, bank.url, 1, str(fixed), run_id=run_id)
    shown = cli_in_process("show", "cli-a", db=db_url)
    assert shown.returncode == 0, shown.stderr
    assert "traceback" in shown.stdout and "booked_by_leg[legs]" in shown.stdout
    app = str(HERE / "agents.py")
    refused = cli("retry", "cli-a", "--app", app, db=db_url)
    assert refused.returncode == 3 and "KeyError" in refused.stderr  # still the bug: parked again
    fixed.write_text("the fix")
    retried = cli("retry", "cli-a", "--app", app, "--by", "ops", db=db_url)
    assert retried.returncode == 0, retried.stderr
    assert len(json.loads(retried.stdout)["booked"]) == 1
    cancelled = cli("cancel", "cli-b", "--compensate", "--app", app, db=db_url)
    assert cancelled.returncode == 0, cancelled.stderr
    assert json.loads(cancelled.stdout)["compensated"] == ["cli-b/1"]
    again = cli_in_process("retry", "cli-b", db=db_url)
    assert again.returncode == 1 and "cancelled" in again.stderr
    assert _payments(bank) == 2 and len(bank.records["cancels"]) == 1
