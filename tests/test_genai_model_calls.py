"""Every recorded model call is a GenAI `chat MODEL` span, not only `ctx.llm`'s: a model call
another SDK makes (`ctx.model_call`, and through it the framework integrations' model steps) is
known by what its rows record (its reservation, the usage its SDK reported), whatever its step is
named, and carries the model, the tokens and the cost the journal recorded for it. Both stores;
spans collected at the OpenTelemetry SDK's in-memory exporter."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import daybook
from daybook import Context, Daybook, Kind, StepFailed
from daybook.records import Event, RunInfo
from daybook.telemetry.genai import plan, span_id

PRICES = {"gpt-4o": {"input": 2.5, "output": 10.0}}  # USD per million tokens
ASKED: list[str] = []  # what the fake SDK was asked, in order


def _exporter() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def _attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def sdk_chat(question: str) -> dict[str, Any]:
    """A stand-in for another SDK's chat call: its own reply shape, usage under its own keys."""
    ASKED.append(question)
    return {"answer": f"re: {question}", "model_id": "gpt-4o-2024-08-06", "u": {"in": 1200, "out": 300}}


def sdk_usage(value: Any) -> dict[str, Any]:
    return {"model": value["model_id"], "input_tokens": value["u"]["in"], "output_tokens": value["u"]["out"]}


@daybook.workflow(name="sdk_agent")
def sdk_agent(ctx: Context, question: str) -> str:
    reply = ctx.model_call("my-sdk:model", lambda: sdk_chat(question), model="gpt-4o", usage=sdk_usage)
    return str(reply.value["answer"])


@daybook.workflow(name="sdk_agent_async")
async def sdk_agent_async(ctx: Context, question: str) -> str:
    async def call() -> dict[str, Any]:
        return sdk_chat(question)

    reply = await ctx.model_call("my-sdk:model", call, model="gpt-4o", usage=sdk_usage)
    return str(reply.value["answer"])


def _broken() -> dict[str, Any]:
    raise RuntimeError("the SDK's server answered 503")


@daybook.workflow(name="sdk_broken")
def sdk_broken(ctx: Context) -> str:
    try:
        ctx.model_call("my-sdk:model", _broken, model="gpt-4o", usage=sdk_usage)
    except StepFailed:
        return "gave up"
    return "answered"


@pytest.mark.parametrize("workflow", [sdk_agent, sdk_agent_async], ids=["sync", "async"])
def test_a_model_call_another_sdk_makes_is_a_chat_span_with_its_reported_usage_and_cost(
    db_url: str, workflow: Any
) -> None:
    ASKED.clear()
    provider, exporter = _exporter()
    with Daybook(db_url, otel=provider, prices=PRICES) as book:
        assert book.run(workflow, "refund?", run_id="sdk-1") == "re: refund?"
        usd = book.cost("sdk-1").usd
        spans = {s.name: s for s in exporter.get_finished_spans()}
        rows = [e for e in book.store.load("sdk-1") if e.step == 1]
    assert ASKED == ["refund?"]
    assert [r.status for r in rows] == ["reserved", "recorded"]  # the step the span is made of
    assert sorted(spans) == ["chat gpt-4o-2024-08-06", f"daybook.run {workflow.name}"]
    span = spans["chat gpt-4o-2024-08-06"]
    chat = _attrs(span)
    assert span.kind.name == "CLIENT" and span.context.span_id == span_id("sdk-1", "step/1")
    assert chat["gen_ai.operation.name"] == "chat" and chat["gen_ai.provider.name"] == "openai"
    assert chat["gen_ai.request.model"] == chat["gen_ai.response.model"] == "gpt-4o-2024-08-06"
    assert chat["gen_ai.usage.input_tokens"] == 1200 and chat["gen_ai.usage.output_tokens"] == 300
    # What the ledger charged for it: 1200 * 2.5 + 300 * 10 per million tokens.
    assert usd == pytest.approx(0.006) and chat["daybook.cost.usd"] == pytest.approx(usd)
    assert chat["daybook.step"] == 1 and chat["daybook.status"] == "recorded"
    # Its span runs from the reservation (before the SDK was asked) to the recorded row.
    assert (span.start_time, span.end_time) == (int(rows[0].at * 1e9), int(rows[1].at * 1e9))


def test_a_replayed_model_call_is_not_exported_again(db_url: str) -> None:
    provider, exporter = _exporter()
    with Daybook(db_url, otel=provider, prices=PRICES) as book:
        book.run(sdk_agent, "again?", run_id="sdk-again")
        book.resume("sdk-again")
    with Daybook(db_url, otel=provider, prices=PRICES) as other:
        other.resume("sdk-again")
    names = sorted(s.name for s in exporter.get_finished_spans())
    assert names == ["chat gpt-4o-2024-08-06", "daybook.run sdk_agent"]


