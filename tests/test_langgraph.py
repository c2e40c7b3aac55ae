"""LangGraph on daybook: an agent process SIGKILLed after its refund tool paid and before
LangGraph checkpointed the step resumes the thread and pays once (the ledger file is the
counterparty's own record); the same agent without daybook pays twice (so the test can fail)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import refund_agent
from refund_agent import lines

pytest.importorskip("langgraph.prebuilt", reason="needs daybook[langgraph]")

from daybook import Daybook

# Agent processes started and killed in a row: slow on a loaded machine, scheduled first.
pytestmark = pytest.mark.slow

EXAMPLE = "langgraph_agent.py"


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
        "CHECKPOINTS": str(tmp_path / "checkpoints.db"),
    }


def test_a_langgraph_agent_killed_after_its_tool_acted_resumes_and_pays_once(
    db_url: str, env: dict[str, str]
) -> None:
    kill_after_refund(env, "--db", db_url, "--thread", "t1")
    done = agent(env, "--db", db_url, "--thread", "t1")
    out, err = done.communicate(timeout=120)
    assert done.returncode == 0, err
    assert out.strip() == "order A-1 refunded"
    (line,) = lines(Path(env["REFUNDS"]))  # one refund at the counterparty
    assert line["key"] == "t1/call_1"  # keyed by the thread and the model's tool call id
    with Daybook(db_url) as book:
        call = book.get_run("t1/call_1")
        assert call.status == "completed" and call.workflow == "langgraph.tool_call"
        (effect,) = book.effects("t1/call_1")
        assert effect["status"] == "confirmed"
        # The first model reply was recorded before the kill and read back, not sampled again.
        assert len(book.runs(workflow="langgraph.model_call")) == 2
    assert Path(env["MODEL_CALLS"]).read_text().count("call") == 2


def test_the_same_langgraph_agent_without_daybook_pays_twice(env: dict[str, str]) -> None:
    kill_after_refund(env, "--no-daybook", "--thread", "t1")
    done = agent(env, "--no-daybook", "--thread", "t1")
    _, err = done.communicate(timeout=120)
    assert done.returncode == 0, err
    assert len(lines(Path(env["REFUNDS"]))) == 2  # the duplicate refund daybook prevents


def test_daybook_show_renders_a_langgraph_tool_call(db_url: str, env: dict[str, str]) -> None:
    done = agent(env, "--db", db_url, "--thread", "t2")
    assert done.wait(timeout=120) == 0
    shown = subprocess.run(
        [sys.executable, "-m", "daybook", "show", "t2/call_1", "--db", db_url],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert shown.returncode == 0 and "langgraph:refund" in shown.stdout, shown.stderr


def test_a_functional_api_task_rerun_by_langgraph_gets_the_recorded_result(
    db_url: str, tmp_path: Path
) -> None:
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.func import entrypoint, task

    from daybook.integrations.langgraph import journaled

    sent: list[str] = []

    def send(to: str) -> str:
        sent.append(to)  # the counterparty's own record
        return f"sent to {to}"

    with Daybook(db_url) as book:
        durable_send = journaled(book, send, name="send", idempotent=True)

        @task
        def notify(to: str) -> str:
            return str(durable_send(to=to))

        @entrypoint(checkpointer=InMemorySaver())
        def flow(to: str) -> str:
            return notify(to).result()

        config: Any = {"configurable": {"thread_id": "f1"}}
        assert flow.invoke("ana@example.com", config) == "sent to ana@example.com"

        # A fresh checkpointer (LangGraph lost the task's result): the task runs again...
        @entrypoint(checkpointer=InMemorySaver())
        def again(to: str) -> str:
            return notify(to).result()

        assert again.invoke("ana@example.com", config) == "sent to ana@example.com"
    assert sent == ["ana@example.com"]  # ...and daybook answers from the journal: sent once
