"""Approvals with a full lifecycle: an expiry policy per gate (deny, escalate, wait,
needs_attention), a precheck whose facts are re-read after the approval (asked again when they
changed), four eyes (`approvals=2`), across processes, a SIGKILL, on both stores."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import approval_flows
import pytest
from conftest import HERE, last_json, wait_until
from store_bytes import store_text

import daybook
from daybook import Daybook, RunStatus, Secret, Suspended
from daybook.gates import outbox

FLOWS = str(HERE / "approval_flows.py")


def flow(db_url: str, *args: str) -> dict[str, Any]:
    """`approval_flows.py DB ARGS` in a new process: what it reported (result or error)."""
    done = subprocess.run([sys.executable, FLOWS, db_url, *args], capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 3), done.stderr
    out = last_json(done.stdout)
    assert isinstance(out, dict)
    return out


def start(db_url: str, run_id: str, workflow: str, *args: Any) -> dict[str, Any]:
    return flow(db_url, "start", run_id, workflow, json.dumps(list(args)))


def resume(db_url: str, run_id: str) -> dict[str, Any]:
    """Resume in a new process, once no dead process holds the run's lease any more."""

    def once() -> dict[str, Any] | None:
        done = subprocess.run(
            [sys.executable, FLOWS, db_url, "resume", run_id], capture_output=True, text=True, timeout=300
        )
        if done.returncode == 4:
            return None  # leased by a process that was killed: its lease runs out shortly
        assert done.returncode in (0, 3), done.stderr
        out = last_json(done.stdout)
        assert isinstance(out, dict)
        return out

    return wait_until(once)


def parked(out: dict[str, Any]) -> bool:
    return out.get("error") == "Suspended"


def gate_row(book: Daybook, run_id: str) -> dict[str, Any]:
    rows = [g for g in book.approvals() if g["run_id"] == run_id]
    assert len(rows) == 1, rows
    return rows[0]


def past(deadline: Any) -> None:
    """Wait until the wall clock is past `deadline` (the gate's time has run out)."""
    assert isinstance(deadline, float)
    wait_until(lambda: time.time() > deadline + 0.05)


# -- expiry ---------------------------------------------------------------------------------


def test_an_unanswered_gate_expires_into_a_deny_and_a_late_approval_does_nothing(db_url: str) -> None:
    with Daybook(db_url) as book:
        alice = book.add_approver("alice")
        assert parked(start(db_url, "deny", "expiring", "deny", 0.5))
        row = gate_row(book, "deny")
        assert row["expiry"] == "deny" and row["approvers"] == ["alice"] and row["approvals"] == 1
        past(row["deadline"])
        assert resume(db_url, "deny")["result"]["outcome"] == "timed_out"
        assert book.approve("deny", str(row["gate_id"]), approver="alice", token=alice) == "late"
        assert book.get_run("deny").result["outcome"] == "timed_out"
        assert book.approvals() == []


def test_the_old_decline_value_still_denies(book: Daybook) -> None:
    @daybook.workflow
    def old(ctx: daybook.Context) -> str:
        return ctx.gate("x", timeout=0.1, on_timeout="decline").outcome

    book.inline_wait = 5
    assert book.run(old, run_id="old") == "timed_out"


# Each level's time in turn: the test acts inside a level's time, which a loaded machine may
# overrun; the scenario then starts over with a longer one (a guard, not a speed limit).
LEVEL_TIMES = (2.0, 8.0, 32.0)


def test_an_unanswered_gate_escalates_to_the_next_list_which_alone_may_decide(db_url: str) -> None:
    with Daybook(db_url) as book:
        tokens = book.add_approver("alice"), book.add_approver("bob")
        for level_time in LEVEL_TIMES:
            if _escalation(book, db_url, f"esc-{level_time:g}", level_time, tokens):
                return
    raise AssertionError(f"every level time in {LEVEL_TIMES} s was overrun")


def _refused(book: Daybook, run_id: str, gate: str, who: str, token: str) -> bool:
    with pytest.raises(daybook.NotAuthorized, match="may not decide"):
        book.approve(run_id, gate, approver=who, token=token)
    return True


