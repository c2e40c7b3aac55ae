"""One recoverer at a time (issue 25 item 1, audit R3): `daybook recover` of one run from several
processes at once undoes each effect once, the others are told who is recovering, and a recovery
SIGKILLed in the middle is finished by the next `recover` without repeats. Real CLI processes on
SQLite and PostgreSQL, asserted at the counterparty's own ledger (`recovery_app.py`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import recovery_app as app
from conftest import wait_until

from daybook import Daybook

APP = Path(__file__).parent / "recovery_app.py"


def _env(cpty: str) -> dict[str, str]:
    return {**os.environ, "REC_CPTY": cpty}


def _failed_run(db_url: str, cpty: str) -> None:
    started = subprocess.run(
        [sys.executable, str(APP), db_url, "start", "m1"],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(cpty),
    )
    assert "failed:" in started.stdout, started.stdout + started.stderr
    assert app.executions(cpty) == [("invite", "m1/8"), ("reserve", "m1/10")]


def _recover(db_url: str, cpty: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "daybook", "recover", "m1", "--db", db_url, "--app", str(APP)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(cpty),
    )


def _open(cpty: str, *gates: str) -> None:
    for gate in gates:
        Path(f"{cpty}.{gate}").touch()


def _releases(cpty: str) -> list[tuple[str, str]]:
    return [row for row in app.executions(cpty) if row[0] == "release"]


@pytest.mark.slow
def test_concurrent_recovers_undo_once_and_the_others_are_told_who_is_recovering(
    db_url: str, tmp_path: Path
) -> None:
    cpty = str(tmp_path / "cpty.db")
    _failed_run(db_url, cpty)
    procs = [_recover(db_url, cpty) for _ in range(3)]
    # One of them is inside the undo (held at the counterparty's gate, its lease taken); every
    # other one must give up at once, saying who recovers the run.
    wait_until(lambda: Path(f"{cpty}.started").exists(), timeout=120)
    wait_until(lambda: sum(p.poll() is not None for p in procs) == 2, timeout=120)
    # A dry run meanwhile plans the same and says the real call would be refused, and why.
    dry = subprocess.run(
        [sys.executable, "-m", "daybook", "recover", "m1", "--dry-run", "--db", db_url, "--app", str(APP)],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(cpty),
    )
    assert dry.returncode == 1 and "is being recovered by process" in dry.stderr, dry.stdout + dry.stderr
    _open(cpty, "go", "go2")
    outs = [(p.wait(timeout=120), *p.communicate(timeout=120)) for p in procs]
    winners = [o for o in outs if o[0] == 0]
    losers = [o for o in outs if o[0] != 0]
    assert len(winners) == 1 and len(losers) == 2, outs
    for _code, out, err in losers:
        assert "is being recovered by" in err and "one recovery at a time" in err, err
        assert "Traceback" not in out + err and "Stop" not in err
    assert "Traceback" not in winners[0][1] + winners[0][2]
    # At the counterparty: the hold was released exactly once, then made once more on the branch.
    assert _releases(cpty) == [("release", "comp/m1/10")]
    assert [k for op, k in app.executions(cpty) if op in ("reserve", "confirm")] == [
        "m1/10",
        "m1/10~r1",
        "m1/11~r1",
    ]
    with Daybook(db_url) as book:
        assert book.get_run("m1").status == "completed"
        assert book.get_run("m1~recover1").status == "completed"


@pytest.mark.slow
@pytest.mark.parametrize("where", ["started", "logged"])
def test_a_recovery_sigkilled_inside_its_undo_is_finished_by_the_next_recover_undoing_once(
    db_url: str, tmp_path: Path, where: str
) -> None:
    cpty = str(tmp_path / "cpty.db")
    _failed_run(db_url, cpty)
    if where == "logged":
        _open(cpty, "go")  # the counterparty executes the release; the kill comes after
    first = _recover(db_url, cpty)
    wait_until(lambda: Path(f"{cpty}.{where}").exists(), timeout=120)
    first.send_signal(signal.SIGKILL)
    assert first.wait(timeout=300) == -signal.SIGKILL
    with Daybook(db_url) as book:
        assert book.get_run("m1").status == "failed"  # the recovery did not get to its branch
    _open(cpty, "go", "go2")
    second = _recover(db_url, cpty)
    code = second.wait(timeout=120)
    out, err = second.communicate(timeout=300)
    assert code == 0, out + err
    assert "Traceback" not in out + err
    assert _releases(cpty) == [("release", "comp/m1/10")]  # asked about, never sent twice
    assert [k for op, k in app.executions(cpty) if op in ("reserve", "confirm")] == [
        "m1/10",
        "m1/10~r1",
        "m1/11~r1",
    ]
    with Daybook(db_url) as book:
        assert book.get_run("m1").status == "completed"


@pytest.mark.slow
def test_a_recovery_whose_undo_outcome_is_unknown_stops_cleanly_then_continues_once_settled(
    db_url: str, tmp_path: Path
) -> None:
    cpty = str(tmp_path / "cpty.db")
    _failed_run(db_url, cpty)
    _open(cpty, "go", "go2", "lost", "status_down")
    first = _recover(db_url, cpty)
    code = first.wait(timeout=240)
    out, err = first.communicate(timeout=300)
    # A clean stop for a person: no traceback, no internal Stop; the run stays failed.
    assert code == 3, out + err
    assert "its undo stopped in recovery run 'm1~recover1'" in err and "Traceback" not in err
    with Daybook(db_url) as book:
        assert book.get_run("m1").status == "failed"
        assert book.get_run("m1~recover1").status == "needs_attention"
    # Once the counterparty can say again, the same command goes on: asked, not re-sent.
    Path(f"{cpty}.status_down").unlink()
    second = _recover(db_url, cpty)
    code = second.wait(timeout=240)
    out, err = second.communicate(timeout=300)
    assert code == 0, out + err
    assert _releases(cpty) == [("release", "comp/m1/10")]
    with Daybook(db_url) as book:
        assert book.get_run("m1").status == "completed"


def _daybook(db_url: str, cpty: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "daybook", *args, "--db", db_url, "--app", str(APP)]


@pytest.mark.slow
def test_a_fork_sigkilled_inside_its_undo_is_finished_by_the_same_fork_command_undoing_once(
    db_url: str, tmp_path: Path
) -> None:
    cpty = str(tmp_path / "cpty.db")
    done = subprocess.run(
        [sys.executable, str(APP), db_url, "complete", "m1"], capture_output=True, text=True, env=_env(cpty)
    )
    assert "completed" in done.stdout, done.stdout + done.stderr
    fork = _daybook(db_url, cpty, "fork", "m1", "--at", "9", "--confirm", "--run-id", "m2")
    first = subprocess.Popen(fork, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(cpty))
    wait_until(lambda: Path(f"{cpty}.started").exists(), timeout=120)  # inside the room's release
    first.send_signal(signal.SIGKILL)
    assert first.wait(timeout=300) == -signal.SIGKILL
    with Daybook(db_url) as book:
        assert book.store.get_run("m2") is None  # no fork yet: its undo did not finish
    _open(cpty, "go", "go2")
    again = subprocess.run(fork, capture_output=True, text=True, timeout=120, env=_env(cpty))
    assert again.returncode == 0 and "undone" in again.stdout, again.stdout + again.stderr
    ran = subprocess.run(
        _daybook(db_url, cpty, "resume", "m2"), capture_output=True, text=True, timeout=120, env=_env(cpty)
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    # At the counterparty: the original's room released once, booked again once by the fork; the
    # invitation (shared) and the confirmation (no inverse: replayed by the fork) once each.
    assert app.executions(cpty) == [
        ("invite", "m1/8"),
        ("reserve", "m1/10"),
        ("confirm", "m1/11"),
        ("release", "comp/m1/10"),
        ("reserve", "m2/10"),
    ]
