"""A framework agent under a budget, as its own process (the framework-cost tests' child):

    framework_cost_child.py DB RUN [--then RUN ...]
    RUN: RUN_ID FRAMEWORK CAPS_JSON ON_CAP [--resume] [--die-at-call N] [--calls PATH]

FRAMEWORK is `openai_agents` or `pydantic_ai`. The scripted model reports its usage (the model
id and tokens the ledger reads) and appends a line to $MODEL_CALLS (or the run's `--calls`) each
time it is asked (the counterparty's own count); `--die-at-call N` SIGKILLs the process inside the
N-th model call, after its reservation was journaled and before its completion was. Prints one
JSON line per run, in order: its result, or the error it stopped with. Runs joined by `--then`
share one interpreter (a test that is not about the process boundary starts one, not several)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

# This directory holds tests/agents.py, which would shadow the OpenAI Agents SDK's `agents`.
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]

import daybook  # noqa: E402

PRICES = {
    "scripted-oa": {"input": 1_000_000.0, "output": 2_000_000.0},  # $1 an input token
    "scripted-pa": {"input": 1_000_000.0, "output": 2_000_000.0},
}


def asked() -> int:
    """Count this model call at the counterparty; die inside call N when told to."""
    path = Path(os.environ["MODEL_CALLS"])
    with path.open("a") as f:
        f.write("call\n")
    n = len(path.read_text().splitlines())
    if os.environ.get("DIE_AT_CALL") == str(n):
        os.kill(os.getpid(), 9)  # the reservation is journaled, the completion is not
    return n


def openai_agent() -> Any:
    from agents import Agent, Model, ModelResponse, Usage, function_tool
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    from daybook.integrations.openai_agents import DurableModel

    @function_tool
    def lookup(q: str) -> str:
        """Look `q` up."""
        return f"found {q}"

    class Reporting(Model):
        async def get_response(
            self, system_instructions: Any, input: Any, *a: Any, **k: Any
        ) -> ModelResponse:
            asked()
            answered = isinstance(input, list) and any(
                isinstance(i, dict) and i.get("type") == "function_call_output" for i in input
            )
            item: Any
            if answered:
                text = ResponseOutputText(type="output_text", text="done", annotations=[])
                item = ResponseOutputMessage(
                    id="m1", type="message", role="assistant", status="completed", content=[text]
                )
            else:
                item = ResponseFunctionToolCall(
                    type="function_call", call_id="c1", name="lookup", arguments='{"q": "x"}', id="f1"
                )
            usage = Usage(requests=1, input_tokens=40, output_tokens=8, total_tokens=48)
            return ModelResponse(output=[item], usage=usage, response_id=None)

        def stream_response(self, *a: Any, **k: Any) -> Any:
            raise NotImplementedError

    return Agent(name="oa", model=DurableModel(Reporting(), model="scripted-oa"), tools=[lookup])


@daybook.workflow(name="oa_capped")
async def oa_capped(ctx: daybook.Context, caps: dict[str, float], on_cap: str) -> dict[str, Any]:
    from agents import RunConfig

    from daybook.integrations.openai_agents import run_agent

    ctx.budget.cap(on_cap=on_cap, **caps)
    result = await run_agent(ctx, openai_agent(), "look x up", run_config=RunConfig(tracing_disabled=True))
    return {"output": str(result.final_output), "spent": dict(ctx.budget.spent)}


@daybook.workflow(name="pa_child_capped")
async def pa_capped(ctx: daybook.Context, caps: dict[str, float], on_cap: str) -> dict[str, Any]:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from daybook.integrations.pydantic_ai import DaybookDurability, run_agent

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        asked()
        if any(getattr(p, "part_kind", "") == "tool-return" for m in messages for p in m.parts):
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=[ToolCallPart("lookup", {"q": "x"}, tool_call_id="c1")])

    def lookup(q: str) -> str:
        return f"found {q}"

    model = FunctionModel(reply, model_name="scripted-pa")
    agent: Agent[None, str] = Agent(model, name="pa", capabilities=[DaybookDurability()])
    agent.tool_plain(lookup)
    ctx.budget.cap(on_cap=on_cap, **caps)
    result = await run_agent(ctx, agent, "look x up")
    return {"output": str(result.output), "spent": dict(ctx.budget.spent)}


def _option(argv: list[str], name: str) -> str | None:
    if name not in argv:
        return None
    i = argv.index(name)
    value = argv[i + 1]
    del argv[i : i + 2]
    return value


def run_one(argv: list[str]) -> Any:
    resume = "--resume" in argv
    if resume:
        argv.remove("--resume")
    if (die := _option(argv, "--die-at-call")) is not None:
        os.environ["DIE_AT_CALL"] = die
    else:
        os.environ.pop("DIE_AT_CALL", None)
    if (calls := _option(argv, "--calls")) is not None:
        os.environ["MODEL_CALLS"] = calls
    db, run_id, framework, caps, on_cap = argv
    flow = oa_capped if framework == "openai_agents" else pa_capped
    with daybook.Daybook(db, prices=PRICES, inline_wait=0) as book:
        try:
            if resume:
                return book.resume(run_id)
            return book.run(flow, json.loads(caps), on_cap, run_id=run_id)
        except daybook.DaybookError as exc:
            return {"error": type(exc).__name__, "message": str(exc)}


def main() -> None:
    db, *rest = sys.argv[1:]
    runs: list[list[str]] = [[]]
    for arg in rest:
        if arg == "--then":
            runs.append([])
        else:
            runs[-1].append(arg)
    for run in runs:
        print(json.dumps(run_one([db, *run])), flush=True)


if __name__ == "__main__":
    asyncio.set_event_loop_policy(None)
    main()