def _escalation(book: Daybook, db_url: str, run_id: str, level_time: float, tokens: tuple[str, str]) -> bool:
    """The escalation with `level_time` seconds a level; False as soon as the test was too slow
    to act inside a level's time (then nothing is asserted about that level)."""
    alice, bob = tokens
    assert parked(start(db_url, run_id, "expiring", "escalate", level_time, ["bob"]))
    row = gate_row(book, run_id)
    assert row["expiry"] == "escalate" and row["escalate_to"] == [["bob"]] and row["level"] == 0
    gate = str(row["gate_id"])
    if time.time() >= row["deadline"] - 0.5:
        return False
    assert _refused(book, run_id, gate, "bob", bob)  # not bob's turn yet
    past(row["deadline"])
    # The level now due is shown before any worker woke the run to record it.
    now = gate_row(book, run_id)
    assert now["level"] == 1 and now["approvers"] == ["bob"] and now["deadline"] > row["deadline"]
    assert _refused(book, run_id, gate, "alice", alice)
    if time.time() >= now["deadline"] - 0.5:
        return False
    assert book.approve(run_id, gate, approver="bob", token=bob) == "delivered"
    if time.time() >= now["deadline"]:
        return False  # the verdict may have come after bob's time
    # Delivered inside bob's time: approved, however late the run is resumed.
    assert resume(db_url, run_id)["result"] == {"outcome": "approved", "by": "bob", "gate": gate}
    assert [e.name for e in book.journal(run_id) if e.name.startswith("escalate:")] == [f"escalate:{gate}"]
    # The escalation is a request of its own in the outbox, addressed to the new level.
    sent = {e.request["key"]: e.request for e in outbox.entries(book.store) if e.request}
    assert sent[f"{gate}/1"]["approvers"] == ["alice"] and sent[f"{gate}/1"]["expiry"] == "escalate"
    moved = sent[f"{gate}/2"]
    assert (moved["reason"], moved["approvers"], moved["level"]) == ("escalated", ["bob"], 1)
    assert moved["deadline"] == pytest.approx(now["deadline"])
    return True


def test_after_the_last_escalation_level_the_gate_denies(db_url: str) -> None:
    with Daybook(db_url) as book:
        assert parked(start(db_url, "esc2", "expiring", "escalate", 0.3, [["bob"], ["carol"]]))
        row = gate_row(book, "esc2")
        past(float(row["opened"]) + 3 * 0.3)  # three levels: alice, bob, carol
        out = resume(db_url, "esc2")
        while parked(out):  # each level's timer is a wake-up of its own
            out = resume(db_url, "esc2")
        assert out["result"]["outcome"] == "timed_out"
        moved = [e.data["value"]["approvers"] for e in book.journal("esc2") if e.name.startswith("escalate:")]
        assert moved == [["bob"], ["carol"]]


def test_a_gate_that_waits_is_shown_overdue_and_still_takes_a_verdict(db_url: str) -> None:
    with Daybook(db_url) as book:
        alice = book.add_approver("alice")
        assert parked(start(db_url, "wait", "expiring", "wait", 2.0))
        row = gate_row(book, "wait")
        assert row["expiry"] == "wait" and row["overdue"] is False
        past(row["deadline"])
        assert gate_row(book, "wait")["overdue"] is True
        assert parked(resume(db_url, "wait"))  # past its deadline, it keeps waiting
        assert gate_row(book, "wait")["overdue"] is True
        assert book.approve("wait", str(row["gate_id"]), approver="alice", token=alice) == "delivered"
        assert resume(db_url, "wait")["result"]["outcome"] == "approved"


@pytest.mark.parametrize("policy", ["needs_attention", "escalate"])
def test_needs_attention_and_escalate_without_a_list_stop_the_run(db_url: str, policy: str) -> None:
    # "escalate" with no escalate_to goes to the operators, its meaning before escalation lists.
    with Daybook(db_url) as book:
        assert parked(start(db_url, "att", "expiring", policy, 0.3))
        past(gate_row(book, "att")["deadline"])
        assert resume(db_url, "att")["error"] == "NeedsAttention"
        assert book.get_run("att").status == RunStatus.NEEDS_ATTENTION


# -- staleness --------------------------------------------------------------------------------


