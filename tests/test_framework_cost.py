"""The framework integrations' model calls are charged as `ctx.llm`'s: a Pydantic AI agent run
under a cap is charged the tokens and USD its model responses report, `on_cap="fail"` stops the
next model request before the model is asked, a cap that pauses lets a raise go on while replay
pays nothing again (saved), and a LangGraph model call is charged in its own run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai.durable_exec", reason="needs daybook[pydantic-ai]")

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

import daybook
from daybook import Daybook, Suspended
from daybook.integrations.pydantic_ai import DaybookDurability, run_agent

PRICES = {"scripted-pa": {"input": 1_000_000.0, "output": 2_000_000.0}}  # $1 an input token
ASKED: list[int] = []  # the model's own count of the requests it answered


def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    ASKED.append(len(messages))
    if any(getattr(p, "part_kind", "") == "tool-return" for m in messages for p in m.parts):
        return ModelResponse(parts=[TextPart("done")])
    return ModelResponse(parts=[ToolCallPart("lookup", {"q": "x"}, tool_call_id="c1")])


def lookup(q: str) -> str:
    return f"found {q}"


def build() -> Agent[None, str]:
    agent: Agent[None, str] = Agent(
        FunctionModel(reply, model_name="scripted-pa"), name="pa", capabilities=[DaybookDurability()]
    )
    agent.tool_plain(lookup)
    return agent


@daybook.workflow(name="pa_capped")
async def pa_capped(ctx: daybook.Context, caps: dict[str, float], on_cap: str) -> dict[str, Any]:
    ctx.budget.cap(on_cap=on_cap, **caps)
    result = await run_agent(ctx, build(), "look x up")
    return {"output": str(result.output), "spent": dict(ctx.budget.spent)}


def usages(book: Daybook, run_id: str) -> list[dict[str, Any]]:
    rows = [e for e in book.store.load(run_id) if e.kind == "decision" and e.status == "recorded"]
    return [e.data["usage"] for e in rows if isinstance(e.data.get("usage"), dict)]


def test_a_pydantic_ai_agents_model_requests_are_charged_their_usage(db_url: str) -> None:
    ASKED.clear()
    with Daybook(db_url, prices=PRICES) as book:
        out = book.run(pa_capped, {"usd": 1000.0}, "fail", run_id="pa-charged")
        assert out["output"] == "done" and len(ASKED) == 2
        used = usages(book, "pa-charged")
        assert [u["model"] for u in used] == ["scripted-pa", "scripted-pa"]
        inp = sum(u["input_tokens"] for u in used)
        outp = sum(u["output_tokens"] for u in used)
        assert inp > 0 and outp > 0
        usd = inp * 1.0 + outp * 2.0
        ledger = book.cost("pa-charged")
        assert (ledger.calls, ledger.tokens, ledger.input_tokens) == (2, inp + outp, inp)
        assert ledger.usd == pytest.approx(usd) and ledger.unpriced == ()
        assert out["spent"] == {"usd": pytest.approx(usd), "tokens": inp + outp}
        assert book.budget("pa-charged")["spent"]["usd"] == pytest.approx(usd)


def test_on_cap_fail_stops_the_next_pydantic_ai_model_request_before_the_model_is_asked(
    db_url: str,
) -> None:
    ASKED.clear()
    with Daybook(db_url, prices=PRICES) as book:
        with pytest.raises(daybook.RunFailed, match="BudgetExceeded"):
            book.run(pa_capped, {"tokens": 30.0}, "fail", run_id="pa-fail")
        assert len(ASKED) == 1  # the second request was refused before the model saw it
        (used,) = usages(book, "pa-fail")
        tokens = used["input_tokens"] + used["output_tokens"]
        assert book.budget("pa-fail")["spent"]["tokens"] == tokens


def test_a_paused_pydantic_ai_run_goes_on_after_a_raise_and_replay_pays_nothing_again(
    db_url: str,
) -> None:
    ASKED.clear()
    with Daybook(db_url, prices=PRICES) as book:
        book.inline_wait = 0
        with pytest.raises(Suspended):
            book.run(pa_capped, {"tokens": 30.0}, "pause", run_id="pa-pause")
        assert len(ASKED) == 1
        book.raise_budget("pa-pause", tokens=1000)
        out = book.resume("pa-pause")  # replays the first request, makes the second
        assert out["output"] == "done" and len(ASKED) == 2
        used = usages(book, "pa-pause")
        tokens = sum(u["input_tokens"] + u["output_tokens"] for u in used)
        ledger = book.cost("pa-pause")
        assert (ledger.calls, ledger.saved_calls, ledger.respent_calls) == (2, 1, 0)
        assert ledger.saved_tokens == used[0]["input_tokens"] + used[0]["output_tokens"]
        assert ledger.tokens == tokens  # the replayed request was not paid twice
        assert out["spent"]["tokens"] == tokens
        assert book.budget("pa-pause")["spent"]["tokens"] == tokens


@daybook.workflow(name="pa_then_wait")
async def pa_then_wait(ctx: daybook.Context) -> str:
    ctx.budget.cap(tokens=30.0, on_cap="fail")  # past it at once, had the calls been charged
    result = await run_agent(ctx, build(), "look x up")
    ctx.wait_for("go")
    return str(result.output)


def test_a_run_recorded_before_model_calls_were_charged_still_replays_uncharged(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ASKED.clear()
    with Daybook(db_url, prices=PRICES) as book:
        book.inline_wait = 0
        # The integration as it was: each model request a plain decision of the same name.
        with monkeypatch.context() as old:
            old.setattr(daybook.Context, "model_call", lambda self, name, call, **kw: self.decide(name, call))
            with pytest.raises(Suspended):
                book.run(pa_then_wait, run_id="pa-old")
        assert len(ASKED) == 2 and usages(book, "pa-old") == []
        book.signal("pa-old", "go")
        assert book.resume("pa-old") == "done"  # replayed under today's code: no NonDeterminism
        assert len(ASKED) == 2  # nothing sampled again
        assert book.budget("pa-old")["spent"] == {}  # neither admitted nor charged, as then


def test_a_langgraph_model_call_is_charged_in_its_own_run(db_url: str) -> None:
    pytest.importorskip("langgraph.prebuilt", reason="needs daybook[langgraph]")
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.graph import START, MessagesState, StateGraph

    from daybook.integrations.langgraph import DurableChatModel

    asked: list[int] = []

    class Reporting(FakeMessagesListChatModel):
        def invoke(self, messages: Any, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            asked.append(len(messages))
            usage = {"input_tokens": 30, "output_tokens": 5, "total_tokens": 35}
            meta = {"model_name": "scripted-lg"}
            return AIMessage(content="hi", usage_metadata=usage, response_metadata=meta)  # type: ignore[arg-type]

    prices = {"scripted-lg": {"input": 1_000_000.0, "output": 2_000_000.0}}
    with Daybook(db_url, prices=prices) as book:
        model = DurableChatModel(inner=Reporting(responses=[AIMessage(content="x")]), book=book)

        def chat(state: MessagesState) -> dict[str, Any]:
            return {"messages": [model.invoke(state["messages"])]}

        graph = StateGraph(MessagesState).add_node("chat", chat).add_edge(START, "chat").compile()
        config: Any = {"configurable": {"thread_id": "lg1"}}
        state = graph.invoke({"messages": [HumanMessage(content="hello")]}, config)
        assert state["messages"][-1].content == "hi"
        assert asked == [1]
        (run,) = book.runs(workflow="langgraph.model_call")
        ledger = book.cost(run.run_id)
        assert (ledger.calls, ledger.input_tokens, ledger.output_tokens) == (1, 30, 5)
        assert ledger.usd == pytest.approx(40.0) and [m.model for m in ledger.models] == ["scripted-lg"]
        assert book.budget(run.run_id)["spent"] == {"usd": pytest.approx(40.0), "tokens": 35.0}


# The OpenAI Agents SDK runs in a child process (tests/agents.py shadows its package here), and so
# does every agent a test kills.
CHILD = Path(__file__).parent / "framework_cost_child.py"


def child(db_url: str, calls: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MODEL_CALLS": str(calls)}
    return subprocess.run(
        [sys.executable, str(CHILD), db_url, *args], env=env, capture_output=True, text=True, timeout=600
    )


def out_of(proc: subprocess.CompletedProcess[str]) -> Any:
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def outs_of(proc: subprocess.CompletedProcess[str]) -> list[Any]:
    """Each run's JSON line, in order, of a child given several runs joined by `--then`."""
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.strip().splitlines()]


