"""The OpenAI Agents SDK on daybook (`daybook-runtime[openai-agents]`), through the SDK's own extension
points: a `Model` wrapper and `FunctionTool` wrappers, no monkeypatching.

    @daybook.workflow
    async def refund_agent(ctx, order: str) -> str:
        agent = Agent(name="support", model=DurableModel(my_model),
                      tools=[durable_tool(refund, status=refund_status)])
        result = await run_agent(ctx, agent, f"refund order {order}")
        return str(result.final_output)

Agent run = daybook run. Each model response is a recorded decision (`agents:model`), admitted
against the run's budget and charged the usage it reports (as `ctx.llm`): a resumed run never
samples the model again, so it sees the same tool calls with the same call ids. Each
tool call is an effect keyed `<run id>/<call id>` (intent before it, outcome after): a kill after
the tool acted and before the SDK recorded it leaves the call in flight; the resumed run asks
the tool's `status(key, args)` (or re-sends an `idempotent` tool under the same key, or stops for
`daybook resolve`), and never runs a confirmed call again. Inside a tool, `idempotency_key()` is
the key to hand the counterparty. Outside a daybook run the wrappers do nothing.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from agents import Agent, FunctionTool, Model, ModelResponse, Runner, RunResult, Usage
from agents.items import TResponseOutputItem
from agents.tool_context import ToolContext
from pydantic import TypeAdapter

import daybook
from daybook import ConfigError, Context, NotInRun, ReconcileResult

_OUTPUT = TypeAdapter(list[TResponseOutputItem])
Status = Callable[[str, dict[str, Any]], ReconcileResult]


async def run_agent(
    ctx: Context,
    agent: Agent[Any],
    input: Any,
    *,
    approvers: Sequence[str] | None = None,
    gate_timeout: float = 8 * 3600,
    **kwargs: Any,
) -> RunResult:
    """`Runner.run(agent, input, **kwargs)` as this daybook run: its `DurableModel` calls are
    recorded and its `durable_tool` calls journaled in `ctx`. A tool call the SDK holds for
    approval (`needs_approval`) becomes a daybook gate bound to that call (tool, arguments, call
    id, key): the run waits for `daybook approve|deny`, then the SDK is told the verdict and
    goes on (a denial reaches the model as a rejection; the tool does not run)."""
    if not daybook.in_run() or daybook.current() is not ctx:
        raise ConfigError(
            "run_agent(ctx, ...) is called from the body of the workflow whose ctx it is given (its "
            "model and tool wrappers journal into daybook.current())"
        )
    result = await Runner.run(agent, input, **kwargs)
    while result.interruptions:
        state = result.to_state()
        for item in result.interruptions:
            _decide_approval(ctx, state, item, approvers, gate_timeout)
        result = await Runner.run(agent, state, **kwargs)
    return result


def _decide_approval(
    ctx: Context, state: Any, item: Any, approvers: Sequence[str] | None, timeout: float
) -> None:
    raw = item.raw_item
    call_id = raw.get("call_id") if isinstance(raw, dict) else getattr(raw, "call_id", None)
    arguments = raw.get("arguments") if isinstance(raw, dict) else getattr(raw, "arguments", None)
    verdict = ctx.gate(
        f"agents:{item.tool_name}",
        approvers=approvers,
        timeout=timeout,
        about={
            "tool": item.tool_name,
            "arguments": arguments,
            "call_id": call_id,
            "key": f"{ctx.run_id}/{call_id}",
        },
    )
    if verdict.approved:
        state.approve(item)
    else:
        why = f": {verdict.reason}" if verdict.reason else ""
        state.reject(item, rejection_message=f"not approved ({verdict.outcome}{why}); the tool did not run")


def idempotency_key() -> str | None:
    """Inside a `durable_tool` call: the key naming this call, for the counterparty (None
    elsewhere; `daybook.idempotency_key()` is the same key, and raises there)."""
    try:
        return daybook.idempotency_key()
    except NotInRun:
        return None


class DurableModel(Model):
    """A `Model` whose responses are recorded in the run: replay returns them, never samples."""

    def __init__(self, inner: Model, *, model: str | None = None) -> None:
        self.inner = inner
        # The model id the ledger prices (the SDK's response does not carry it): `model=`, or
        # the wrapped model's own `model` (OpenAIResponsesModel, OpenAIChatCompletionsModel).
        self.model = str(model if model is not None else getattr(inner, "model", "") or "")

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        if not daybook.in_run():
            return await self.inner.get_response(*args, **kwargs)

        async def sample() -> dict[str, Any]:
            return _dump(await self.inner.get_response(*args, **kwargs), self.model)

        # Admitted against the run's caps (the instructions and input, estimated), charged the
        # usage the response reports; the step keeps its name (runs recorded before replay).
        prompt = json.dumps([kwargs.get("system_instructions"), kwargs.get("input"), *args[:2]], default=str)
        made = daybook.current().model_call(
            "agents:model", sample, model=self.model, usage=_usage, prompt=prompt
        )
        decision = await made
        return _load(decision.value)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        if daybook.in_run():
            raise ConfigError(
                "a streamed model call cannot be recorded as one step: use Runner.run (run_agent), "
                "not Runner.run_streamed, inside a daybook run"
            )
        return self.inner.stream_response(*args, **kwargs)


def durable_tool(
    tool: FunctionTool,
    *,
    status: Status | None = None,
    idempotent: bool = False,
    irreversible: bool | None = None,
) -> FunctionTool:
    """`tool`, each call journaled as an effect keyed `<run id>/<call id>` (a new FunctionTool;
    the original is untouched). `status(key, args)` asks the counterparty what happened to a call
    whose outcome is unknown (`args` is `{"input": <the model's JSON arguments>}`)."""
    invoke = tool.on_invoke_tool

    async def journaled(tc: ToolContext[Any], raw: str) -> Any:
        if not daybook.in_run():
            return await invoke(tc, raw)

        async def act(input: str) -> Any:
            out = await invoke(tc, input)
            try:
                json.dumps(out)
            except (TypeError, ValueError):
                return str(out)  # what the SDK would show the model
            return out

        ctx = daybook.current()
        return await daybook.journaled_call(
            ctx,
            f"agents:{tool.name}",
            f"{ctx.run_id}/{tc.tool_call_id}",
            act,
            args={"input": raw},
            status=status,
            idempotent=idempotent,
            irreversible=irreversible,
        )

    return dataclasses.replace(tool, on_invoke_tool=journaled)


def _usage(value: Any) -> dict[str, Any]:
    usage = value.get("usage") or {}
    return {
        "model": value.get("model") or "",
        **{k: usage.get(k) or 0 for k in ("input_tokens", "output_tokens")},
    }


def _dump(response: ModelResponse, model: str) -> dict[str, Any]:
    usage = response.usage
    return {
        "model": model,
        "output": [item.model_dump(mode="json", exclude_none=True) for item in response.output],
        "usage": {
            "requests": usage.requests,
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "total_tokens": usage.total_tokens,
        },
        "response_id": response.response_id,
    }


def _load(value: dict[str, Any]) -> ModelResponse:
    return ModelResponse(
        output=_OUTPUT.validate_python(value["output"]),
        usage=Usage(**value["usage"]),
        response_id=value.get("response_id"),
    )
