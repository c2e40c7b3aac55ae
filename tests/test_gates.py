"""Approval gates: durable, addressed to one decision, authenticated, late verdicts do nothing."""

from __future__ import annotations

import os
import subprocess
import time

import agents
import pytest
from conftest import cli as run_cli
from conftest import run_worker

import daybook
from daybook import Daybook, Kind, RunStatus, Suspended


def cli(db_url: str, *args: str, token: str | None = None) -> subprocess.CompletedProcess[str]:
    env = None if token is None else {**os.environ, "DAYBOOK_APPROVER_TOKEN": token}
    return run_cli(*args, db=db_url, env=env)


def test_a_gated_action_waits_for_its_own_verdict_then_runs_once(
    db_url: str,
    bank,  # type: ignore[no-untyped-def]
) -> None:
    with Daybook(db_url, inline_wait=0.1) as book:
        token = book.add_approver("oncall")
        other = book.add_approver("intern")
        with pytest.raises(Suspended, match="verdict"):
            book.run(agents.restart, bank.url, 3600.0, run_id="sre")
        gate = "sre/1"  # the plan decision's id
        assert [g["gate_id"] for g in book.approvals()] == [gate]
        # Wrong token, wrong approver, wrong gate: none of them unblocks it.
        with pytest.raises(daybook.NotAuthorized):
            book.approve("sre", gate, approver="oncall", token="guess")
        # Without a valid token nobody learns which runs exist.
        with pytest.raises(daybook.NotAuthorized):
            book.approve("no-such-run", gate, approver="oncall", token="guess")
        with pytest.raises(daybook.RunNotFound):
            book.approve("no-such-run", gate, approver="oncall", token=token)
        with pytest.raises(daybook.NotAuthorized, match="may not decide"):
            book.approve("sre", gate, approver="intern", token=other)
        with pytest.raises(daybook.ConfigError, match="no gate"):
            book.approve("sre", "sre/99", approver="oncall", token=token)
    assert bank.stats()["executions_by_key"] == {}

    # Approve through the CLI; a new worker process picks the run up.
    done = cli(db_url, "approve", "sre", gate, "--as", "oncall", "--reason", "ok", token=token)
    assert done.returncode == 0 and "delivered" in done.stdout, done.stderr
    worker = run_worker(db_url)
    assert worker.returncode == 0, worker.stderr
    with Daybook(db_url) as book:
        info = book.get_run("sre")
        assert info.status == RunStatus.COMPLETED
        assert info.result["outcome"] == "approved" and info.result["by"] == "oncall"
        events = book.journal("sre")
        verdict_at = next(e.at for e in events if e.status == "received")
        check = next(e for e in events if e.name == "precondition:restart_service")
        assert check.at >= verdict_at  # the precondition was checked after the approval
        again = cli(db_url, "approve", "sre", gate, "--as", "oncall", token=token)
        assert "late" in again.stdout  # a second verdict is recorded and does nothing
    assert bank.stats()["executions_by_key"] == {"sre/1/pay/0": 1}


def test_a_declined_gate_performs_nothing(db_url: str, bank) -> None:  # type: ignore[no-untyped-def]
    with Daybook(db_url, inline_wait=0.1) as book:
        token = book.add_approver("oncall")
        with pytest.raises(Suspended):
            book.run(agents.restart, bank.url, 3600.0, run_id="no")
        assert (
            book.approve(
                "no", "no/1", approver="oncall", token=token, approve=False, reason="not during the sale"
            )
            == "delivered"
        )
        assert book.resume("no") == {"outcome": "declined"}
        assert not [e for e in book.journal("no") if e.kind == Kind.INTENT]
    assert bank.stats()["executions_by_key"] == {}


def test_a_verdict_after_the_timeout_is_recorded_as_late_and_does_nothing(
    db_url: str,
    bank,  # type: ignore[no-untyped-def]
) -> None:
    with Daybook(db_url, inline_wait=0.1) as book:
        token = book.add_approver("oncall")
        with pytest.raises(Suspended):
            book.run(agents.restart, bank.url, 0.5, run_id="slow")
        time.sleep(0.7)
        assert book.approve("slow", "slow/1", approver="oncall", token=token) == "late"
        assert book.resume("slow") == {"outcome": "timed_out"}
        late = [row for row in book.store.inbox("slow") if row[1] == "late-verdict:slow/1"]
        assert len(late) == 1 and late[0][3] == "oncall"
    assert bank.stats()["executions_by_key"] == {}


def test_the_approvers_are_notified_once_when_a_gate_opens(book: Daybook) -> None:
    sent: list[dict[str, object]] = []

    @daybook.workflow
    def notified(ctx: daybook.Context) -> str:
        verdict = ctx.gate("delete_pv", approvers=["oncall"], timeout=0.2, notify=sent.append)
        return verdict.outcome

    book.inline_wait = 5
    assert book.run(notified, run_id="notified") == "timed_out"
    assert book.replay("notified") == "timed_out"
    assert len(sent) == 1 and sent[0]["action"] == "delete_pv" and sent[0]["gate_id"] == "notified/1"


def test_a_second_verdict_while_the_first_is_unread_is_late(book: Daybook) -> None:
    @daybook.workflow
    def deploy(ctx: daybook.Context) -> list[object]:
        verdict = ctx.gate("deploy", timeout=None)
        return [verdict.outcome, verdict.approver]

    alice, bob = book.add_approver("alice"), book.add_approver("bob")
    book.inline_wait = 0.05
    with pytest.raises(Suspended):
        book.run(deploy, run_id="twice")
    assert book.approve("twice", "twice/1", approver="alice", token=alice) == "delivered"
    assert book.approvals() == []  # a verdict is already on its way
    assert book.approve("twice", "twice/1", approver="bob", token=bob, approve=False) == "late"
    assert book.resume("twice") == ["approved", "alice"]
