"""Approvals nobody can forge (audit D1): a gate opens only on a verdict that `approve` wrote
after the token check, bound to the gated act, consumed once; refused attempts leave a trace."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import agents
import pytest
from conftest import cli

import daybook
from daybook import Daybook, Suspended
from daybook.gates import seal


@daybook.workflow
def wire_gate(ctx: daybook.Context) -> dict[str, Any]:
    verdict = ctx.gate(
        "wire 1M", approvers=["alice"], timeout=3600, about={"tool": "wire", "amount": 1_000_000}
    )
    return {"outcome": verdict.outcome, "approver": verdict.approver}


@daybook.workflow
def two_acts_one_decision(ctx: daybook.Context) -> list[str]:
    plan = ctx.decide("plan", lambda: {"legs": 2})
    first = ctx.gate("wire 1M", decision=plan, timeout=3600)
    second = ctx.gate("wire 2M", decision=plan, timeout=3600)
    return [first.outcome, second.outcome]


def _suspend(book: Daybook, wf: Any, run_id: str) -> None:
    book.inline_wait = 0.05
    with pytest.raises(Suspended):
        book.run(wf, run_id=run_id)


def test_a_plain_signal_cannot_approve_a_gate(book: Daybook) -> None:
    book.add_approver("alice")
    _suspend(book, wire_gate, "g2")
    # The audit's exact attack: a signal named like a verdict, from a self-declared sender.
    with pytest.raises(daybook.ConfigError, match="reserved"):
        book.signal("g2", "verdict:g2/1", {"outcome": "approve"}, sender="mallory")
    forged = cli(
        "signal", "g2", "verdict:g2/1", "--payload", '{"outcome":"approve"}', "--by", "mallory", db=book.url
    )
    assert forged.returncode == 1 and "reserved" in forged.stderr
    for name in ("late-verdict:g2/1", "update:x", "budget:raise"):
        with pytest.raises(daybook.ConfigError, match="reserved"):
            book.signal("g2", name, {})
    assert [g["gate_id"] for g in book.approvals()] == ["g2/1"]
    with pytest.raises(Suspended):
        book.resume("g2")  # still waiting: nothing was delivered


def test_a_verdict_for_another_act_does_not_release_the_gate(book: Daybook) -> None:
    token = book.add_approver("alice")
    _suspend(book, wire_gate, "bound")
    # A verdict row that names this gate but carries the digest of another act (what a verdict
    # written for a different action under the same gate id would carry) releases nothing, even
    # signed by alice's own key: the gate reads it, sets it aside and waits on.
    payload = {"outcome": "approve", "reason": "", "digest": "0" * 32}
    sealed = seal.seal(token, "bound", "bound/1", payload, "alice")
    book.store.signal("bound", "verdict:bound/1", json.dumps(sealed), "alice", time.time())
    with pytest.raises(Suspended):
        book.resume("bound")
    refused = [v for v in book.verdicts("bound") if v["state"] == "refused"]
    assert [v["reason"] for v in refused] == ["the verdict was given for another act"]
    assert book.approve("bound", "bound/1", approver="alice", token=token) == "delivered"
    assert book.resume("bound") == {"outcome": "approved", "approver": "alice"}


def test_an_approval_is_consumed_once_and_never_releases_the_next_act(book: Daybook) -> None:
    token = book.add_approver("alice")
    _suspend(book, two_acts_one_decision, "legs")
    gate = "legs/1"  # both gates are addressed to the plan decision
    assert book.approve("legs", gate, approver="alice", token=token) == "delivered"
    with pytest.raises(Suspended):
        book.resume("legs")  # the first act is approved; the second waits for its own verdict
    waiting = book.approvals()
    assert [(g["gate_id"], g["action"]) for g in waiting] == [(gate, "wire 2M")]
    assert book.approve("legs", gate, approver="alice", token=token, approve=False) == "delivered"
    assert book.resume("legs") == ["approved", "declined"]


def test_refused_attempts_are_journaled_with_who_when_and_why(book: Daybook) -> None:
    token = book.add_approver("alice")
    bob = book.add_approver("bob")
    _suspend(book, wire_gate, "audit")
    with pytest.raises(daybook.NotAuthorized):
        book.approve("audit", "audit/1", approver="mallory", token="guess")
    with pytest.raises(daybook.NotAuthorized, match="may not decide"):
        book.approve("audit", "audit/1", approver="bob", token=bob)
    refused = [v for v in book.verdicts("audit") if v["state"] == "refused"]
    assert [(v["approver"], v["outcome"]) for v in refused] == [("mallory", "approve"), ("bob", "approve")]
    assert "token does not match" in str(refused[0]["reason"]) and "may not decide" in str(
        refused[1]["reason"]
    )
    assert all(isinstance(v["at"], float) for v in refused)
    # A refusal is never read as a verdict: the gate still waits, and alice's approval works.
    assert [g["gate_id"] for g in book.approvals()] == ["audit/1"]
    assert book.approve("audit", "audit/1", approver="alice", token=token) == "delivered"
    assert book.resume("audit") == {"outcome": "approved", "approver": "alice"}
    shown = cli("approvals", db=book.url)
    assert shown.returncode == 0 and "refused" in shown.stdout and "mallory" in shown.stdout
    history = cli("approvals", "--history", "--json", db=book.url)
    states = [v["state"] for v in json.loads(history.stdout)]
    assert states.count("refused") == 2 and states.count("delivered") == 1


def test_a_refused_verdict_does_not_wake_the_suspended_run(book: Daybook) -> None:
    book.add_approver("alice")
    _suspend(book, wire_gate, "asleep")
    before = book.get_run("asleep")
    assert before.status == "suspended"
    with pytest.raises(daybook.NotAuthorized):
        book.approve("asleep", "asleep/1", approver="mallory", token="guess")
    after = book.get_run("asleep")
    # A worker takes a suspended run when its wake time is due: a refusal must not set one.
    assert after.status == "suspended" and after.wake_at == before.wake_at
    assert book.store.claim_next("a-worker", 5.0, time.time()) is None


def test_late_and_timed_out_verdicts_are_shown_beside_refusals(book: Daybook) -> None:
    token = book.add_approver("alice")
    book.inline_wait = 5

    @daybook.workflow
    def brief_gate(ctx: daybook.Context) -> str:
        return ctx.gate("deploy", timeout=0.1).outcome

    assert book.run(brief_gate, run_id="brief") == "timed_out"
    assert book.approve("brief", "brief/1", approver="alice", token=token) == "late"
    states = sorted(str(v["state"]) for v in book.verdicts("brief"))
    assert states == ["late", "timed_out"]


def test_the_approver_token_is_read_from_DAYBOOK_TOKEN(db_url: str) -> None:
    with Daybook(db_url, inline_wait=0.05) as book:
        token = book.add_approver("oncall")
        with pytest.raises(Suspended):
            book.run(agents.restart, "http://127.0.0.1:9", 3600.0, run_id="env")
    env = {k: v for k, v in os.environ.items() if k not in ("DAYBOOK_TOKEN", "DAYBOOK_APPROVER_TOKEN")}
    missing = cli("approve", "env", "env/1", "--as", "oncall", db=db_url, env=env)
    assert missing.returncode == 2 and "DAYBOOK_TOKEN" in missing.stderr  # a usage error
    done = cli("approve", "env", "env/1", "--as", "oncall", db=db_url, env={**env, "DAYBOOK_TOKEN": token})
    assert done.returncode == 0 and "delivered" in done.stdout, done.stderr
