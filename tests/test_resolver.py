"""The unknown-outcome resolver (P2, K4, K6, H1-H2) against the real HTTP bank, with SIGKILLed
agent processes: every unknown becomes known by asking, never by guessing."""

from __future__ import annotations

import itertools
import json
import threading
import time
from pathlib import Path

import pytest
from conftest import killed, last_json, run_child, wait_until

import daybook
from daybook import Daybook, Kind
from daybook.demo.bank import Bank

WIRE_KEY_STEP = 2  # http_payout: step 1 the plan, step 2 the wire, step 3 the GL post


def start(db_url: str, run_id: str, bank: Bank, *flags: str, **wire: object) -> object:
    return run_child(db_url, "start", run_id, "http_payout", json.dumps([bank.url, 100, wire]), *flags)


def wire_rows(book: Daybook, run_id: str) -> list[daybook.Event]:
    return [e for e in book.journal(run_id) if e.step == WIRE_KEY_STEP]


def _wait_out_the_window(db_url: str, run_id: str, window: float) -> None:
    """Until the wire's dedup window has passed. The resumed process judges it from the intent's
    time, so that is where the wait starts (not from the end of the killed child)."""
    with Daybook(db_url) as book:
        intent_at = next(e.at for e in wire_rows(book, run_id) if e.kind == Kind.INTENT)
    wait_until(lambda: time.time() > intent_at + window + 0.1)


def test_a_bank_that_executes_and_drops_the_reply_is_asked_and_the_wire_is_confirmed_with_its_id(
    db_url: str, bank: Bank
) -> None:
    bank.faults.drop_after_execute = 1
    bank.faults.collections = {"wires"}
    with Daybook(db_url) as book:
        result = book.run(__import__("agents").http_payout, bank.url, 100, {}, run_id="drop")
        rows = wire_rows(book, "drop")
    assert [e.status for e in rows if e.kind == Kind.OUTCOME] == ["unknown", "confirmed"]
    assert rows[-1].data["resolved_by"] == "status"
    assert rows[-1].data["ref"] == result["wire"]
    assert sum(bank.stats()["executions_by_key"].values()) == 2  # one wire, one GL post


def test_a_request_the_bank_never_received_is_sent_again_under_the_same_key_once(
    db_url: str, bank: Bank
) -> None:
    proc = start(db_url, "never", bank, "--kill-after", "intent:1")
    assert killed(proc)
    assert bank.stats()["requests_by_key"] == {}
    proc = run_child(db_url, "resume", "never")
    assert proc.returncode == 0, proc.stderr
    with Daybook(db_url) as book:
        rows = wire_rows(book, "never")
    assert [e.kind for e in rows] == ["intent", "outcome", "attempt", "outcome"]
    assert rows[1].status == "unknown" and rows[-1].status == "confirmed"
    assert bank.stats()["executions_by_key"] == {rows[0].key: 1, f"never/{WIRE_KEY_STEP + 1}": 1}


def test_pending_answers_are_polled_on_a_durable_timer_that_survives_a_kill_during_the_wait(
    db_url: str, bank: Bank
) -> None:
    # The bank executes, drops the reply, then says "pending" (202) to three status queries.
    bank.faults.drop_after_execute = 1
    bank.faults.pending = 3
    bank.faults.collections = {"wires"}
    # Outcome rows: 1 unknown (dropped), 2 the first "pending" with the next round's time: die there.
    proc = start(db_url, "poll", bank, "--kill-after", "outcome:2", poll=0.3)
    assert killed(proc)
    with Daybook(db_url) as book:
        rows = wire_rows(book, "poll")
    assert rows[-1].data["answer"] == "pending" and rows[-1].data["poll_at"] > rows[-1].at
    assert rows[-1].data["ref"] == "wire-000001"  # the 202 carried the bank's own id
    proc = run_child(db_url, "resume", "poll")
    assert proc.returncode == 0, proc.stderr
    with Daybook(db_url) as book:
        rows = wire_rows(book, "poll")
        history = [h["status"] for h in book.effects("poll", tool="bankapi.wire")[0]["history"]]  # type: ignore[index, union-attr]
    assert [e.data.get("answer") for e in rows if e.kind == Kind.OUTCOME][1:4] == ["pending"] * 3
    assert history == ["intent", "unknown", "unknown", "unknown", "unknown", "confirmed"]
    # Rounds are spaced by the declared poll interval, across the kill too: each "pending" sets
    # the next round's time 0.3 s ahead (taken just before its row is stamped, so the rows' own
    # times may be a few ms closer), and no round is asked before it.
    polls = [e for e in rows if e.kind == Kind.OUTCOME][1:]
    assert all(b.at >= a.data["poll_at"] >= a.at + 0.25 for a, b in itertools.pairwise(polls))
    assert bank.stats()["executions_by_key"][rows[0].key] == 1


