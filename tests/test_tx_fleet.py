"""One worker crash does not deadlock the fleet (audit R2), on both stores: a transaction that
waits on a frontier longer than a short spin suspends its run (no worker slot held), a waiter
whose blocker's owner is dead suspends at once, so the dead holder is taken over however few
slots there are; and a worker stops on SIGTERM though its runs wait on a frontier."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import HERE, killed, wait_until

from daybook import Daybook

CHILD = str(HERE / "tx_child.py")


def _worker(db_url: str, *extra: str) -> subprocess.Popen[str]:
    """`daybook worker` over tx_child.py's workflows, in a new process."""
    path = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH", "")) if p)
    command = [sys.executable, "-m", "daybook", "worker", "--db", db_url, "--app", CHILD, "--poll", "0.05"]
    return subprocess.Popen(
        [*command, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONPATH": path},
    )


def _statuses(db_url: str, *runs: str) -> dict[str, str]:
    with Daybook(db_url) as book:
        return {r: book.get_run(r).status for r in runs}


def _open_headers(db_url: str) -> list[str]:
    with Daybook(db_url) as book:
        return [str(t["run_id"]) for t in book.transactions() if t["status"] == "open"]


@pytest.mark.slow
def test_a_worker_killed_while_a_run_holds_a_scope_does_not_deadlock_the_restarted_worker(
    db_url: str, tmp_path: Path
) -> None:
    """The audit's tx_deadlock: H holds `acct` when its worker is SIGKILLed; older runs C and D
    wait on H. The restarted worker (2 slots) claims C and D first; they suspend instead of
    holding both slots, H is taken over (its attempt aborted, retried at the back of the line),
    and every run completes, each increment landing once."""
    root = str(tmp_path)
    from tx_child import dead_holder, dead_waiter

    with Daybook(db_url) as book:
        book.submit(dead_waiter, root, 3.0, run_id="C")
        book.submit(dead_waiter, root, 3.0, run_id="D")
        book.submit(dead_holder, root, run_id="H")
    first = _worker(db_url, "--concurrency", "2", "--lease-ttl", "2")
    try:
        # H holds its transaction; C and D have taken their epochs behind it.
        wait_until(lambda: sorted(_open_headers(db_url)) == ["C", "D", "H"], timeout=120)
    finally:
        first.kill()
        first.communicate(timeout=300)
    assert killed(first)
    Path(root, "hold.go").write_text("go")  # H's next attempt need not wait for a person
    second = _worker(db_url, "--concurrency", "2", "--lease-ttl", "2")
    try:
        wait_until(lambda: set(_statuses(db_url, "C", "D", "H").values()) == {"completed"}, timeout=180)
    finally:
        second.send_signal(signal.SIGTERM)
        out, _ = second.communicate(timeout=120)
    assert second.returncode == 0, out
    assert Path(root, "acct").read_text() == "3"  # three increments, none lost, none twice
    with Daybook(db_url) as book:
        assert book.frontiers() == []
        attempts = {r: [t["status"] for t in book.transactions(r)] for r in ("C", "D", "H")}
    # H's attempt was aborted by its takeover; C or D, if killed inside its spin, likewise.
    assert attempts["H"] == ["aborted", "committed"], attempts
    assert all(a[-1] == "committed" and set(a[:-1]) <= {"aborted"} for a in attempts.values()), attempts


@pytest.mark.slow
def test_a_worker_whose_runs_wait_on_a_frontier_stops_on_sigterm(db_url: str, tmp_path: Path) -> None:
    """A foreground process holds `acct`; a worker's two runs wait on it. SIGTERM: the waits
    suspend their runs within the spin and the worker exits well before its grace (60 s),
    its runs `suspended`, resumable; once the holder ends they complete."""
    root = str(tmp_path)
    from tx_child import dead_waiter

    holder = subprocess.Popen(
        [sys.executable, CHILD, db_url, "count", "h", root, "acct", "1", "hold"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(lambda: _open_headers(db_url) == ["h"], timeout=120)
        with Daybook(db_url) as book:
            book.submit(dead_waiter, root, 0.0, run_id="W1")
            book.submit(dead_waiter, root, 0.0, run_id="W2")
        worker = _worker(db_url, "--concurrency", "2", "--grace", "60")
        try:
            wait_until(lambda: sorted(_open_headers(db_url)) == ["W1", "W2", "h"], timeout=120)
            worker.send_signal(signal.SIGTERM)
            out, _ = worker.communicate(timeout=45)  # the grace (60 s) was not needed
        finally:
            worker.kill()
        assert worker.returncode == 0, out
        assert "still executing" not in out
        assert set(_statuses(db_url, "W1", "W2").values()) <= {"suspended", "running"}
        Path(root, "acct.go").write_text("go")
        out, err = holder.communicate(timeout=300)
        assert holder.returncode == 0, out + err
    finally:
        holder.kill()
    again = _worker(db_url)
    try:
        wait_until(lambda: set(_statuses(db_url, "W1", "W2").values()) == {"completed"}, timeout=120)
    finally:
        again.send_signal(signal.SIGTERM)
        again.communicate(timeout=120)
    assert Path(root, "acct").read_text() == "3"


def test_a_bad_grace_is_a_usage_error(db_url: str) -> None:
    from conftest import cli_in_process

    from daybook.errors import DaybookError
    from daybook.worker import Worker

    bad = cli_in_process("worker", "--grace", "-1", "--until-idle", db=db_url)
    assert bad.returncode == 2 and "--grace" in bad.stderr, bad.stderr
    assert "Traceback" not in bad.stderr
    with pytest.raises(DaybookError, match="grace"):
        Worker(db_url, grace=-1)
