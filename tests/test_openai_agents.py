"""The OpenAI Agents SDK on daybook: an agent process SIGKILLed after its refund tool paid and
before the SDK recorded it, then run again, pays once (the ledger file is the counterparty's own
record); the same agent without daybook pays twice (so the test can fail)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

try:  # (not `import agents`: tests/agents.py shadows the SDK's package inside pytest)
    importlib.metadata.version("openai-agents")
except importlib.metadata.PackageNotFoundError:
    pytest.skip("needs daybook[openai-agents]", allow_module_level=True)

from daybook import Daybook

HERE = Path(__file__).parent
EXAMPLE = HERE.parent / "examples" / "openai_agents_refund.py"


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def agent(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(EXAMPLE), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def kill_after_refund(env: dict[str, str], ledger: Path, *args: str) -> None:
    proc = agent({**env, "CRASH_AFTER_REFUND": "1"}, *args)
    deadline = time.monotonic() + 300  # the SDK's import alone took 40 s under load
    while not lines(ledger) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(lines(ledger)) == 1, proc.communicate(timeout=5)
    proc.send_signal(signal.SIGKILL)  # paid, and the SDK has not recorded the tool's answer
    proc.wait(timeout=30)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "REFUNDS": str(tmp_path / "refunds.jsonl"),
        "MODEL_CALLS": str(tmp_path / "model.txt"),
    }


@pytest.mark.slow
def test_an_agent_killed_after_its_tool_acted_resumes_and_pays_once(db_url: str, env: dict[str, str]) -> None:
    ledger = Path(env["REFUNDS"])
    kill_after_refund(env, ledger, "--db", db_url, "--run", "refund-1")
    done = agent(env, "--db", db_url, "--run", "refund-1")
    out, err = done.communicate(timeout=120)
    assert done.returncode == 0, err
    assert out.strip() == "order A-1 refunded"
    (line,) = lines(ledger)  # one refund at the counterparty
    assert line["key"] == "refund-1/call_1"  # keyed by the run and the model's call id
    # The first model response was recorded before the kill: the resumed run did not sample it
    # again (1 call before the kill, 1 after for the final answer).
    assert Path(env["MODEL_CALLS"]).read_text().count("call") == 2
    with Daybook(db_url) as book:
        (effect,) = book.effects("refund-1")
        assert effect["status"] == "confirmed" and effect["key"] == "refund-1/call_1"


@pytest.mark.slow
def test_the_same_agent_without_daybook_pays_twice(env: dict[str, str]) -> None:
    ledger = Path(env["REFUNDS"])
    kill_after_refund(env, ledger, "--no-daybook")
    done = agent(env, "--no-daybook")
    _, err = done.communicate(timeout=120)
    assert done.returncode == 0, err
    assert len(lines(ledger)) == 2  # the duplicate refund daybook prevents


# Five agent processes in a row, each importing the SDK: minutes on a loaded 2-core machine.
# The subject is the integration binding the SDK's approval to a daybook gate; gates on both
# stores are tested in test_approval_lifecycle.py, so this one runs on SQLite only.
@pytest.mark.slow
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_tool_that_needs_approval_waits_for_a_daybook_gate_bound_to_its_call(
    db_url: str, env: dict[str, str]
) -> None:
    ledger = Path(env["REFUNDS"])

    def gated(run: str, order: str) -> str:
        done = agent(env, "--db", db_url, "--run", run, "--order", order, "--gated")
        out, err = done.communicate(timeout=120)
        assert done.returncode == 0, err
        return out.strip()

    with Daybook(db_url) as book:
        token = book.add_approver("lead")
        assert gated("gated-1", "B-2").startswith("waiting for approval")
        assert lines(ledger) == []  # held by the SDK, gated by daybook: nothing paid
        (gate,) = book.approvals()
        assert gate["run_id"] == "gated-1" and gate["approvers"] == ["lead"]
        book.approve("gated-1", str(gate["gate_id"]), approver="lead", token=token)
        assert gated("gated-1", "B-2") == "order B-2 refunded"
        (line,) = lines(ledger)
        assert line["key"] == "gated-1/call_1" and line["order"] == "B-2"
        assert gated("gated-1", "B-2") == "order B-2 refunded"  # completed: nothing runs again
        assert len(lines(ledger)) == 1

        assert gated("gated-2", "C-3").startswith("waiting for approval")
        (gate,) = book.approvals()
        book.approve("gated-2", str(gate["gate_id"]), approver="lead", token=token, approve=False)
        assert gated("gated-2", "C-3") == "order C-3 refunded"  # the scripted model ignores the "no"
        assert len(lines(ledger)) == 1  # the denied refund was never paid
