"""One process executes a run at a time; dead owners' leases are taken over, live ones never."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from conftest import killed, release_together, run_child, start_child

import daybook
from daybook import Daybook, RunLeased


@pytest.mark.slow
def test_two_processes_racing_to_resume_one_run_execute_it_once(
    db_url: str,
    bank,  # type: ignore[no-untyped-def]
) -> None:
    run_id = "race"
    args = [bank.url, 3, 0.4]
    proc = run_child(db_url, "start", run_id, "slow_payments", json.dumps(args), "--kill-after", "outcome:1")
    assert killed(proc)
    racers = [start_child(db_url, "resume", run_id, "--ready-go") for _ in range(2)]
    release_together(racers)
    outs = [r.communicate(timeout=60) for r in racers]
    codes = sorted(r.returncode for r in racers)
    # One resumes it; the other is refused while the first holds the lease.
    assert codes == [0, 4], outs
    stats = bank.stats()
    assert stats["executions_by_key"] == {f"{run_id}/{i}": 1 for i in (1, 2, 3)}
    assert stats["requests_by_key"] == {f"{run_id}/{i}": 1 for i in (1, 2, 3)}


def test_a_live_lease_is_honoured_and_an_expired_one_is_taken_over(db_url: str) -> None:
    @daybook.workflow
    def parked(ctx: daybook.Context) -> str:
        return ctx.decide("x", lambda: "done").value

    class Crash(BaseException):
        pass

    with Daybook(db_url, lease_ttl=0.5) as a, Daybook(db_url, lease_ttl=0.5) as b:

        @daybook.workflow(name="parked")
        def first(ctx: daybook.Context) -> str:
            raise Crash()

        with pytest.raises(Crash):
            a.run(first, run_id="lease")
        # Another host holds it (an owner id that is not provably dead here).
        assert a.store.claim("lease", "otherhost:1:1:x:y:z", 0.5, time.time(), None)
        with pytest.raises(RunLeased, match="otherhost"):
            b.resume("lease")
        daybook.workflow(parked.fn, name="parked")
        assert b.resume("lease", wait=3) == "done"


@pytest.mark.slow
def test_heartbeat_keeps_a_long_step_owned(db_url: str, bank) -> None:  # type: ignore[no-untyped-def]
    proc = start_child(db_url, "start", "long", "slow_payments", json.dumps([bank.url, 1, 2.5]))
    intent_at = _wait_for_intent(db_url, "long")
    with Daybook(db_url, lease_ttl=2.0) as other:
        # Child lease_ttl is 2 s; 2.2 s into a 2.5 s step it is still renewed, so still refused.
        time.sleep(max(0.0, intent_at + 2.2 - time.time()))
        with pytest.raises(RunLeased):
            other.resume("long")
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert bank.stats()["executions_by_key"] == {"long/1": 1}


@pytest.mark.slow
def test_worker_killed_mid_step_leaves_the_step_unknown_for_the_next_owner(
    db_url: str,
    bank,  # type: ignore[no-untyped-def]
) -> None:
    # The step sleeps 2.5 s before it sends: killed 0.5 s in, nothing has reached the bank yet.
    proc = start_child(db_url, "start", "midstep", "slow_payments", json.dumps([bank.url, 1, 2.5]))
    _wait_for_intent(db_url, "midstep")
    time.sleep(0.5)
    proc.kill()
    proc.wait()
    with Daybook(db_url) as book:
        # The dead process's lease is recognised at once; its step became `unknown`, then was
        # resolved by asking (here: never received, so sent once).
        assert book.resume("midstep", wait=5) == [bank.records["payments"]["midstep/1"]["id"]]
        statuses = [e.status for e in book.journal("midstep") if e.kind == "outcome"]
    assert statuses[0] == "unknown"
    assert bank.stats()["executions_by_key"] == {"midstep/1": 1}


def test_resume_without_waiting_reports_who_holds_the_run(db_url: str) -> None:
    with Daybook(db_url) as book:

        @daybook.workflow(name="held")
        def held(ctx: daybook.Context) -> int:
            return 1

        class Crash(BaseException):
            pass

        @daybook.workflow(name="held")
        def crash(ctx: daybook.Context) -> int:
            raise Crash()

        with pytest.raises(Crash):
            book.run(crash, run_id="held")
        book.store.claim("held", "elsewhere:9:9:b:n:q", 60, time.time(), None)
        daybook.workflow(held.fn, name="held")
        with pytest.raises(RunLeased, match=r"elsewhere.*--wait"):
            book.resume("held")


def _wait_for_intent(db_url: str, run_id: str) -> float:
    """When the child's first intent was journaled (children start slowly on a loaded machine)."""
    with Daybook(db_url) as book:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if book.store.get_run(run_id) is not None:
                for event in book.journal(run_id):
                    if event.kind == "intent":
                        return event.at
            time.sleep(0.02)
    raise AssertionError(f"run {run_id} never journaled an intent")


def test_the_heartbeats_of_many_runs_share_one_thread_each_renewed_at_its_interval() -> None:
    import threading

    from daybook.runtime.lease import Beats, Heartbeat

    beats = Beats()
    renewed: dict[str, list[float]] = {"a": [], "b": [], "lost": []}
    threads: set[int] = set()

    def renew(name: str, ok: bool = True) -> Any:
        def call() -> bool:
            renewed[name].append(time.monotonic())
            threads.add(threading.get_ident())
            return ok

        return call

    before = threading.active_count()
    a = Heartbeat(renew("a"), 0.05, beats=beats)
    b = Heartbeat(renew("b"), 0.1, beats=beats)
    lost = Heartbeat(renew("lost", ok=False), 0.05, beats=beats)
    assert threading.active_count() <= before + 1  # one thread for all three
    time.sleep(0.45)
    a.stop()
    stopped_at = len(renewed["a"])
    time.sleep(0.15)
    b.stop()
    b.stop()  # stopping twice is harmless
    assert len(threads) == 1 and threading.get_ident() not in threads
    assert len(renewed["a"]) == stopped_at >= 4  # renewed every 0.05 s until stopped, then never
    assert len(renewed["b"]) >= 3
    assert lost.lost and len(renewed["lost"]) == 1  # a refused renewal ends its heartbeat
    c = Heartbeat(renew("a"), 0.05, beats=beats)  # the thread takes new runs while it lives
    time.sleep(0.2)
    c.stop()
    assert len(renewed["a"]) > stopped_at and len(threads) == 1