def test_a_long_poll_interval_suspends_the_run_until_the_next_round_is_due(db_url: str, bank: Bank) -> None:
    bank.faults.drop_after_execute = 1
    bank.faults.pending = 1
    bank.faults.collections = {"wires"}
    agents = __import__("agents")
    with Daybook(db_url) as book:
        with pytest.raises(daybook.Suspended):
            book.run(agents.http_payout, bank.url, 100, {"poll": 3.0}, run_id="long-poll")
        info = book.get_run("long-poll")
        assert info.status == "suspended"
        poll_at = wire_rows(book, "long-poll")[-1].data["poll_at"]
        assert info.wake_at == pytest.approx(poll_at)
        # Resuming before it is due only suspends again; once due, the next round runs.
        with pytest.raises(daybook.Suspended):
            book.resume("long-poll")
        time.sleep(max(0.0, poll_at - time.time()))
        assert book.resume("long-poll")["wire"] == "wire-000001"
    assert bank.stats()["executions_by_key"]["long-poll/2"] == 1


@pytest.mark.slow
def test_past_the_dedup_window_the_key_is_not_trusted_and_nothing_is_resent(
    db_url: str, tmp_path: Path
) -> None:
    with Bank(dedup_window=1.0) as bank:
        proc = start(db_url, "window", bank, "--kill-after", "intent:1", dedup_window=1.0)
        assert killed(proc)
        _wait_out_the_window(db_url, "window", 1.0)
        proc = run_child(db_url, "resume", "window")
        assert proc.returncode == 3
        assert last_json(proc.stdout)["error"] == "DedupWindowExpired"  # type: ignore[index]
        assert bank.stats()["requests_by_key"] == {}  # never re-sent on a forgotten key
        with Daybook(db_url) as book:
            assert book.get_run("window").status == "needs_attention"
            # A person checks the bank's statement and records it never arrived, with evidence.
            book.resolve("window/2", absent=True, by="ops", evidence="statement 2026-11-22")
        proc = run_child(db_url, "resume", "window")
        assert proc.returncode == 0, proc.stderr
        assert bank.stats()["executions_by_key"]["window/2"] == 1


@pytest.mark.slow
def test_past_the_dedup_window_the_resolver_asks_by_the_counterpartys_own_reference(
    db_url: str,
) -> None:
    # The wire executes, the reply is lost, the bank answers "pending" with its id; the agent
    # dies while waiting; by the time it resumes the bank has forgotten the key.
    with Bank(dedup_window=1.0) as bank:
        bank.faults.drop_after_execute = 1
        bank.faults.pending = 1
        bank.faults.collections = {"wires"}
        proc = start(db_url, "by-ref", bank, "--kill-after", "outcome:2", dedup_window=1.0, poll=0.2)
        assert killed(proc)
        _wait_out_the_window(db_url, "by-ref", 1.0)
        proc = run_child(db_url, "resume", "by-ref")
        assert proc.returncode == 0, proc.stderr
        with Daybook(db_url) as book:
            rows = wire_rows(book, "by-ref")
        assert rows[-1].status == "confirmed" and rows[-1].data["resolved_by"] == "lookup"
        assert rows[-1].data["ref"] == "wire-000001"
        assert bank.stats()["executions_by_key"]["by-ref/2"] == 1


def test_a_keyless_act_killed_mid_act_is_resolved_by_verify_not_by_running_it_again(
    db_url: str, tmp_path: Path
) -> None:
    target = tmp_path / "deploys.log"
    proc = run_child(
        db_url, "start", "keyless", "keyless", json.dumps([str(target)]), "--kill-before", "outcome:1"
    )
    assert killed(proc)
    assert target.read_text() == "deployed v2\n"  # it happened; the journal cannot know
    proc = run_child(db_url, "resume", "keyless")
    assert proc.returncode == 0, proc.stderr
    assert target.read_text() == "deployed v2\n"  # not run again
    with Daybook(db_url) as book:
        last = book.journal("keyless")[-2]
    assert last.status == "confirmed" and last.data["resolved_by"] == "verify"


def test_a_keyless_tool_without_verify_is_irreversible_and_keyless_by_profile() -> None:
    @daybook.tool
    def click_button(*, idempotency_key: str) -> None:
        return None

    profile = click_button.profile()
    assert profile["effect_class"] == "irreversible" and profile["accepts_keys"] is False
    assert profile["gated_by_agent_loop"] is True and profile["gated_by_default"] is False


def test_the_closing_step_waits_at_the_barrier_until_no_unknown_is_open(db_url: str, bank: Bank) -> None:
    agents = __import__("agents")
    bank.faults.drop_after_execute = 1
    with Daybook(db_url) as book:
        with pytest.raises(daybook.NeedsAttention):
            book.run(agents.blind, bank.url, run_id="open")
        assert [u["key"] for u in book.unknowns()] == ["open/1"]
        closed: dict[str, object] = {}

        def close() -> None:
            with Daybook(db_url) as other:
                closed["result"] = other.run(agents.close_day, bank.url, 0.2, run_id="close")
                closed["at"] = time.time()

        closer = threading.Thread(target=close)
        closer.start()
        time.sleep(1.0)
        assert "result" not in closed  # held at the barrier while open/1 is unknown
        assert "close/2" not in bank.stats()["requests_by_key"]
        resolved_at = time.time()
        book.resolve("open/1", confirmed="payment-000001", by="ops", evidence="bank statement")
        closer.join(30)
        assert closed["at"] >= resolved_at  # type: ignore[operator]
        checks = [e for e in book.journal("close") if e.name == "barrier"]
        assert checks[0].data["value"] == [
            {"run_id": "open", "step": 1, "key": "open/1", "tool": "pay_blind"}
        ]
        assert checks[-1].data["value"] == []
