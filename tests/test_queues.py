"""Queues: limits a user relies on hold across real worker processes on both stores, checked at
the counterparty (the meter's own counts and clock), never from the journal."""

from __future__ import annotations

import dataclasses
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import queue_app
from conftest import cli_in_process, wait_until
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from queue_app import Meter

from daybook import ConfigError, Daybook, RunStatus
from daybook.runtime.start import new_run
from daybook.store import open_store

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
    # One worker for this queue only, one for any run (it looks at every queue in turn).
    _finish(
        _workers(db_url, 1, "--queue", "payments", "--concurrency", "2")
        + _workers(db_url, 1, "--concurrency", "2")
    )
    _all_completed(db_url, ids)
    assert len(meter.calls) == 16 and len({c[2] for c in meter.calls}) == 16  # each once
    assert meter.max_inflight == 1
    listed = cli_in_process("queues", db=db_url)
    assert listed.returncode == 0 and "payments" in listed.stdout and "executing" in listed.stdout


def test_a_worker_killed_holding_the_only_slot_does_not_stall_the_queue(db_url: str, meter: Meter) -> None:
    with Daybook(db_url) as book:
        book.queue("payments", concurrency=1)
        ids = [book.submit(queue_app.held, meter.url, f"k{i}", 0.3, queue="payments") for i in range(4)]
    (first,) = _workers(db_url, 1, "--queue", "payments", "--lease-ttl", "1")
    wait_until(lambda: meter.inflight == 1)
    first.send_signal(signal.SIGKILL)
    first.wait()
    _finish(_workers(db_url, 1, "--queue", "payments", "--lease-ttl", "1"))
    _all_completed(db_url, ids)
    # Every run's call reached the meter (the killed one's again, under the same key).
    assert len({idem for _, _, idem in meter.calls}) == 4


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
    # Any 6 consecutive calls span a second on the counterparty's clock, less the delay between
    # a worker taking a run and its call arriving (allowed up to half a second: a loaded machine
    # stalls processes; without the limit the 100 calls come within about a second in all).
    tightest = min(began[i + 5] - began[i] for i in range(len(began) - 5))
    assert tightest >= 0.5, tightest
    assert began[95] - began[0] >= 18.5  # 19 seconds of windows at 5 per second


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


OWNERS = ["h:1:1:b:n:aaaaaa", "h:1:1:b:n:bbbbbb", "h:2:1:b:n:cccccc"]  # two workers, one with two handles


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    ops=st.lists(
        st.one_of(
            st.tuples(st.just("submit"), st.sampled_from(["a", "b", None])),
            st.tuples(st.just("claim"), st.integers(0, 2)),
            st.tuples(st.just("finish"), st.integers(0, 20)),
            st.tuples(st.just("tick"), st.sampled_from([0.1, 0.4, 11.0])),
        ),
        max_size=40,
    )
)
def test_claims_never_break_a_queues_limits(tmp_path: Path, ops: list[tuple[str, Any]]) -> None:
    """Whatever interleaving of submits, claims by several workers, finishes and lapsed leases:
    at most 2 runs hold live leases, 1 per worker process, 3 first takes in any second, and one
    started unfinished run per partition key."""
    store = open_store(f"sqlite:///{tmp_path}/h{time.monotonic_ns()}.db")
    store.declare_queue("q", 2, 1, 3, 1.0, 0.0)
    now, n, held, taken, started = 1000.0, 0, {}, [], {}
    for op, arg in ops:
        if op == "submit":
            info, first = new_run(
                queue_app.tagged, f"r{n}", ("x", n), {}, owner="o", lease_ttl=1, pending=True
            )
            store.create_run(dataclasses.replace(info, created_at=now, queue="q", partition=arg), first)
            n += 1
        elif op == "claim":
            got = store.claim_queued("q", OWNERS[arg], 10.0, now)
            if got is not None:
                held[got] = (OWNERS[arg], now + 10.0)
                if got not in started:
                    started[got] = store.get_run(got).partition
                    taken.append(now)
        elif op == "finish" and held:
            run_id = sorted(held)[arg % len(held)]
            owner, until = held.pop(run_id)
            if until >= now:
                store.finish(run_id, owner, "completed", None, None, None, now)
                started.pop(run_id)
        else:
            now += arg
        live = [owner for owner, until in held.values() if until >= now]
        assert len(live) <= 2
        assert all(sum(o.rsplit(":", 1)[0] == w.rsplit(":", 1)[0] for o in live) <= 1 for w in live)
        assert all(sum(1 for t in taken if t0 - 1.0 < t <= t0) <= 3 for t0 in taken)
        keys = [k for k in started.values() if k is not None]
        assert len(keys) == len(set(keys))
    store.close()
