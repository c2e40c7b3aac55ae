"""LangGraph on daybook (`daybook-runtime[langgraph]`), through LangGraph's own extension points:
a `ToolNode(wrap_tool_call=...)` interceptor and a chat-model wrapper, no monkeypatching.

    book = daybook.Daybook("sqlite:///agent.db")
    tools = ToolNode([refund], wrap_tool_call=journaled_tool_calls(book, status=refund_status))
    agent = create_react_agent(DurableChatModel(inner=model, book=book), tools, checkpointer=saver)
    agent.invoke({"messages": [...]}, {"configurable": {"thread_id": "t1"}})

LangGraph checkpoints a thread after each super-step: a process killed after a tool acted and
before that checkpoint re-runs the tool node on resume, and the tool acts twice (LangGraph #7417,
#8039). Here every tool call is a daybook run of its own, keyed `<thread_id>/<tool_call_id>`: an
intent before the tool runs, its outcome after. A resumed graph that calls the tool again gets
the recorded result (a completed call) or has the unknown resolved (the tool's `status(key,
args)`, a re-send under the same key for an `idempotent` tool, else the call waits for `daybook
resolve`): a confirmed call never runs again. Each model call is recorded the same way, keyed by
the thread and a digest of the messages it was given, so a resumed graph gets the same reply, the
same tool call ids, and so the same keys, instead of sampling again. `daybook show
<thread_id>/<tool_call_id>` shows a call like any other run. Outside `invoke` with a
`thread_id`, the wrappers do nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage, message_to_dict, messages_from_dict
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.config import get_config
from langgraph.prebuilt.tool_node import ToolCallRequest

import daybook
from daybook import (
    BudgetExceeded,
    ConfigError,
    Context,
    Daybook,
    NotInRun,
    ReconcileResult,
    RunFailed,
    Suspended,
)

Status = Callable[[str, dict[str, Any]], ReconcileResult]
Execute = Callable[[ToolCallRequest], Any]


@dataclass(frozen=True)
class _Live:
    """The call a run started here stands for (the graph's own, not JSON) and its profile."""

    run_id: str
    call: Callable[[], Any]
    status: Status | None = None
    idempotent: bool = False
    irreversible: bool | None = None
    model: str = ""  # a model call's model id and prompt text: its reservation (`ctx.model_call`)
    prompt: str = ""


# Handed from the graph's wrapper to the run it starts, in the same thread (`book.run`).
_LIVE: ContextVar[_Live | None] = ContextVar("daybook_langgraph_live", default=None)


def idempotency_key() -> str | None:
    """Inside a journaled tool call: the key naming this call (`<thread_id>/<tool_call_id>`),
    for the counterparty (None elsewhere; `daybook.idempotency_key()` raises there)."""
    try:
        return daybook.idempotency_key()
    except NotInRun:
        return None


@daybook.workflow(name="langgraph.tool_call")
def tool_call(ctx: Context, thread: str, name: str, args: Any) -> Any:
    """One LangGraph tool call as a daybook run: an effect keyed by the run id."""
    live = _live(ctx.run_id)
    return daybook.journaled_call(
        ctx,
        f"langgraph:{name}",
        ctx.run_id,
        lambda input: live.call(),
        args={"input": args},
        status=live.status,
        idempotent=live.idempotent,
        irreversible=live.irreversible,
    )


@daybook.workflow(name="langgraph.model_call")
def model_call(ctx: Context, thread: str, digest: str) -> Any:
    """One model call as a daybook run: a recorded decision (replayed without the live call),
    admitted against the run's caps and charged the usage the message reports (as `ctx.llm`)."""
    live = _LIVE.get()
    here = live if live is not None and live.run_id == ctx.run_id else _Live(ctx.run_id, lambda: None)
    call = lambda: _live(ctx.run_id).call()  # noqa: E731  (the live call: never on replay)
    # Only its graph continues this run (it holds the live call): at a cap it stops, waiting for
    # no signal, and the run driving the graph suspends with it (`DurableChatModel._recorded`).
    ctx.budget.continued_by_parent()
    return ctx.model_call("langgraph:model", call, model=here.model, usage=_usage, prompt=here.prompt).value


def _usage(value: Any) -> dict[str, Any]:
    """The model id and tokens a recorded LangChain message reports (`usage_metadata`,
    `response_metadata`)."""
    data: dict[str, Any] = (value.get("data") if isinstance(value, dict) else None) or {}
    usage = data.get("usage_metadata") or {}
    meta = data.get("response_metadata") or {}
    return {
        "model": meta.get("model_name") or meta.get("model") or "",
        "input_tokens": usage.get("input_tokens") or 0,
        "output_tokens": usage.get("output_tokens") or 0,
    }


def _live(run_id: str) -> _Live:
    live = _LIVE.get()
    if live is None or live.run_id != run_id:
        raise ConfigError(
            f"the call of run {run_id!r} is not known to this process: resume the LangGraph thread "
            "with the same graph (its invoke calls this run again), not `daybook resume`"
        )
    return live


@contextmanager
def _handing(live: _Live) -> Iterator[None]:
    token = _LIVE.set(live)
    try:
        yield
    finally:
        _LIVE.reset(token)


def journaled_tool_calls(
    book: Daybook,
    *,
    status: Status | None = None,
    idempotent: bool = False,
    irreversible: bool | None = None,
) -> Callable[[ToolCallRequest, Execute], Any]:
    """A `ToolNode(wrap_tool_call=...)` interceptor: each tool call runs as a daybook effect
    keyed `<thread_id>/<tool_call_id>`. `status(key, {"input": args})` asks the counterparty
    what happened to a call whose outcome is unknown; `idempotent=True` lets it be re-sent
    under the same key instead; with neither, an unknown waits for `daybook resolve`."""

    def wrap(request: ToolCallRequest, execute: Execute) -> Any:
        thread = _thread(request.runtime.config)
        if thread is None:
            return execute(request)
        call = request.tool_call
        name = str(call["name"])
        key = f"{thread}/{call['id']}"
        live = _Live(key, lambda: _tool_message(execute(request)), status, idempotent, irreversible)
        with _handing(live):
            recorded = book.run(tool_call, thread, name, call["args"], run_id=key)
        if isinstance(recorded, dict) and {"type", "data"} <= set(recorded):
            return messages_from_dict([recorded])[0]
        # Confirmed by the counterparty (`status`), not recorded from the tool: its answer.
        text = recorded if isinstance(recorded, str) else json.dumps(recorded)
        return ToolMessage(content=text, name=name, tool_call_id=str(call["id"]))

    return wrap


def journaled(
    book: Daybook,
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    status: Status | None = None,
    idempotent: bool = False,
    irreversible: bool | None = None,
) -> Callable[..., Any]:
    """For LangGraph's functional API: `fn(**kwargs)` as a daybook effect keyed
    `<thread_id>/<name>/<digest of kwargs>`, so a `@task` that LangGraph re-runs after a crash
    (its result was not checkpointed) gets the recorded result instead of acting again. Call it
    with keyword arguments that are JSON; outside a thread it just calls `fn`."""
    label = str(name or getattr(fn, "__name__", None) or "call")

    def call(**kwargs: Any) -> Any:
        thread = _thread(_config())
        if thread is None:
            return fn(**kwargs)
        blob = json.dumps(kwargs, sort_keys=True, default=str).encode()
        key = f"{thread}/{label}/{hashlib.sha256(blob).hexdigest()[:16]}"
        with _handing(_Live(key, lambda: fn(**kwargs), status, idempotent, irreversible)):
            return book.run(tool_call, thread, label, kwargs, run_id=key)

    return call


def _tool_message(out: Any) -> Any:
    if isinstance(out, ToolMessage):
        return message_to_dict(out)
    raise ConfigError(
        f"a journaled LangGraph tool call returned {type(out).__name__}; only ToolMessage results "
        "(not Command) can be recorded"
    )


def _thread(config: Any) -> str | None:
    configurable = (config or {}).get("configurable") or {}
    thread = configurable.get("thread_id")
    return None if thread is None else str(thread)


class DurableChatModel(BaseChatModel):
    """A chat model whose replies are recorded per thread: a resumed graph gets the same reply
    (the same tool call ids) for the same messages, never a new sample."""

    inner: Any
    book: Any

    @property
    def _llm_type(self) -> str:
        return "daybook-durable"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> DurableChatModel:
        try:
            bound = self.inner.bind_tools(tools, **kwargs)
        except NotImplementedError:
            bound = self.inner  # a scripted model needs no schemas
        return DurableChatModel(inner=bound, book=self.book)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        thread = _thread(_config())
        if thread is None:
            reply = self.inner.invoke(messages, stop=stop, **kwargs)
        else:
            reply = self._recorded(thread, messages, stop, kwargs)
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def _recorded(self, thread: str, messages: list[BaseMessage], stop: Any, kwargs: dict[str, Any]) -> Any:
        dumped = [message_to_dict(m) for m in messages]
        digest = hashlib.sha256(json.dumps(dumped, sort_keys=True, default=str).encode()).hexdigest()[:16]
        key = f"{thread}/model/{len(messages)}-{digest}"
        call = lambda: message_to_dict(self.inner.invoke(messages, stop=stop, **kwargs))  # noqa: E731
        model = getattr(self.inner, "model_name", None) or getattr(self.inner, "model", None) or ""
        text = json.dumps([m.get("data", {}).get("content") for m in dumped], default=str)
        live = _Live(key, call, model=str(model), prompt=text)
        driving = self._driving()
        with _handing(live):
            if driving is None:
                recorded = self.book.run(model_call, thread, digest, run_id=key)
            else:
                # Inside a run (a workflow invoked the graph): the call's run is created below
                # it, so that run's caps hold across the graph, with no step of the driving run
                # (a graph resumed from its checkpoint makes fewer calls). At a cap the call's
                # run stops and the driving run suspends with it (`Budget.wait_below`): a raise
                # sent to the driving run wakes it, and its graph makes the call again.
                try:
                    recorded = self.book.run_below(driving.run_id, model_call, thread, digest, run_id=key)
                except Suspended:
                    driving.budget.wait_below(key)
                    raise
                except RunFailed as exc:
                    said = exc.error if isinstance(exc.error, dict) else {}
                    if said.get("type") != "BudgetExceeded":
                        raise
                    # The cap said fail: the driving run fails at it, as a spend of its own would.
                    raise BudgetExceeded(str(said.get("message") or exc)) from None
        reply = messages_from_dict([recorded])[0]
        return reply if isinstance(reply, AIMessage) else AIMessage(content=reply.content)

    def _driving(self) -> Context | None:
        """The run whose workflow invoked the graph, when it is a run of this model's book."""
        if not daybook.in_run():
            return None
        ctx = daybook.current()
        return ctx if self.book.store.get_run(ctx.run_id) is not None else None


def _config() -> Any:
    try:
        return get_config()
    except RuntimeError:
        return None  # called outside a graph
