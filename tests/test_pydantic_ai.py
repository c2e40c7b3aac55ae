"""Pydantic AI on daybook: an agent process SIGKILLed after its refund tool paid and before the
agent got the answer, then run again, pays once (the ledger file is the counterparty's own
record); the same agent without daybook pays twice (so the test can fail). A tool that needs
approval waits for a daybook gate bound to its call."""

from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import refund_agent
from refund_agent import lines

pytest.importorskip("pydantic_ai.durable_exec", reason="needs daybook[pydantic-ai]")

import daybook
from daybook import Daybook

# Agent processes started and killed in a row: slow on a loaded machine, scheduled first.
pytestmark = pytest.mark.slow

EXAMPLE = "pydantic_ai_agent.py"


def agent(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return refund_agent.agent(EXAMPLE, env, *args)


def kill_after_refund(env: dict[str, str], *args: str) -> None:
    refund_agent.kill_after_refund(EXAMPLE, env, *args)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "REFUNDS": str(tmp_path / "refunds.jsonl"),
        "MODEL_CALLS": str(tmp_path / "model.txt"),
    }


def test_a_pydantic_ai_agent_killed_after_its_tool_acted_resumes_and_pays_once(
    db_url: str, env: dict[str, str]
) -> None:
    kill_after_refund(env, "--db", db_url, "--run", "refund-1")
    done = agent(env, "--db", db_url, "--run", "refund-1")
    out, err = done.communicate(timeout=120)
    assert done.returncode == 0, err
    assert out.strip() == "order A-1 refunded"
    (line,) = lines(Path(env["REFUNDS"]))  # one refund at the counterparty
    assert line["key"].startswith("refund-1/")
    # The first model response was recorded before the kill and read back, not sampled again.
    assert Path(env["MODEL_CALLS"]).read_text().count("call") == 2
    with Daybook(db_url) as book:
        (effect,) = book.effects("refund-1")
        assert effect["status"] == "confirmed" and effect["key"] == line["key"]


def test_the_same_pydantic_ai_agent_without_daybook_pays_twice(env: dict[str, str]) -> None:
    kill_after_refund(env, "--no-daybook")
    done = agent(env, "--no-daybook")
    _, err = done.communicate(timeout=120)
    assert done.returncode == 0, err
    assert len(lines(Path(env["REFUNDS"]))) == 2  # the duplicate refund daybook prevents


def _example() -> Any:
    spec = importlib.util.spec_from_file_location("pydantic_ai_example", refund_agent.EXAMPLES / EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_tool_that_needs_approval_waits_for_a_daybook_gate_bound_to_its_call(
    db_url: str, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REFUNDS", env["REFUNDS"])
    example = _example()
    example.LEDGER = Path(env["REFUNDS"])
    with Daybook(db_url, inline_wait=0) as book:
        token = book.add_approver("lead")
        with pytest.raises(daybook.Suspended):
            book.run(example.approved_refund_agent, "A-2", run_id="ap")
        (gate,) = book.approvals()
        assert gate["run_id"] == "ap" and "refund" in str(gate["action"])
        assert not lines(Path(env["REFUNDS"]))  # nothing paid before the verdict
        book.approve("ap", str(gate["gate_id"]), approver="lead", token=token)
        assert book.resume("ap") == "order A-2 refunded"
    assert len(lines(Path(env["REFUNDS"]))) == 1
