"""OpenTelemetry spans (daybook-runtime[otel]): one trace per run across a crash and resume,
a span per step with run id, step, key, status and tool, GenAI attributes for model calls;
checked with the SDK's in-memory exporter."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import agents
import pytest
from conftest import wait_until
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from webtools import free_port

import daybook
from daybook import Daybook, ScriptedLLM, Suspended
from daybook.web.otel import Follower, trace_ids, traceparent


@daybook.workflow
def asks(ctx: daybook.Context) -> str:
    return str(ctx.llm(ScriptedLLM(["go"], model="scripted-9"), "should we?").value["text"])


def _exporter() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def test_a_run_is_one_trace_with_a_span_per_step_exported_once_across_a_resume(
    tmp_path: Path, bank: Any
) -> None:
    url = f"sqlite:///{tmp_path / 'otel.db'}"
    provider, exporter = _exporter()
    with Daybook(url, inline_wait=0.1) as book:
        token = book.add_approver("oncall")
        first = Follower(book.store, provider, since=0.0)  # the exporter before the resume
        with pytest.raises(Suspended):
            book.run(agents.restart, bank.url, 3600.0, run_id="sre")
        first.poll_once()
        assert first.poll_once() == 0  # nothing new: nothing exported twice
        time.sleep(0.01)
        second = Follower(book.store, provider)  # the resuming process's: from its start on
        book.approve("sre", "sre/1", approver="oncall", token=token)
        book.resume("sre")
        second.poll_once()
        spans = exporter.get_finished_spans()
    trace_id, root = trace_ids("sre")
    assert {s.context.trace_id for s in spans} == {trace_id}
    assert {s.parent.span_id for s in spans if s.parent} == {root}
    [run] = [s for s in spans if s.parent is None]  # the run's span is the trace's root
    assert run.context.span_id == root and run.name == "daybook.run restart"
    assert traceparent("sre") == f"00-{trace_id:032x}-{root:016x}-01"
    names = [s.name for s in spans]
    assert names.count("daybook.run restart") == 1
    [effect] = [s for s in spans if s.name == "execute_tool pay"]
    assert effect.attributes is not None
    assert effect.attributes["daybook.key"] == "sre/1/pay/0"
    assert effect.attributes["daybook.status"] == "confirmed" and effect.attributes["daybook.tool"] == "pay"
    assert any(n.startswith("daybook.gate") for n in names) and any(
        n.startswith("daybook.wait") for n in names
    )
    steps = [s.attributes["daybook.step"] for s in spans if s.attributes and "daybook.step" in s.attributes]
    assert len(steps) == len(set(steps))  # each step once, though two followers read the run


def test_a_model_call_carries_the_genai_attributes(tmp_path: Path) -> None:
    provider, exporter = _exporter()
    with Daybook(f"sqlite:///{tmp_path / 'llm.db'}") as book:
        follower = Follower(book.store, provider, since=0.0)
        book.run(asks, run_id="ask")
        follower.poll_once()
    [call] = [s for s in exporter.get_finished_spans() if s.name == "chat scripted-9"]
    assert call.attributes is not None
    assert call.attributes["gen_ai.request.model"] == "scripted-9"
    assert call.attributes["gen_ai.operation.name"] == "chat"
    assert call.attributes["gen_ai.usage.input_tokens"] == 2


def test_daybook_web_otel_exports_the_spans_of_runs_as_they_settle_with_the_standard_settings(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'served.db'}"
    Daybook(url).close()
    port = free_port()
    env = {**os.environ, "OTEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "books-under-test"}
    server = subprocess.Popen(
        [sys.executable, "-m", "daybook", "web", "--db", url, "--port", str(port), "--otel"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        wait_until(lambda: _up(port))
        with Daybook(url) as book:
            book.run(asks, run_id="served")
        time.sleep(2.5)  # the follower polls each second
    finally:
        server.send_signal(signal.SIGINT)  # uvicorn stops; the SDK flushes its spans at exit
        out, _ = server.communicate(timeout=300)
    assert '"name": "chat scripted-9"' in out and '"name": "daybook.run asks"' in out
    assert '"service.name": "books-under-test"' in out


def _up(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2):
            return True
    except OSError:
        return False