def count(calls: Path) -> int:
    return len(calls.read_text().splitlines()) if calls.exists() else 0


OA_CALL = {"usd": 40 * 1.0 + 8 * 2.0, "tokens": 48.0}  # what one scripted OpenAI Agents call reports


@pytest.mark.slow
def test_an_openai_agents_run_is_charged_stopped_at_a_fail_cap_and_replays_free(
    db_url: str, tmp_path: Path
) -> None:
    calls, fail_calls, pause_calls = tmp_path / "calls", tmp_path / "fail", tmp_path / "pause"
    # Three runs in one child (the SDK's import is most of a child's cost), each with its own count.
    done, failed, paused = outs_of(
        child(
            db_url, calls, "oa-charged", "openai_agents", '{"usd": 1000}', "fail",
            "--then", "oa-fail", "openai_agents", '{"tokens": 30}', "fail", "--calls", str(fail_calls),
            "--then", "oa-pause", "openai_agents", '{"tokens": 30}', "pause", "--calls", str(pause_calls),
        )
    )  # fmt: skip
    assert done["output"] == "done" and count(calls) == 2
    assert done["spent"] == {"usd": pytest.approx(2 * OA_CALL["usd"]), "tokens": 2 * OA_CALL["tokens"]}
    with Daybook(db_url) as book:
        ledger = book.cost("oa-charged")
        assert (ledger.calls, ledger.input_tokens, ledger.output_tokens) == (2, 80, 16)
        assert ledger.usd == pytest.approx(2 * OA_CALL["usd"])
        assert [m.model for m in ledger.models] == ["scripted-oa"]  # the model id is recorded
        assert book.budget("oa-charged")["spent"]["usd"] == pytest.approx(2 * OA_CALL["usd"])

    assert failed["error"] == "RunFailed" and "BudgetExceeded" in failed["message"]
    assert count(fail_calls) == 1  # the second call was refused before the model was asked

    calls = pause_calls
    assert paused["error"] == "Suspended" and count(calls) == 1
    with Daybook(db_url) as book:
        book.raise_budget("oa-pause", tokens=1000)
    resumed = out_of(child(db_url, calls, "oa-pause", "openai_agents", "{}", "pause", "--resume"))
    assert resumed["output"] == "done" and count(calls) == 2  # the first call was replayed
    with Daybook(db_url) as book:
        ledger = book.cost("oa-pause")
        assert (ledger.calls, ledger.saved_calls, ledger.saved_tokens) == (2, 1, 48)
        assert ledger.usd == pytest.approx(2 * OA_CALL["usd"])  # not paid twice
        assert book.budget("oa-pause")["spent"]["tokens"] == 2 * OA_CALL["tokens"]


