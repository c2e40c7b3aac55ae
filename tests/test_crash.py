"""SIGKILL at every crash point of an effect, on both backends; the bank's books are the judge."""

from __future__ import annotations

import json
import os
import signal

import agents
import pytest
from conftest import killed, run_child, start_child

from daybook import Daybook, Kind

COUNT = 4
CRASH_STEP = 3  # the effect killed around: steps are 1 (plan decision), then effects 2..5


def _expected_keys(run_id: str) -> list[str]:
    return [f"{run_id}/{step}" for step in range(2, 2 + COUNT)]


def _resume(book: Daybook, run_id: str) -> list[str]:
    result: list[str] = book.resume(run_id, wait=10)
    return result


def _assert_once_each(bank, run_id: str) -> None:  # type: ignore[no-untyped-def]
    stats = bank.stats()
    for key in _expected_keys(run_id):
        assert stats["executions_by_key"].get(key) == 1, (key, stats)
    assert stats["executed"]["payments"] == COUNT


def _start_args(db_url: str, run_id: str, bank_url: str, *kill: str) -> list[str]:
    return [db_url, "start", run_id, "payments", json.dumps([bank_url, COUNT]), *kill]


@pytest.mark.parametrize("point", ["before_intent", "after_intent", "after_outcome"])
def test_kill_at_a_journal_write_then_resume_executes_every_payment_once(
    db_url: str,
    bank,
    point: str,  # type: ignore[no-untyped-def]
) -> None:
    run_id = f"crash-{point}"
    flag, kind = {
        "before_intent": ("--kill-before", "intent"),
        "after_intent": ("--kill-after", "intent"),
        "after_outcome": ("--kill-after", "outcome"),
    }[point]
    nth = CRASH_STEP - 1  # the 2nd effect
    proc = run_child(*_start_args(db_url, run_id, bank.url, flag, f"{kind}:{nth}"))
    assert killed(proc), proc.stderr

    crash_key = f"{run_id}/{CRASH_STEP}"
    with Daybook(db_url) as book:
        rows = [e for e in book.journal(run_id) if e.step == CRASH_STEP]
        before = bank.stats()["requests_by_key"]
        if point == "before_intent":
            assert rows == [] and crash_key not in before
        elif point == "after_intent":
            # J2: the intent is durable and nothing reached the counterparty.
            assert [e.kind for e in rows] == [Kind.INTENT] and crash_key not in before
        else:
            assert [e.status for e in rows if e.kind == Kind.OUTCOME] == ["confirmed"]
            assert before[crash_key] == 1

        result = _resume(book, run_id)
    assert len(result) == COUNT
    _assert_once_each(bank, run_id)


def test_kill_after_bank_accepted_before_outcome_reconciles_without_resending(
    db_url: str,
    bank,  # type: ignore[no-untyped-def]
) -> None:
    run_id = "crash-after-accept"
    crash_key = f"{run_id}/{CRASH_STEP}"
    proc = start_child(*_start_args(db_url, run_id, bank.url))

    def kill_agent(collection: str, key: str) -> None:
        if key == crash_key:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()

    bank.faults.on_execute = kill_agent
    proc.wait(timeout=300)
    assert killed(proc)
    bank.faults.on_execute = None

    with Daybook(db_url) as book:
        rows = [e for e in book.journal(run_id) if e.step == CRASH_STEP]
        assert [e.kind for e in rows] == [Kind.INTENT]  # the act happened; the journal can't know
        assert bank.stats()["executions_by_key"][crash_key] == 1
        result = _resume(book, run_id)
        rows = [e for e in book.journal(run_id) if e.step == CRASH_STEP]

    # Resolved by asking the bank: unknown, then confirmed with the bank's own wire id.
    assert [e.status for e in rows if e.kind == Kind.OUTCOME] == ["unknown", "confirmed"]
    assert rows[-1].data["resolved_by"] == "status"
    assert result[CRASH_STEP - 2] == rows[-1].data["result"]["id"]
    assert bank.stats()["requests_by_key"][crash_key] == 1  # asked, never re-sent
    _assert_once_each(bank, run_id)


def test_crashed_run_resumed_in_another_process_keeps_its_id_and_keys(
    db_url: str,
    bank,  # type: ignore[no-untyped-def]
) -> None:
    run_id = "crash-identity"
    proc = run_child(*_start_args(db_url, run_id, bank.url, "--kill-after", "outcome:2"))
    assert killed(proc)
    resumed = run_child(db_url, "resume", run_id)
    assert resumed.returncode == 0, resumed.stderr
    with Daybook(db_url) as book:
        events = book.journal(run_id)
        # Starting the same id again attaches to the finished run instead of making a new one.
        again = book.run(agents.payments, bank.url, COUNT, run_id=run_id)
        assert book.journal(run_id) == events
    assert {e.run_id for e in events} == {run_id}
    assert {e.key for e in events if e.key} == set(_expected_keys(run_id))
    assert again == json.loads(resumed.stdout)["result"]
    _assert_once_each(bank, run_id)


def test_a_recomputed_amount_after_a_crash_never_changes_the_key_or_the_wire(
    db_url: str,
    bank,  # type: ignore[no-untyped-def]
) -> None:
    """P1: decide, kill after the wire's intent, move the balance, resume: the bank gets the
    original amount under the original key, once, and the plan is not made again."""
    run_id = "p1-sweep"
    proc = run_child(
        db_url, "start", run_id, "treasury", json.dumps([bank.url, "2026-11-22"]), "--kill-after", "intent:1"
    )
    assert killed(proc)
    bank.balances["USD-operating"] = 2_000_000  # a late credit: a re-plan would sweep 1,000,000
    with Daybook(db_url) as book:
        result = book.resume(run_id, wait=10)
        # A model call's completion (its reservation row before it is not a second decision).
        decisions = [
            e.name for e in book.journal(run_id) if e.kind == Kind.DECISION and e.status != "reserved"
        ]
    wires = bank.records["wires"]
    assert list(wires) == [f"{run_id}/2/send_wire/0"]
    assert [w["amount"] for w in wires.values()] == [250_000]
    assert result["sweeps"][0]["amount"] == 250_000
    assert decisions == ["read_balances", "llm"]  # recorded once, not re-decided
    assert bank.stats()["executions_by_key"][f"{run_id}/2/send_wire/0"] == 1


@pytest.mark.slow
def test_parallel_runs_sharing_group_commits_lose_nothing_when_killed(
    tmp_path,
    bank,  # type: ignore[no-untyped-def]
) -> None:
    """Group commit must not weaken a run's promise: a record acknowledged to one run is durable
    even when it shared its commit with others, at any SIGKILL point."""
    db_url = f"sqlite:///{tmp_path / 'group.db'}"
    runs, count = 8, 5
    for nth in (3, 17, 40):
        prefix = f"grp{nth}"
        proc = run_child(
            db_url, "threads", prefix, str(runs), json.dumps([bank.url, count]), "--kill-after", f"any:{nth}"
        )
        assert killed(proc), proc.stderr
        with Daybook(db_url) as book:
            for i in range(runs):
                rid = f"{prefix}-{i}"
                if book.store.get_run(rid) is not None:
                    assert len(book.resume(rid, wait=10)) == count
        executions = bank.stats()["executions_by_key"]
        mine = {k: v for k, v in executions.items() if k.startswith(prefix)}
        assert set(mine.values()) <= {1}
