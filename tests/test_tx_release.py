"""A transaction attempt never holds its scopes for good (audit T1), on both stores: a run that
ends releases what it holds, an operator can release an attempt no execution will finish
(`daybook tx release`, journaled), a released attempt is aborted by its run's next execution
(its inverse runs once at the bank) and retried; a wait for a frontier ends (`wait=`, across
suspensions) with FrontierTimeout."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from agents import book_leg
from conftest import HERE, cli, cli_in_process, killed, wait_until

import daybook
from daybook import Daybook
from daybook.demo.bank import Bank

CHILD = str(HERE / "tx_child.py")


@daybook.workflow(name="tx_rel_hold")
def hold(ctx: daybook.Context, bank: str) -> dict[str, Any]:
    """Book a leg in a transaction, then sleep inside it (suspended, the attempt left open)."""
    with ctx.transaction(scopes=["api:bank:**"], retries=1) as tx:
        leg = ctx.effect(book_leg, bank=bank, n=1, fail_inverse_of=-1)
        ctx.sleep(1.5)
    return {"attempt": tx.attempt, "leg": leg["id"]}


@daybook.workflow(name="tx_rel_wait")
def waiter(ctx: daybook.Context, wait: float | None) -> int:
    with ctx.transaction(scopes=["api:bank:payments"], wait=wait) as tx:
        ctx.decide("x", lambda: 1)
    return tx.epoch


def _legs(bank: Bank) -> tuple[int, int]:
    return len(bank.records.get("payments", {})), len(bank.records.get("cancels", {}))


def _released_rows(book: Daybook, run_id: str) -> list[dict[str, Any]]:
    return [dict(ev.data) for ev in book.journal(run_id) if ev.kind == "tx_released"]


def _suspended_holder(book: Daybook, bank: Bank) -> str:
    book.inline_wait = 0.0
    with pytest.raises(daybook.Suspended):
        book.run(hold, bank.url, run_id="p")
    [row] = book.transactions("p")
    assert row["status"] == "open"
    return str(row["tx_id"])


def test_an_operator_releases_an_attempt_and_its_run_later_undoes_it_once_and_retries(
    db_url: str, bank: Bank
) -> None:
    with Daybook(db_url) as book:
        tx_id = _suspended_holder(book, bank)
        book.frontier_spin = book.inline_wait  # as a worker's handle does: a blocked run suspends
        with pytest.raises(daybook.Suspended):  # waits on p's scope: suspended, not blocked
            book.run(waiter, None, run_id="w")
        done = cli_in_process(
            "tx", "release", tx_id, "--as", "alice", "--reason", "p is parked for the weekend", db=db_url
        )
        assert done.returncode == 0, done.stderr
        assert f"released transaction {tx_id}" in done.stdout
        assert [f["held_by"]["run_id"] for f in book.frontiers()] == ["w"]  # p holds nothing
        [row] = _released_rows(book, "p")
        assert row == {"tx_id": tx_id, "by": "alice", "reason": "p is parked for the weekend", "from": "open"}
        assert isinstance(book.resume("w"), int)  # the waiter goes on at once
        book.inline_wait = 30.0
        result = book.resume("p")  # its attempt was released: aborted here, then retried
        assert book.frontiers() == []
    assert result["attempt"] == 2
    assert _legs(bank) == (2, 1)  # the released attempt's leg cancelled exactly once
    assert all(n == 1 for n in bank.stats()["executions_by_key"].values())
    with Daybook(db_url) as book:
        assert [t["status"] for t in book.transactions("p")] == ["aborted", "committed"]


def test_tx_release_of_an_unknown_or_ended_attempt_is_a_clean_error(db_url: str, bank: Bank) -> None:
    with Daybook(db_url) as book:
        tx_id = _suspended_holder(book, bank)
    unknown = cli_in_process("tx", "release", "nope/tx/9", "--as", "alice", "--reason", "r", db=db_url)
    assert unknown.returncode != 0 and "no transaction attempt 'nope/tx/9'" in unknown.stderr
    assert "Traceback" not in unknown.stderr + unknown.stdout
    missing = cli_in_process("tx", "release", tx_id, "--as", "alice", db=db_url)
    assert missing.returncode == 2 and "--reason" in missing.stderr
    blank = cli_in_process("tx", "release", tx_id, "--as", "alice", "--reason", " ", db=db_url)
    assert blank.returncode != 0 and "needs a reason" in blank.stderr
    assert cli_in_process("tx", "release", tx_id, "--as", "alice", "--reason", "r", db=db_url).returncode == 0
    again = cli_in_process("tx", "release", tx_id, "--as", "alice", "--reason", "r", db=db_url)
    assert again.returncode != 0 and "already ended" in again.stderr
    assert "Traceback" not in again.stderr
    with Daybook(db_url) as book, pytest.raises(daybook.TransactionNotFound):
        book.release_transaction("nope/tx/9", reason="r")


@pytest.mark.slow
def test_tx_release_refuses_an_attempt_a_live_process_is_executing(db_url: str, tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, CHILD, db_url, "count", "h", str(tmp_path), "x", "1", "hold"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(lambda: Daybook(db_url).transactions("h"), timeout=120)
        with Daybook(db_url) as book:
            tx_id = str(book.transactions("h")[0]["tx_id"])
        refused = cli("tx", "release", tx_id, "--as", "alice", "--reason", "r", db=db_url)
        assert refused.returncode != 0 and "live process" in refused.stderr, refused.stderr
        (tmp_path / "x.go").write_text("go")
        out, err = holder.communicate(timeout=300)
        assert holder.returncode == 0, out + err
    finally:
        holder.kill()
    assert (tmp_path / "x").read_text() == "1"


@pytest.mark.parametrize("compensate", [False, True])
def test_a_cancelled_run_holds_no_scope(db_url: str, bank: Bank, compensate: bool) -> None:
    with Daybook(db_url) as book:
        _suspended_holder(book, bank)
        book.cancel("p", compensate, by="bob")
        assert book.frontiers() == []
        [row] = _released_rows(book, "p")
        assert (row["by"], row["reason"]) == ("daybook", "run 'p' cancelled")
        assert [t["status"] for t in book.transactions("p")] == ["aborted"]
        assert isinstance(book.run(waiter, 5.0, run_id="w"), int)
    assert _legs(bank) == (1, 1 if compensate else 0)  # cancel --compensate undid the leg once


@pytest.mark.slow
def test_a_cancel_killed_before_its_release_is_healed_by_the_next_waiter(db_url: str, bank: Bank) -> None:
    with Daybook(db_url) as book:
        tx_id = _suspended_holder(book, bank)
    cut = subprocess.run(
        [sys.executable, CHILD, db_url, "cancel", "p", "--kill-tx", "before:tx_mark:1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert killed(cut), cut.stdout + cut.stderr
    with Daybook(db_url) as book:
        assert book.get_run("p").status == "cancelled"
        assert [f["held_by"]["tx_id"] for f in book.frontiers()] == [tx_id]  # the crash window
        book.inline_wait = 5.0
        assert isinstance(book.run(waiter, 5.0, run_id="w"), int)
        assert book.frontiers() == []
        [row] = _released_rows(book, "p")
        assert (row["by"], row["reason"]) == ("daybook", "run 'p' cancelled")


def test_a_frontier_wait_in_book_run_waits_in_the_process_and_ends_with_frontier_timeout(
    db_url: str, bank: Bank
) -> None:
    # A handle's default: whoever calls book.run wants the result, so the wait stays here.
    with Daybook(db_url) as book:
        _suspended_holder(book, bank)
        started = time.monotonic()
        with pytest.raises(daybook.RunParked, match="FrontierTimeout"):
            book.run(waiter, 1.0, run_id="w")  # never Suspended: it waited here, then gave up
        assert time.monotonic() - started >= 1.0


def test_a_frontier_wait_ends_with_frontier_timeout_across_suspensions(db_url: str, bank: Bank) -> None:
    with Daybook(db_url) as book:
        _suspended_holder(book, bank)
        book.frontier_spin = book.inline_wait  # as a worker's handle does: a blocked run suspends
        with pytest.raises(daybook.Suspended):
            book.run(waiter, 1.0, run_id="w")
        time.sleep(1.2)  # its wait= counts from its epoch, not from this execution
        with pytest.raises(daybook.DaybookError) as raised:
            book.resume("w")
        assert "FrontierTimeout" in str(raised.value) or "waited past its wait=" in str(raised.value)
        statuses = {t["run_id"]: t["status"] for t in book.transactions()}
        assert statuses["w"] == "aborted" and statuses["p"] == "open"


@pytest.mark.parametrize("wait", [-1, "soon", True])
def test_a_bad_wait_is_refused_with_what_to_give(db_url: str, wait: Any) -> None:
    with Daybook(db_url) as book, pytest.raises(daybook.DaybookError) as raised:
        book.run(waiter, wait, run_id="bad")
    assert "ctx.transaction(wait=" in str(raised.value) and "seconds >= 0" in str(raised.value)


@daybook.workflow(name="tx_rel_timed", timeout=1.0)
def timed(ctx: daybook.Context, bank: str) -> int:
    """Suspended inside a transaction past its execution timeout: the run fails there."""
    with ctx.transaction(scopes=["api:bank:**"]):
        ctx.effect(book_leg, bank=bank, n=1, fail_inverse_of=-1)
        ctx.sleep(30)
    return 1


def test_a_run_that_fails_inside_a_transaction_holds_no_scope(db_url: str, bank: Bank) -> None:
    with Daybook(db_url) as book:
        book.inline_wait = 0.0
        with pytest.raises(daybook.Suspended):
            book.run(timed, bank.url, run_id="t")
        time.sleep(1.1)  # past its execution timeout: woken to fail
        with pytest.raises(daybook.RunFailed):
            book.resume("t")
        assert book.get_run("t").status == "failed"
        assert book.frontiers() == []
        [row] = _released_rows(book, "t")
        assert (row["by"], row["reason"]) == ("daybook", "run 't' failed")
        assert isinstance(book.run(waiter, 5.0, run_id="w"), int)


def test_a_paused_run_that_expires_holds_no_scope(db_url: str, bank: Bank) -> None:
    with Daybook(db_url) as book:
        _suspended_holder(book, bank)
        assert book.pause("p", by="bob") == "paused"
        time.sleep(0.05)
        done = book.gc(0.0, by="ops")
        assert [e["run_id"] for e in done["expired"]] == ["p"]  # type: ignore[index, union-attr]
        assert book.get_run("p").status == "expired"
        assert book.frontiers() == []
        [row] = _released_rows(book, "p")
        assert (row["by"], row["reason"]) == ("daybook", "run 'p' expired")
