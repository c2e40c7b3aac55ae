"""The shipped examples run, and survive a SIGKILL at their effect boundary."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import killed, run_child

from daybook import Daybook, Kind, Suspended
from daybook.demo.bank import Bank
from daybook.runtime.workflow import load, load_app

EXAMPLES = Path(__file__).parent.parent / "examples"


def test_the_sre_example_runs_end_to_end() -> None:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "sre_agent.py")], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "restarts executed by the ops API: 1" in proc.stdout


def test_the_sre_agent_killed_after_approval_restarts_once(db_url: str) -> None:
    load_app(str(EXAMPLES / "sre_agent.py"))
    sre = load("sre_incident", "")
    with Bank() as ops, Daybook(db_url, inline_wait=0.1) as book:
        token = book.add_approver("oncall")
        with pytest.raises(Suspended):
            book.run(sre, ops.url, run_id="inc")
        book.approve("inc", "inc/2", approver="oncall", token=token)
        # Another process resumes it and dies right after the restart's intent is journaled.
        app = str(EXAMPLES / "sre_agent.py")  # the resuming process imports only what it is given
        proc = run_child(db_url, "resume", "inc", "--kill-after", "intent:1", "--app", app)
        assert killed(proc), proc.stdout + proc.stderr
        result = book.resume("inc", wait=10)
        assert result["outcome"] == "ok"
        assert ops.stats()["executed"] == {"restarts": 1}
        gate_checks = [e for e in book.journal("inc") if e.name == "verify"]
        assert len(gate_checks) == 1  # the precondition was checked once, after approval
        assert [e.kind for e in book.journal("inc")].count(Kind.INTENT) == 1


def test_the_sales_example_runs_end_to_end() -> None:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "sales_agent.py")], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "'outcome': 'yielded'" in proc.stdout and "emails sent: 1" in proc.stdout


def test_the_sales_agent_killed_after_approval_emails_once_and_keeps_the_prospect(
    db_url: str,
) -> None:
    load_app(str(EXAMPLES / "sales_agent.py"))
    outreach = load("outreach", "")
    with Bank() as outbox, Daybook(db_url, inline_wait=0.1) as book:
        token = book.add_approver("sales-lead")
        with pytest.raises(Suspended):
            book.run(outreach, outbox.url, "globex", "agent-a", run_id="sdr")
        assert book.entity("prospect:globex").view().holder == "agent-a"
        book.approve("sdr", "sdr/3", approver="sales-lead", token=token)
        app = str(EXAMPLES / "sales_agent.py")
        proc = run_child(db_url, "resume", "sdr", "--kill-after", "intent:1", "--app", app)
        assert killed(proc), proc.stdout + proc.stderr
        # While agent-a's run is down, the prospect is still held: another agent yields.
        other = book.run(outreach, outbox.url, "globex", "agent-b", run_id="sdr-b")
        assert other["outcome"] == "yielded"
        result = book.resume("sdr", wait=10)
        assert result["outcome"] == "sent"
        assert outbox.stats()["executed"] == {"emails": 1}
        actions = [e.action for e in book.entity("prospect:globex").view().log]
        assert actions.count("completed") == 1 and actions[-1] == "release"
