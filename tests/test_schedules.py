"""Schedules: every firing starts exactly one run, across two workers and a restart; missed
firings are caught up or skipped by policy. Checked at the counterparty (the meter's calls)."""

from __future__ import annotations

import itertools
import math
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import queue_app
from conftest import cli, cli_in_process, wait_until
from queue_app import Meter

from daybook import ConfigError, Daybook, RunStatus
from daybook.dispatch.schedules import fire_due, firing_id

APP = str(Path(__file__).parent / "queue_app.py")


@pytest.fixture
def meter() -> Iterator[Meter]:
    m = Meter()
    yield m
    m.close()


def _worker(db_url: str, *extra: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "daybook", "worker", "--db", db_url, "--app", APP, "--poll", "0.05"]
    return subprocess.Popen([*cmd, "--quiet", *extra], stderr=subprocess.PIPE, text=True)


def _fired(book: Daybook) -> list[str]:
    return sorted(r.run_id for r in book.runs(workflow="tick", limit=10_000))


@pytest.mark.slow
def test_a_schedule_fires_once_per_period_across_two_workers_and_a_restart(db_url: str, meter: Meter) -> None:
    with Daybook(db_url) as book:
        book.schedule("beat", queue_app.tick, cron="* * * * * *", args=[meter.url], catchup="all")
        workers = [_worker(db_url), _worker(db_url)]
        wait_until(lambda: len(_fired(book)) >= 3)
        for w in workers:  # both go down at once: a restart of the whole deployment
            w.send_signal(signal.SIGKILL)
            w.wait()
        down = len(_fired(book))
        time.sleep(2.5)  # firings pass while no worker is up
        workers = [_worker(db_url), _worker(db_url)]
        wait_until(lambda: len(_fired(book)) >= down + 5)
        book.pause_schedule("beat")
        for w in workers:
            w.send_signal(signal.SIGTERM)
            assert w.wait(timeout=30) == 0
        drain = _worker(db_url, "--until-idle", "--no-schedules")
        assert drain.wait(timeout=300) == 0
        ids = _fired(book)
        assert {book.get_run(i).status for i in ids} == {RunStatus.COMPLETED}
    stamps = [time.mktime(time.strptime(i.split(":", 1)[1][5:], "%Y-%m-%dT%H:%M:%SZ")) for i in ids]
    # One run per second, none missing (the downtime was caught up), none twice.
    assert [b - a for a, b in itertools.pairwise(stamps)] == [1.0] * (len(ids) - 1)
    # The counterparty got each firing's act under exactly one key. (`hold` is idempotent: a
    # worker killed mid-call leaves it unknown, and the next owner may re-send it under the same
    # key, which the counterparty dedupes; so distinct keys are counted, not raw calls.)
    calls = Counter(idem.split("/")[0] for idem in {idem for _, _, idem in meter.calls})
    assert set(calls) == set(ids) and set(calls.values()) == {1}


def test_missed_firings_are_skipped_or_caught_up_by_policy(book: Daybook) -> None:
    book.schedule("skip", queue_app.tagged, cron="* * * * * *", args=["x", 1], grace=0.5)
    book.schedule("all", queue_app.tagged, cron="* * * * * *", args=["x", 1], catchup="all")
    last = {s.name: s.last_fired for s in book.schedules()}
    now = math.ceil(max(last.values())) + 10.2  # ten seconds later, 0.2 s after a firing
    started = fire_due(book.store, book.owner, now=now)
    skipped = [i for i in started if i.startswith("sched:skip:")]
    assert skipped == [firing_id("skip", now - 0.2)]  # only the firing that is not late
    caught = [i for i in started if i.startswith("sched:all:")]
    assert len(caught) == math.floor(now) - math.floor(last["all"]) and len(set(caught)) == len(caught)
    # A second look (another worker) starts nothing again.
    assert fire_due(book.store, "elsewhere:1:2:3:4:abcdef", now=now) == []
    assert {book.get_run(i).status for i in started} == {RunStatus.PENDING}


def test_a_paused_schedule_does_not_fire_and_resumes_from_now(book: Daybook) -> None:
    book.schedule("p", queue_app.tagged, cron="* * * * * *", args=["x", 1], catchup="all", queue="jobs")
    assert book.pause_schedule("p")
    assert fire_due(book.store, book.owner, now=time.time() + 5) == []
    assert book.resume_schedule("p")
    started = fire_due(book.store, book.owner, now=time.time() + 1.5)
    assert 1 <= len(started) <= 2  # from the resume on, not the seconds it was paused
    assert {book.get_run(i).queue for i in started} == {"jobs"}
    assert book.unschedule("p") and book.schedules() == []
    with pytest.raises(ConfigError, match="cron"):
        book.schedule("bad", queue_app.tagged, cron="every day")


def test_schedule_commands_add_list_pause_and_remove(db_url: str) -> None:
    # A process: --app imports queue_app by path, which this one has imported by name already.
    add = cli("schedule", "add", "nightly", "tagged", "--cron", "0 6 * * *", "--args", '["acme", 2]',
              "--app", APP, db=db_url)  # fmt: skip
    assert add.returncode == 0, add.stderr
    listed = cli_in_process("schedule", "ls", db=db_url)
    assert "nightly" in listed.stdout and "0 6 * * *" in listed.stdout and "active" in listed.stdout
    assert cli_in_process("schedule", "pause", "nightly", db=db_url).returncode == 0
    assert "paused" in cli_in_process("schedule", "ls", db=db_url).stdout
    assert cli_in_process("schedule", "resume", "nightly", db=db_url).returncode == 0
    assert cli_in_process("schedule", "rm", "nightly", db=db_url).returncode == 0
    gone = cli_in_process("schedule", "rm", "nightly", db=db_url)
    assert gone.returncode == 1 and "no schedule 'nightly'" in gone.stderr