def test_a_stale_approval_is_asked_again_and_only_the_fresh_one_releases_the_act(
    db_url: str,
    bank,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    quote = tmp_path / "quote.json"
    quote.write_text(json.dumps({"price": 100}))
    with Daybook(db_url) as book:
        alice = book.add_approver("alice")
        assert parked(start(db_url, "buy", "purchase", bank.url, str(quote)))
        first = gate_row(book, "buy")
        assert first["facts"] == {"price": 100} and first["ask"] == 1  # what the approver saw
        quote.write_text(json.dumps({"price": 120}))  # the world moves while the run waits
        assert book.approve("buy", str(first["gate_id"]), approver="alice", token=alice) == "delivered"
        assert parked(resume(db_url, "buy"))  # asked again, not released
        assert bank.stats()["executions_by_key"] == {}
        again = gate_row(book, "buy")
        assert again["gate_id"] != first["gate_id"] and again["first"] == first["gate_id"]
        assert again["facts"] == {"price": 120} and again["ask"] == 2
        # The approvers are sent the re-ask with the new facts (the outbox's request).
        sent = {e.request["key"]: e.request for e in outbox.entries(book.store) if e.request}
        assert sent[f"{first['gate_id']}/1"]["facts"] == {"price": 100}
        reask = sent[f"{again['gate_id']}/1"]
        assert (reask["reason"], reask["facts"], reask["ask"]) == ("re-asked", {"price": 120}, 2)
        # The old approval is spent: it cannot be given again for the new request.
        assert book.approve("buy", str(first["gate_id"]), approver="alice", token=alice) == "late"
        assert book.approve("buy", str(again["gate_id"]), approver="alice", token=alice) == "delivered"
        out = resume(db_url, "buy")
        assert out["result"]["paid"] is not None
    assert list(bank.stats()["executions_by_key"].values()) == [1]


def test_facts_that_keep_changing_end_in_a_stale_verdict(book: Daybook) -> None:
    prices = iter(range(100, 200))

    @daybook.workflow
    def jittery(ctx: daybook.Context) -> list[Any]:
        v = ctx.gate("buy", timeout=None, precheck=lambda: {"price": next(prices)}, reasks=1)
        return [v.outcome, v.facts]

    alice = book.add_approver("alice")
    book.inline_wait = 0.05
    with pytest.raises(Suspended):
        book.run(jittery, run_id="jit")
    book.approve("jit", str(gate_row(book, "jit")["gate_id"]), approver="alice", token=alice)
    with pytest.raises(Suspended):
        book.resume("jit")  # 100 became 101: asked again
    book.approve("jit", str(gate_row(book, "jit")["gate_id"]), approver="alice", token=alice)
    assert book.resume("jit") == ["stale", {"price": 102}]  # and again: no more asks


# -- four eyes --------------------------------------------------------------------------------


def test_two_approvals_by_the_same_approver_do_not_release_two_distinct_do(db_url: str) -> None:
    with Daybook(db_url) as book:
        alice, bob = book.add_approver("alice"), book.add_approver("bob")
        assert parked(start(db_url, "two", "two_of"))
        gate = str(gate_row(book, "two")["gate_id"])
        assert book.approve("two", gate, approver="alice", token=alice) == "delivered"
        assert book.approve("two", gate, approver="alice", token=alice) == "delivered"
        assert parked(resume(db_url, "two"))  # alice twice counts once
        row = gate_row(book, "two")
        assert row["given"] == ["alice"] and row["approvals"] == 2
        assert book.approve("two", gate, approver="bob", token=bob) == "delivered"
        assert resume(db_url, "two")["result"] == {"outcome": "approved", "approvers": ["alice", "bob"]}


def test_a_tool_that_needs_two_approvers_reaches_the_bank_only_after_both(
    db_url: str,
    bank,  # type: ignore[no-untyped-def]
) -> None:
    with Daybook(db_url) as book:
        alice, bob = book.add_approver("alice"), book.add_approver("bob")
        assert parked(start(db_url, "w", "four_eyes", bank.url))
        gate = str(gate_row(book, "w")["gate_id"])
        assert gate_row(book, "w")["approvals"] == 2
        book.approve("w", gate, approver="alice", token=alice)
        assert parked(resume(db_url, "w"))
        assert bank.stats()["executions_by_key"] == {}
        book.approve("w", gate, approver="bob", token=bob)
        assert resume(db_url, "w")["result"]["paid"] is not None
    assert list(bank.stats()["executions_by_key"].values()) == [1]


def test_one_denial_declines_a_four_eyes_gate(book: Daybook) -> None:
    alice, bob = book.add_approver("alice"), book.add_approver("bob")
    book.inline_wait = 0.05
    with pytest.raises(Suspended):
        book.run(approval_flows.two_of, run_id="no")
    gate = str(gate_row(book, "no")["gate_id"])
    book.approve("no", gate, approver="alice", token=alice)
    book.approve("no", gate, approver="bob", token=bob, approve=False, reason="not today")
    assert book.resume("no") == {"outcome": "declined", "approvers": ["alice"]}


# -- crash ----------------------------------------------------------------------------------


def test_a_sigkill_while_a_four_eyes_gate_is_open_keeps_the_approval_it_counted(db_url: str) -> None:
    with Daybook(db_url) as book:
        alice, bob = book.add_approver("alice"), book.add_approver("bob")
        # The run waits in its process (a long inline wait): it reads alice's approval live.
        proc = subprocess.Popen(
            [sys.executable, FLOWS, db_url, "start", "kill", "two_of", "[]", "--inline-wait", "600"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            gate = str(wait_until(lambda: book.approvals())[0]["gate_id"])
            book.approve("kill", gate, approver="alice", token=alice)
            wait_until(lambda: any(e.name == f"verdict-check:{gate}" for e in book.journal("kill")))
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == -signal.SIGKILL
        row = gate_row(book, "kill")
        assert row["given"] == ["alice"] and row["state"] == "waiting"
        book.approve("kill", gate, approver="bob", token=bob)
        assert resume(db_url, "kill")["result"] == {"outcome": "approved", "approvers": ["alice", "bob"]}


# -- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("terms", "says"),
    [
        ({"approvals": 0}, "approvals=0"),
        ({"on_timeout": "later"}, "not an expiry policy"),
        ({"on_timeout": "escalate", "escalate_to": ["bob"], "timeout": None}, "needs a timeout"),
        ({"on_timeout": "deny", "escalate_to": ["bob"]}, "escalate_to is given"),
        ({"on_timeout": "escalate", "escalate_to": [[]]}, "none empty"),
    ],
)
def test_bad_gate_terms_are_refused_before_anything_is_asked(
    book: Daybook, terms: dict[str, Any], says: str
) -> None:
    @daybook.workflow
    def bad(ctx: daybook.Context) -> str:
        return ctx.gate("x", **{"timeout": 60, **terms}).outcome

    # The run is parked (fix the code, then `daybook retry`), saying what the gate refused.
    with pytest.raises(daybook.RunParked, match=rf"raised ConfigError: ctx.gate\('x'\): .*{says}"):
        book.run(bad, run_id="bad")
    assert not [e for e in book.journal("bad") if e.name.startswith("gate:")]


def test_a_tool_asking_for_zero_approvals_is_refused_at_declaration() -> None:
    def send(*, idempotency_key: str) -> None: ...

    with pytest.raises(daybook.ConfigError, match="approvals=0"):
        daybook.tool(irreversible=True, approvals=0)(send)
    with pytest.raises(daybook.ConfigError, match="precheck= must be a function"):
        daybook.tool(irreversible=True, precheck="price")(send)  # type: ignore[arg-type]


# -- secrets --------------------------------------------------------------------------------

CARD = "4111-9999-CARD-SECRET"
BALANCE = "balance-7731-SECRET"


def test_a_secret_in_the_gate_request_and_its_facts_is_never_in_the_store_in_clear(db_url: str) -> None:
    @daybook.workflow
    def secretive(ctx: daybook.Context) -> str:
        v = ctx.gate(
            "charge",
            timeout=None,
            about={"card": Secret(CARD)},
            precheck=lambda: {"balance": Secret(BALANCE), "currency": "EUR"},
        )
        return v.outcome

    with Daybook(db_url, inline_wait=0.05) as book:
        alice = book.add_approver("alice")
        with pytest.raises(Suspended):
            book.run(secretive, run_id="sec")
        row = gate_row(book, "sec")
        assert row["facts"]["currency"] == "EUR" and CARD not in json.dumps(row)
        book.approve("sec", str(row["gate_id"]), approver="alice", token=alice)
        assert book.resume("sec") == "approved"  # the same secret re-read: the facts held
        text = store_text(db_url)
        assert "EUR" in text  # the control: the facts are there
        assert CARD not in text and BALANCE not in text