def test_a_model_call_that_failed_is_a_chat_span_with_its_error(db_url: str) -> None:
    provider, exporter = _exporter()
    with Daybook(db_url, otel=provider, prices=PRICES) as book:
        assert book.run(sdk_broken, run_id="sdk-broken") == "gave up"
        spans = {s.name: s for s in exporter.get_finished_spans()}
    assert sorted(spans) == ["chat", "daybook.run sdk_broken"]
    chat = spans["chat"]
    assert chat.kind.name == "CLIENT" and chat.status.status_code.name == "ERROR"
    assert _attrs(chat)["gen_ai.operation.name"] == "chat"
    assert _attrs(chat)["error.type"] == "RuntimeError" and _attrs(chat)["daybook.status"] == "failed"


def test_a_framework_call_cut_off_after_its_reservation_is_one_span_from_the_retry_that_recorded_it() -> None:
    info = RunInfo("cut", "pa", "app:pa", "running", {}, None, None, 1.0, 5.0, None, None, 1)
    name = "pydantic_ai:pa__model.request"  # any name: the rows say it is a model call
    rows = [
        Event("cut", 1, Kind.RUN_STARTED, at=1.0),
        Event("cut", 2, Kind.DECISION, 1, name, status="reserved", data={"attempt": 1}, at=2.0),
        Event("cut", 3, Kind.DECISION, 1, name, status="reserved", data={"attempt": 2}, at=3.0),
    ]
    assert plan(info, rows, 0) == []  # reserved, the SDK not answered yet: nothing settled
    usage = {"model": "claude-sonnet-4", "input_tokens": 40, "output_tokens": 9}
    recorded = {"value": {"parts": []}, "usage": usage, "cost": {"usd": 0.0003}, "attempt": 2}
    rows.append(Event("cut", 4, Kind.DECISION, 1, name, status="recorded", data=recorded, at=5.0))
    [span] = plan(info, rows, 0)
    assert span.name == "chat claude-sonnet-4" and span.client and (span.start, span.end) == (2.0, 5.0)
    assert span.attributes["gen_ai.provider.name"] == "anthropic"
    assert span.attributes["gen_ai.usage.output_tokens"] == 9
    assert span.attributes["daybook.cost.usd"] == 0.0003 and span.attributes["daybook.attempts"] == 2
    # With content capture on, a framework's value (its SDK's shape) is not passed off as messages.
    [captured] = plan(info, rows, 0, content=True)
    assert "gen_ai.output.messages" not in captured.attributes


def test_a_decision_that_is_not_a_model_call_keeps_its_decision_span() -> None:
    info = RunInfo("plain", "w", "app:w", "running", {}, None, None, 1.0, 2.0, None, None, 1)
    rows = [
        Event("plain", 1, Kind.RUN_STARTED, at=1.0),
        Event("plain", 2, Kind.DECISION, 1, "pick", status="recorded", data={"value": {"model": "x"}}),
    ]
    [span] = plan(info, rows, 0)
    assert span.name == "daybook.decision pick" and not span.client
    assert "gen_ai.operation.name" not in span.attributes


def test_a_pydantic_ai_agents_model_requests_are_chat_spans_with_their_usage(db_url: str) -> None:
    pytest.importorskip("pydantic_ai.durable_exec", reason="needs daybook[pydantic-ai]")
    import test_framework_cost as pa

    provider, exporter = _exporter()
    with Daybook(db_url, otel=provider, prices=pa.PRICES) as book:
        out = book.run(pa.pa_capped, {"usd": 1000.0}, "fail", run_id="pa-otel")
        used = pa.usages(book, "pa-otel")
        spans = exporter.get_finished_spans()
    assert out["output"] == "done" and len(used) == 2
    chats = [s for s in spans if s.name.startswith("chat")]
    assert [s.name for s in chats] == ["chat scripted-pa", "chat scripted-pa"]
    assert [_attrs(s)["gen_ai.usage.input_tokens"] for s in chats] == [u["input_tokens"] for u in used]
    assert [_attrs(s)["gen_ai.usage.output_tokens"] for s in chats] == [u["output_tokens"] for u in used]
    assert sum(_attrs(s)["daybook.cost.usd"] for s in chats) == pytest.approx(out["spent"]["usd"])
    assert not any("model.request" in s.name for s in spans)  # no `daybook.decision ...` for them