@pytest.mark.slow
@pytest.mark.parametrize("framework", ["pydantic_ai", "openai_agents"])
def test_a_sigkill_inside_a_charged_framework_model_call_leaves_the_budget_a_clean_runs(
    db_url: str, tmp_path: Path, framework: str
) -> None:
    caps = '{"usd": 100000}'
    calls = tmp_path / "calls"
    killed = child(db_url, calls, "killed", framework, caps, "fail", "--die-at-call", "2")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert count(calls) == 2  # the model was asked; its completion was never journaled
    # The resume and the same run never killed share the next process (neither is about it).
    resumed, clean = outs_of(
        child(
            db_url, calls, "killed", framework, caps, "fail", "--resume",
            "--then", "clean", framework, caps, "fail", "--calls", str(tmp_path / "clean"),
        )
    )  # fmt: skip
    assert resumed["output"] == "done" and count(calls) == 3  # call 2 made again (re-sampled)
    # No double charge, no lost charge: the budget holds each recorded call once.
    assert resumed["spent"] == clean["spent"]
    with Daybook(db_url) as book:
        assert book.budget("killed")["spent"] == book.budget("clean")["spent"]
        ledger = book.cost("killed")
        assert (ledger.saved_calls, ledger.respent_calls) == (1, 1)  # call 1 replayed, call 2 cut off
        assert ledger.usd > book.cost("clean").usd  # the call cut off may have been billed
