"""Pause, kill every process, resume a day later from a new one (S4), and past the retention
window the run is expired (S5): the clock is moved with libfaketime (`faketime -f +1d`) on the
resuming process itself, so nothing in daybook is told about the test. Asserted at the bank."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import HERE, last_json, start_child, wait_until

from daybook import Daybook, RunStatus
from daybook.demo.bank import Bank

FAKETIME = shutil.which("faketime")
pytestmark = [
    pytest.mark.skipif(FAKETIME is None, reason="needs libfaketime (apt-get install faketime)"),
    pytest.mark.slow,
]


def _later(offset: str, *args: str) -> subprocess.CompletedProcess[str]:
    """tests/child.py in a new process whose clock reads `offset` ahead (`+1d`, `+31d`)."""
    assert FAKETIME is not None
    return subprocess.run(
        [FAKETIME, "-f", offset, sys.executable, str(HERE / "child.py"), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _daybook_later(offset: str, *args: str) -> subprocess.CompletedProcess[str]:
    assert FAKETIME is not None
    cmd = [FAKETIME, "-f", offset, sys.executable, "-m", "daybook", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def _pause_mid_flight(db_url: str, bank: Bank, run_id: str) -> int:
    """Start paying 8 times in a child, pause it while it pays, then SIGKILL the child: no
    process of the run is left. Returns how many payments were made."""
    child = start_child(db_url, "start", run_id, "slow_payments", f'["{bank.url}", 8, 0.3]')
    with Daybook(db_url) as book:
        wait_until(lambda: len(bank.records.get("payments", {})) >= 1)
        assert book.pause(run_id, by="ana") == "requested"
        wait_until(lambda: book.get_run(run_id).status == RunStatus.PAUSED)
    child.send_signal(signal.SIGKILL)
    child.communicate(timeout=300)
    return len(bank.records["payments"])


def test_a_run_paused_and_resumed_a_day_later_from_a_new_process_repeats_no_committed_step(
    db_url: str, bank: Bank
) -> None:
    paid = _pause_mid_flight(db_url, bank, "days")
    assert 1 <= paid < 8
    proc = _later("+1d", db_url, "resume", "days")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(last_json(proc.stdout)["result"]) == 8  # type: ignore[index]
    assert len(bank.records["payments"]) == 8
    assert all(n == 1 for n in bank.stats()["executions_by_key"].values())
    with Daybook(db_url) as book:
        journal = book.journal("days")
        resumed = [ev for ev in journal if ev.kind == "intent"][paid:]
        # The resuming process's clock was a day ahead: its rows say so.
        assert resumed and min(ev.at for ev in resumed) - journal[0].at > 86_000


def test_past_the_retention_window_gc_expires_the_paused_run_and_resume_refuses(
    db_url: str, bank: Bank, tmp_path: Path
) -> None:
    paid = _pause_mid_flight(db_url, bank, "month")
    gc = _daybook_later("+1d", "gc", "--older-than", "30d", "--db", db_url, "--json")
    assert gc.returncode == 0 and "month" not in gc.stdout, gc.stdout + gc.stderr  # 30-day window
    gc = _daybook_later("+31d", "gc", "--older-than", "30d", "--db", db_url, "--json")
    assert gc.returncode == 0 and "month" in gc.stdout, gc.stdout + gc.stderr
    proc = _later("+31d", db_url, "resume", "month")
    assert proc.returncode != 0 and "RunExpired" in proc.stdout + proc.stderr
    assert len(bank.records["payments"]) == paid  # nothing more was paid
