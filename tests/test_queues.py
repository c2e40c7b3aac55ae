"""Queues: limits a user relies on hold across real worker processes on both stores, checked at
the counterparty (the meter's own counts and clock), never from the journal."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import queue_app
from queue_app import Meter

from daybook import ConfigError, Daybook, RunStatus

APP = str(Path(__file__).parent / "queue_app.py")


@pytest.fixture
def meter() -> Iterator[Meter]:
    m = Meter()
    yield m
    m.close()


def _workers(db_url: str, count: int, *extra: str) -> list[subprocess.Popen[str]]:
    cmd = [sys.executable, "-m", "daybook", "worker", "--db", db_url, "--app", APP, "--poll", "0.02"]
    return [
        subprocess.Popen([*cmd, "--until-idle", "--quiet", *extra], stderr=subprocess.PIPE, text=True)
        for _ in range(count)
    ]


def _finish(procs: list[subprocess.Popen[str]], timeout: float = 120) -> None:
    for p in procs:
        _, err = p.communicate(timeout=timeout)
        assert p.returncode == 0, err


def _all_completed(db_url: str, ids: list[str]) -> None:
    with Daybook(db_url) as book:
        assert {book.get_run(i).status for i in ids} == {RunStatus.COMPLETED}


def test_two_workers_on_a_queue_with_concurrency_1_never_run_two_of_its_runs_at_once(
    db_url: str, meter: Meter
) -> None:
    with Daybook(db_url) as book:
        book.queue("payments", concurrency=1)
        ids = [book.submit(queue_app.held, meter.url, f"p{i}", 0.05, queue="payments") for i in range(16)]
    _finish(_workers(db_url, 2, "--queue", "payments", "--concurrency", "2"))
    _all_completed(db_url, ids)
    assert len(meter.calls) == 16 and len({c[2] for c in meter.calls}) == 16  # each once
    assert meter.max_inflight == 1


def test_without_a_concurrency_limit_the_same_workers_overlap(db_url: str, meter: Meter) -> None:
    """The scenario above with no limit: the counterparty sees calls at once (what the limit
    prevents)."""
    with Daybook(db_url) as book:
        ids = [book.submit(queue_app.held, meter.url, f"p{i}", 0.3, queue="open") for i in range(8)]
    _finish(_workers(db_url, 2, "--queue", "open", "--concurrency", "2"))
    _all_completed(db_url, ids)
    assert meter.max_inflight >= 2


@pytest.mark.slow
def test_a_rate_limit_of_5_per_second_holds_over_100_runs(db_url: str, meter: Meter) -> None:
    with Daybook(db_url) as book:
        book.queue("emails", rate=(5, 1.0))
        ids = [book.submit(queue_app.held, meter.url, f"e{i}", 0.0, queue="emails") for i in range(100)]
    _finish(_workers(db_url, 2, "--queue", "emails", "--concurrency", "2"), timeout=180)
    _all_completed(db_url, ids)
    began = sorted(c[0] for c in meter.calls)
    assert len(began) == 100
    # Any 6 consecutive calls span at least a second, on the counterparty's clock (less the
    # jitter between a worker taking a run and its call arriving).
    tightest = min(began[i + 5] - began[i] for i in range(len(began) - 5))
    assert tightest >= 0.8, tightest


def test_runs_on_one_partition_key_run_one_at_a_time_in_order(db_url: str, meter: Meter) -> None:
    with Daybook(db_url) as book:
        book.queue("accounts")
        ids = [
            book.submit(
                queue_app.held,
                meter.url,
                "ab"[i % 2],
                0.05,
                run_id=f"acct-{i:02d}",
                queue="accounts",
                partition="ab"[i % 2],
            )
            for i in range(12)
        ]
    _finish(_workers(db_url, 2, "--queue", "accounts", "--concurrency", "3"))
    _all_completed(db_url, ids)
    assert len(meter.calls) == 12
    assert meter.max_per_key == 1  # never two calls of one key at once
    for part in "ab":
        # The effect's key starts with its run's id: the meter saw each key's runs in order.
        seen = [idem.split("/")[0] for _, key, idem in sorted(meter.calls) if key == part]
        assert seen == sorted(seen) and len(seen) == 6


def test_priority_and_per_worker_limits_decide_what_is_taken(book: Daybook) -> None:
    book.queue("q", per_worker=1)
    low = book.submit(queue_app.tagged, "x", 1, queue="q", priority=5)
    high = book.submit(queue_app.tagged, "x", 2, queue="q", priority=-1)
    now = time.time()
    assert book.store.claim_queued("q", book.owner, 5.0, now) == high
    # Another handle in this process is the same worker: its one slot is taken.
    with Daybook(book.url) as other:
        assert other.store.claim_queued("q", other.owner, 5.0, now) is None
    # A worker elsewhere (another process's owner id) may take the next.
    assert book.store.claim_queued("q", "elsewhere:1:2:3:4:abcdef", 5.0, now) == low
    assert [q.as_dict() for q in book.queues()] == [
        {"name": "q", "concurrency": None, "per_worker": 1, "rate": None, "pending": 0, "active": 2}
    ]


def test_queue_settings_are_checked(book: Daybook) -> None:
    with pytest.raises(ConfigError, match="concurrency"):
        book.queue("q", concurrency=0)
    with pytest.raises(ConfigError, match="rate"):
        book.queue("q", rate=(5, 0))
    with pytest.raises(ConfigError, match="queue="):
        book.submit(queue_app.tagged, "x", 1, priority=3)
