"""Pydantic AI on daybook (`daybook-runtime[pydantic-ai]`): a durability capability in the shape
of Pydantic AI's own (`TemporalDurability`, `DBOSDurability`), built on its public
`pydantic_ai.durable_exec` surface, no monkeypatching.

    agent = Agent(model, name="support", tools=[refund], capabilities=[DaybookDurability()])

    @daybook.workflow
    async def support(ctx, prompt: str) -> str:
        result = await run_agent(ctx, agent, prompt)
        return str(result.output)

Agent run = daybook run. Inside `run_agent`, every durable unit the agent's run asks for goes
through the journal: a model request (admitted against the run's budget and charged the usage
it reports, as `ctx.llm`), tool discovery or argument validation is a recorded
decision (replay reads it back, never samples again), and a tool call is an effect (intent
before it, outcome after): a kill after the tool acted leaves it in flight, and the resumed run
resolves it (the tool's `status`, a re-send under the same key for an `idempotent` tool, else
`daybook resolve`) instead of running it again. Tools run one at a time inside a run, so replay
sees them in the recorded order. Payloads cross as JSON (the journal holds no pickles). A tool
that needs approval (`requires_approval=True`, a deferred tool) becomes a daybook gate bound to
that call (tool, arguments, call id), consumed once: `daybook approve|deny` decides it. Outside a
daybook run the capability does nothing.
"""

from __future__ import annotations

import datetime
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
from pydantic_ai.durable_exec import (
    JSON_CODEC,
    BaseDurabilityCapability,
    DurabilityEngineSpec,
    DurableOperationBackend,
    DurableOperationId,
    JournalCallableOperationBackend,
    ModelRequestId,
    RoleBasedOperationConfig,
    ToolsetCallToolId,
    conversation_id_from_run_id,
)
from pydantic_ai.tools import ToolDenied

import daybook
from daybook import ConfigError, Context, NotInRun, ReconcileResult

Status = Callable[[str, dict[str, Any]], ReconcileResult]


def idempotency_key() -> str | None:
    """Inside a tool call the capability journals: the key naming this call, for the counterparty
    (None elsewhere; `daybook.idempotency_key()` is the same key, and raises there)."""
    try:
        return daybook.idempotency_key()
    except NotInRun:
        return None


@dataclass(frozen=True)
class ToolProfile:
    """How daybook treats one tool's calls: `status(key, args)` asks the counterparty about an
    unknown outcome; `idempotent` allows a re-send under the same key; `irreversible` (the
    default for a tool with neither) leaves an unknown for a person."""

    status: Status | None = None
    idempotent: bool = False
    irreversible: bool | None = None


class _Backend(JournalCallableOperationBackend[Any]):
    def __init__(self, agent_name: str, profiles: dict[str, ToolProfile]) -> None:
        none: dict[str, Any] = {}
        config = RoleBasedOperationConfig[Any](model=none, event=none, capability=none, tool=none)
        super().__init__(agent_name=agent_name, config=config)
        self._profiles = profiles

    async def execute(
        self,
        *,
        operation_id: DurableOperationId,
        name: str,
        body: Callable[[], Awaitable[object]],
        cache_key: tuple[object, ...],
        config: Any,
    ) -> object:
        if not daybook.in_run():
            return await body()
        ctx = daybook.current()

        async def unit(input: str = name) -> object:
            return await body()

        if isinstance(operation_id, ToolsetCallToolId):
            tool_name = name.rsplit("call_tool:", 1)[-1]  # "<agent>__<toolset>.call_tool:<tool>"
            profile = self._profiles.get(tool_name, ToolProfile())
            return await daybook.journaled_call(
                ctx,
                f"pydantic_ai:{tool_name}",
                None,  # the step's key, `<run id>/<step>`: tools run one at a time, in order
                unit,
                args={"input": name},
                status=profile.status,
                idempotent=profile.idempotent,
                irreversible=profile.irreversible,
            )
        if isinstance(operation_id, ModelRequestId):
            # Admitted against the run's caps and charged the usage the response reports; the
            # step keeps its name, so runs recorded before model calls were charged still replay.
            # The backend does not see the messages: the reservation is the minimum (1 token).
            made = ctx.model_call(
                f"pydantic_ai:{name}",
                unit,
                model=operation_id.model_name,
                usage=_usage,
            )
            return (await made).value
        decision = await ctx.decide(f"pydantic_ai:{name}", unit)
        return decision.value


