"""Durable waits: timers and signals survive kills and stops, fire once, and hold no process."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import agents
import pytest
from conftest import killed, run_worker, start_child

import daybook
from daybook import Daybook, Kind, RunStatus, Suspended
from daybook.worker import Worker


def _timer_rows(book: Daybook, run_id: str) -> list[str | None]:
    return [e.status for e in book.journal(run_id) if e.kind == Kind.TIMER]


@pytest.mark.slow
def test_a_3s_timer_killed_at_1s_and_restarted_at_5s_fires_once(
    db_url: str,
    bank,  # type: ignore[no-untyped-def]
) -> None:
    proc = start_child(db_url, "start", "timer", "timed", json.dumps([bank.url, 3.0]), "--inline-wait", "10")
    # The clock starts when the timer is set (the child may take a while to start under load).
    set_at = None
    with Daybook(db_url) as book:
        deadline = time.monotonic() + 30
        while set_at is None and time.monotonic() < deadline:
            if book.store.get_run("timer") is not None:
                set_at = next((e.at for e in book.journal("timer") if e.kind == Kind.TIMER), None)
            time.sleep(0.02)
    assert set_at is not None, "the child never set its timer"
    time.sleep(max(0.0, set_at + 1.0 - time.time()))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert killed(proc)
    time.sleep(max(0.0, set_at + 5.0 - time.time()))
    with Daybook(db_url) as book:
        assert _timer_rows(book, "timer") == ["set"]
        book.resume("timer", wait=5)
        assert _timer_rows(book, "timer") == ["set", "fired"]
        book.replay("timer")  # and replay does not fire it again
        assert _timer_rows(book, "timer") == ["set", "fired"]
    assert bank.stats()["executions_by_key"] == {"timer/2": 1}


def test_a_long_timer_suspends_the_run_and_a_worker_resumes_it_when_due(
    db_url: str,
    bank,  # type: ignore[no-untyped-def]
) -> None:
    with Daybook(db_url, inline_wait=0.2) as book:
        with pytest.raises(Suspended, match="until"):
            book.run(agents.timed, bank.url, 1.0, run_id="nap")
        info = book.get_run("nap")
        assert info.status == RunStatus.SUSPENDED and info.lease_owner is None
        assert info.wake_at is not None
        with pytest.raises(Suspended):
            book.resume("nap")  # not due yet: suspends again, fires nothing
        assert _timer_rows(book, "nap") == ["set"]
        time.sleep(max(0.0, info.wake_at - time.time()))  # a worker takes runs that are due
        assert Worker(db_url, poll=0.05).run(until_idle=True).completed == 1
        assert book.get_run("nap").status == RunStatus.COMPLETED
        assert _timer_rows(book, "nap") == ["set", "fired"]
    assert bank.stats()["executions_by_key"] == {"nap/2": 1}


def test_a_run_waiting_for_a_signal_holds_no_process_and_continues_when_signalled(
    db_url: str,
    bank,  # type: ignore[no-untyped-def]
) -> None:
    with Daybook(db_url, inline_wait=0.1) as book:
        with pytest.raises(Suspended, match="signal 'approve'"):
            book.run(agents.approval, bank.url, run_id="gate")
        assert book.get_run("gate").status == RunStatus.SUSPENDED
    # Every worker stopped; a new worker process starts later; the signal comes by the CLI.
    sent = subprocess.run(
        [
            sys.executable,
            "-m",
            "daybook",
            "signal",
            "gate",
            "approve",
            "--payload",
            '{"ok": true}',
            "--by",
            "cfo",
            "--db",
            db_url,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert sent.returncode == 0, sent.stderr
    worker = run_worker(db_url)
    assert worker.returncode == 0, worker.stderr
    with Daybook(db_url) as book:
        info = book.get_run("gate")
        assert info.status == RunStatus.COMPLETED
        assert info.result["by"] == "cfo"
        assert book.replay("gate") == info.result
    assert bank.stats()["executions_by_key"] == {"gate/2": 1}


def test_signals_queue_in_order_and_each_is_consumed_once(book: Daybook) -> None:
    @daybook.workflow
    def two_waits(ctx: daybook.Context) -> list[object]:
        first = ctx.wait_for("note")
        second = ctx.wait_for("note")
        assert first is not None and second is not None
        return [first.payload, second.payload]

    book.submit(two_waits, run_id="queue")
    book.signal("queue", "note", {"n": 1}, sender="a")
    book.signal("queue", "note", {"n": 2}, sender="b")
    assert book.resume("queue") == [{"n": 1}, {"n": 2}]
    received = [e for e in book.journal("queue") if e.status == "received"]
    assert [e.data["sender"] for e in received] == ["a", "b"]


def test_a_wait_that_times_out_returns_none_and_replays_the_same(book: Daybook) -> None:
    @daybook.workflow
    def impatient(ctx: daybook.Context) -> str:
        got = ctx.wait_for("reply", timeout=0.2)
        return "timed out" if got is None else "replied"

    assert book.run(impatient, run_id="impatient") == "timed out"
    with pytest.raises(daybook.ConfigError):
        book.signal("impatient", "reply", "late")  # the run is over; nothing changes
    assert book.replay("impatient") == "timed out"
    assert [e.status for e in book.journal("impatient") if e.kind == Kind.SIGNAL] == [
        "waiting",
        "timeout",
    ]


def test_signals_to_missing_or_finished_runs_are_refused(book: Daybook) -> None:
    @daybook.workflow
    def quick(ctx: daybook.Context) -> int:
        return 1

    book.run(quick, run_id="done")
    with pytest.raises(daybook.ConfigError, match="completed"):
        book.signal("done", "x")
    with pytest.raises(daybook.RunNotFound):
        book.signal("nope", "x")
    with pytest.raises(daybook.NotSerializable):
        book.signal("done", "x", {1, 2})


def test_a_signal_sent_while_the_run_executes_wakes_it_after_it_suspends(book: Daybook) -> None:
    @daybook.workflow
    def racer(ctx: daybook.Context) -> object:
        # The signal lands after the run's last look at its inbox but before it suspends.
        book.signal(ctx.run_id, "go", 42)
        got = ctx.wait_for("other")
        return None if got is None else got.payload

    book.inline_wait = 0
    with pytest.raises(Suspended):
        book.run(racer, run_id="race-signal")
    info = book.get_run("race-signal")
    assert info.status == RunStatus.SUSPENDED and info.wake_at is not None  # a worker will look
    assert book.store.claim_next(book.owner, 5, time.time()) == "race-signal"


@daybook.workflow
def naps_half_a_second(ctx: daybook.Context) -> str:
    ctx.sleep(0.5)
    return "awake"


def test_a_setting_changed_on_the_handle_applies_to_the_next_run(book: Daybook) -> None:
    # With the default inline_wait (2 s) a 0.5 s timer is waited out in the process; set to 0 on
    # the handle after it was opened, the same timer suspends the run instead.
    assert book.run(naps_half_a_second, run_id="inline") == "awake"
    book.inline_wait = 0
    with pytest.raises(Suspended):
        book.run(naps_half_a_second, run_id="suspends")
    assert book.get_run("suspends").status == RunStatus.SUSPENDED
    with pytest.raises(daybook.ConfigError):
        book.inline_wait = -1