def _usage(value: Any) -> dict[str, Any]:
    """The model id and tokens of a recorded `ModelResponse` (as the JSON codec dumps it)."""
    response: dict[str, Any] = value if isinstance(value, dict) else {}
    usage: dict[str, Any] = response.get("usage") or {}
    return {
        "model": response.get("model_name") or "",
        "input_tokens": usage.get("input_tokens") or 0,
        "output_tokens": usage.get("output_tokens") or 0,
    }


@dataclass(init=False, kw_only=True)
class DaybookDurability(BaseDurabilityCapability[Any]):
    """Makes an agent durable on daybook: its model requests and tool calls are journal steps
    of the daybook run that calls `run_agent`. `tools` sets a `ToolProfile` per tool name."""

    engine_spec = DurabilityEngineSpec(
        engine_name="daybook",
        durable_unit_noun="step",
        durable_unit_plural="steps",
        durable_container_noun="run",
        codec=JSON_CODEC,  # the journal holds JSON only
        unsupported_runtime_toolset_kinds=frozenset({"function", "mcp", "dynamic"}),
        wrapped_toolset_kinds=frozenset({"function", "mcp", "dynamic"}),
        toolset_lifecycles={
            "function": "enter-always",
            "mcp": "enter-in-durable-unit",
            "dynamic": "enter-never",
        },
        tool_call_result_upgrade_lenient=False,
        journal_discovery=True,
        # Replay is by position: tools run one at a time so their steps keep the recorded order.
        sequential_tools_in_durable_context=True,
        tool_config_key=None,
    )

    def __init__(self, *, tools: dict[str, ToolProfile] | None = None, name: str | None = None) -> None:
        super().__init__(name=name)
        self._profiles = dict(tools or {})
        self._runs = 0

    @property
    def in_durable_context(self) -> bool:
        return daybook.in_run()

    def get_default_run_id(self) -> str | None:
        if not daybook.in_run():
            return None
        ctx = daybook.current()
        self._runs += 1
        return f"{ctx.run_id}:{self._runs}"

    def get_default_conversation_id(self, run_id: str) -> str | None:
        return conversation_id_from_run_id(run_id) if self.in_durable_context else None

    async def get_run_start_time(self, run_id: str) -> datetime.datetime | None:
        if not daybook.in_run():
            return None
        ctx = daybook.current()
        # Recorded, so a resumed run counts the agent's `timeout=` from when it first started.
        at = ctx.decide("pydantic_ai:start", lambda: datetime.datetime.now(datetime.UTC).isoformat())
        return datetime.datetime.fromisoformat(str(at.value))

    def get_durable_operation_backend(self) -> DurableOperationBackend[Any]:
        return _Backend(self.name or "agent", self._profiles)


async def run_agent(
    ctx: Context,
    agent: Agent[Any, Any],
    prompt: str,
    *,
    approvers: Sequence[str] | None = None,
    gate_timeout: float = 8 * 3600,
    **kwargs: Any,
) -> Any:
    """`agent.run(prompt, **kwargs)` as this daybook run (the agent carries a
    `DaybookDurability`). A deferred tool call that needs approval becomes a daybook gate bound
    to the call; the run waits for `daybook approve|deny`, then the agent goes on with the
    verdict (a denial reaches the model; the tool does not run)."""
    if not daybook.in_run() or daybook.current() is not ctx:
        raise ConfigError(
            "run_agent(ctx, ...) is called from the body of the workflow whose ctx it is given (the "
            "capability journals into daybook.current())"
        )
    result = await agent.run(prompt, **kwargs)
    while isinstance(result.output, DeferredToolRequests):
        verdicts = DeferredToolResults()
        for call in result.output.approvals:
            verdict = ctx.gate(
                f"pydantic_ai:{call.tool_name}",
                approvers=approvers,
                timeout=gate_timeout,
                about={"tool": call.tool_name, "args": call.args, "call_id": call.tool_call_id},
            )
            why = verdict.reason or verdict.outcome
            verdicts.approvals[call.tool_call_id] = True if verdict.approved else ToolDenied(str(why))
        result = await agent.run(
            message_history=result.all_messages(), deferred_tool_results=verdicts, **kwargs
        )
    return result
