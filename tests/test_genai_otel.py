"""OpenTelemetry spans exported by the handle that runs the workflow (`Daybook(otel=...)`), with
the GenAI semantic conventions on model calls and tools, each step exported once overall: across
a SIGKILL and a resume in another process, across a web follower and a worker exporting the same
run, and (the crash window between a batch's export and its cursor) again only under the same
span ids. Both stores; spans collected at the exporter (the SDK's in-memory one, or a JSON-lines
file per process)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import otel_app
import pytest
from conftest import killed, wait_until, worker_command
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from store_bytes import store_text
from webtools import free_port

import daybook
from daybook import ConfigError, Context, Daybook, DaybookError, ScriptedLLM, Secret
from daybook.telemetry.cursor import Cursor
from daybook.telemetry.genai import span_id, trace_ids
from daybook.telemetry.otel import Follower
from daybook.worker import Worker

HERE = Path(__file__).parent
CARD = "4111-1111-1111-1111-otel"


def _exporter() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


@daybook.tool(idempotent=True)
def charge(card: Any, amount: int, *, idempotency_key: str) -> dict[str, Any]:
    return {"ref": f"ch-{amount}", "amount": amount}


@daybook.workflow
def shop(ctx: Context, card: Any) -> str:
    llm = ScriptedLLM(lambda prompt: f"buy 3 for {prompt}", model="gpt-4o-mini")
    plan = ctx.llm(llm, "what to buy").value["text"]
    ctx.effect(charge, card=card, amount=3)
    return str(plan)


@daybook.workflow
def shop_with_card(ctx: Context) -> str:
    """The card from the environment (a resume reads it again), handed to the tool as a secret."""
    return str(shop.fn(ctx, Secret(os.environ["OTEL_TEST_CARD"])))


def _attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def test_book_run_with_otel_exports_its_model_calls_and_tools_with_the_genai_attributes(db_url: str) -> None:
    provider, exporter = _exporter()
    with Daybook(db_url, otel=provider) as book:
        assert book.run(shop, "card-1", run_id="shop-1") == "buy 3 for what to buy"
        spans = {s.name: s for s in exporter.get_finished_spans()}  # exported before run returns
    assert sorted(spans) == ["chat gpt-4o-mini", "daybook.run shop", "execute_tool charge"]
    chat = _attrs(spans["chat gpt-4o-mini"])
    assert spans["chat gpt-4o-mini"].kind.name == "CLIENT"
    assert chat["gen_ai.operation.name"] == "chat" and chat["gen_ai.provider.name"] == "openai"
    assert chat["gen_ai.request.model"] == chat["gen_ai.response.model"] == "gpt-4o-mini"
    assert chat["gen_ai.usage.input_tokens"] == 3 and chat["gen_ai.usage.output_tokens"] == 6
    assert "gen_ai.output.messages" not in chat  # content is opt-in
    tool = _attrs(spans["execute_tool charge"])
    assert tool["gen_ai.operation.name"] == "execute_tool" and tool["gen_ai.tool.name"] == "charge"
    assert tool["gen_ai.tool.call.id"] == tool["daybook.key"] == "shop-1/2"
    assert tool["daybook.status"] == "confirmed" and tool["daybook.attempts"] == 1
    assert "gen_ai.tool.call.arguments" not in tool
    trace_id, root = trace_ids("shop-1")
    run = spans["daybook.run shop"]
    assert run.context.span_id == root and run.parent is None
    assert {s.context.trace_id for s in spans.values()} == {trace_id}
    assert spans["execute_tool charge"].context.span_id == span_id("shop-1", "step/2")


def test_a_replayed_run_exports_nothing_again_in_this_or_a_new_handle(db_url: str) -> None:
    provider, exporter = _exporter()
    with Daybook(db_url, otel=provider) as book:
        book.run(shop, "card-1", run_id="again")
        first = len(exporter.get_finished_spans())
        book.run(shop, "card-1", run_id="again")  # attaches: the journal answers, nothing new
        book.resume("again")
    with Daybook(db_url, otel=provider) as other:
        other.resume("again")
    assert first == 3 and len(exporter.get_finished_spans()) == 3


def test_a_secret_never_reaches_a_span_even_with_content_capture(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    monkeypatch.setenv("OTEL_TEST_CARD", CARD)
    provider, exporter = _exporter()
    with Daybook(db_url, otel=provider) as book:
        book.run(shop_with_card, run_id="secret")
        spans = exporter.get_finished_spans()
    texts = [json.dumps(_attrs(s), default=str) for s in spans]
    tool = next(_attrs(s) for s in spans if s.name == "execute_tool charge")
    assert "hmac-sha256:" in str(tool["gen_ai.tool.call.arguments"])  # the digest, not the card
    assert '"amount":3' in str(tool["gen_ai.tool.call.result"])
    chat = next(_attrs(s) for s in spans if s.name.startswith("chat "))
    assert "buy 3 for what to buy" in str(chat["gen_ai.output.messages"])
    assert not any(CARD in text for text in texts)
    assert CARD not in store_text(db_url)  # nor in the store the cursor rows went to


def test_otel_asked_for_wrongly_or_without_the_extra_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"otel=.*must be True, False, None or an OpenTelemetry tracer"):
        Daybook(f"sqlite:///{tmp_path / 'bad.db'}", otel="yes")
    assert issubclass(ConfigError, DaybookError)
    script = (
        "import sys; sys.modules['opentelemetry'] = None\n"  # as if the extra were not installed
        "import daybook\n"
        "try:\n"
        f"    daybook.Daybook({str(tmp_path / 'no.db')!r}, otel=True)\n"
        "except daybook.ConfigError as exc:\n"
        "    print('refused:', exc)\n"
        f"daybook.Daybook({str(tmp_path / 'no.db')!r}).close()\n"
        "print('plain handle fine')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert "refused:" in done.stdout and "pip install 'daybook-runtime[otel]'" in done.stdout, done.stderr
    assert "plain handle fine" in done.stdout


def test_daybook_otel_env_turns_a_handles_export_on(tmp_path: Path) -> None:
    env = {**os.environ, "DAYBOOK_OTEL": "1", "OTEL_TRACES_EXPORTER": "console", "PYTHONPATH": _pythonpath()}
    script = (
        f"import sys; sys.path.insert(0, {str(HERE)!r})\n"
        "import daybook, test_genai_otel as t\n"
        f"with daybook.Daybook({str(tmp_path / 'env.db')!r}) as book:\n"
        "    book.run(t.shop, 'c', run_id='env')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count('"name": "chat gpt-4o-mini"') == 1
    assert done.stdout.count('"name": "execute_tool charge"') == 1


def _pythonpath() -> str:
    return os.pathsep.join(p for p in [str(HERE), os.environ.get("PYTHONPATH", "")] if p)


def _child(db_url: str, spans: Path, run_id: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(HERE / "otel_app.py"), db_url, str(spans), run_id, *extra],
        capture_output=True,
        text=True,
        timeout=300,
    )


STEPS = {
    "chat gpt-4o-mini": 3,  # steps 1, 3, 5
    "execute_tool note": 2,  # steps 2, 6
    "execute_tool wait_for_export": 1,  # step 4
    "daybook.run advise": 1,
}


def test_a_run_killed_mid_way_and_resumed_in_another_process_exports_each_step_once(
    db_url: str, tmp_path: Path
) -> None:
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    killed_proc = _child(db_url, first, "advice", "--die-in-tool")
    assert killed(killed_proc), killed_proc.stderr
    before = otel_app.read_spans(first)
    steps_before = sorted(s["attributes"]["daybook.step"] for s in before)
    assert steps_before == [1, 2, 3], killed_proc.stderr  # sent, then killed
    done = _child(db_url, second, "advice")
    assert done.returncode == 0, done.stderr
    spans = otel_app.read_spans(first, second)
    assert Counter(s["name"] for s in spans) == STEPS
    assert len({s["span_id"] for s in spans}) == len(spans)  # none twice, by id either
    assert {s["trace_id"] for s in spans} == {f"{trace_ids('advice')[0]:032x}"}
    steps = sorted(s["attributes"]["daybook.step"] for s in spans if "daybook.step" in s["attributes"])
    assert steps == [1, 2, 3, 4, 5, 6]


def test_a_kill_between_a_batchs_export_and_its_cursor_resends_that_batch_under_the_same_span_ids(
    db_url: str, tmp_path: Path
) -> None:
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    killed_proc = _child(db_url, first, "window", "--die-at-cursor", "1")
    assert killed(killed_proc), killed_proc.stderr
    sent_then_killed = otel_app.read_spans(first)
    assert sent_then_killed  # the batch went out, the cursor never moved past it
    done = _child(db_url, second, "window")
    assert done.returncode == 0, done.stderr
    again = otel_app.read_spans(second)
    assert Counter(s["name"] for s in again) == STEPS  # the resuming process sent each once
    ids = {s["span_id"]: s["name"] for s in again}
    # At least once: the killed batch is sent again, each span under the id it had (a collector
    # that keeps one span per id shows each step once).
    assert all(ids.get(s["span_id"]) == s["name"] for s in sent_then_killed)
    with Daybook(db_url) as book:
        assert Cursor(book.store).read("window") == book.journal("window")[-1].seq


def test_a_web_follower_and_a_worker_exporting_the_same_run_send_each_step_once(db_url: str) -> None:
    provider, exporter = _exporter()
    with Daybook(db_url) as book:
        book.submit(otel_app.paced, 8, 0.25, run_id="paced")
        web = Follower(book.store, provider, poll=0.5, since=0.0)  # `daybook web --otel`'s
        web.start()
        try:
            worker = Worker(db_url, apps=[str(HERE / "otel_app.py")], poll=0.01, otel=provider)
            stats = worker.run(until_idle=True)
        finally:
            web.stop()
        web.poll_once()
        assert stats.completed == 1
        log = book.store.entity_view("daybook.otel:paced")
    spans = exporter.get_finished_spans()
    names = Counter(s.name for s in spans)
    assert names == {"chat claude-sonnet-4": 4, "execute_tool note": 4, "daybook.run paced": 1}
    assert len({s.context.span_id for s in spans}) == len(spans)
    assert log is not None
    exporters = {agent for _, _, agent, action, _ in log[2] if action == "exported"}
    assert exporters  # who exported is on record (one or both of them)


def test_two_threads_exporting_the_same_run_at_once_send_each_span_once(db_url: str) -> None:
    provider, exporter = _exporter()
    with Daybook(db_url) as book:
        book.run(otel_app.paced, 6, 0.0, run_id="raced")
        followers = [Follower(book.store, provider, since=0.0) for _ in range(4)]
        threads = [threading.Thread(target=f.poll_once) for f in followers]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert sum(f.poll_once() for f in followers) == 0
    names = Counter(s.name for s in exporter.get_finished_spans())
    assert names == {"chat claude-sonnet-4": 3, "execute_tool note": 3, "daybook.run paced": 1}


def test_a_model_call_with_a_reservation_row_is_one_span_from_its_recorded_row_with_its_cost() -> None:
    from daybook import Kind
    from daybook.records import Event, RunInfo
    from daybook.telemetry.genai import plan

    info = RunInfo("costly", "ask", "app:ask", "running", {}, None, None, 1.0, 4.5, None, None, 1)
    value = {"text": "hi", "model": "claude-haiku-4", "input_tokens": 12, "output_tokens": 5}
    rows = [
        Event("costly", 1, Kind.RUN_STARTED, at=1.0),
        Event("costly", 2, Kind.DECISION, 1, "llm", status="reserved", data={"attempt": 1}, at=2.0),
        Event("costly", 3, Kind.DECISION, 1, "llm", status="reserved", data={"attempt": 2}, at=3.0),
    ]
    assert plan(info, rows, 0) == []  # reserved, not called yet: nothing settled
    recorded = {"value": value, "cost": {"usd": 0.0042, "tokens": 17.0}, "priced": True, "attempt": 2}
    rows.append(Event("costly", 4, Kind.DECISION, 1, "llm", status="recorded", data=recorded, at=4.5))
    [span] = plan(info, rows, 0)
    assert span.name == "chat claude-haiku-4" and span.client and (span.start, span.end) == (2.0, 4.5)
    assert span.attributes["gen_ai.provider.name"] == "anthropic"
    assert span.attributes["gen_ai.usage.input_tokens"] == 12
    assert span.attributes["daybook.cost.usd"] == 0.0042 and span.attributes["daybook.attempts"] == 2
    assert plan(info, rows, 4) == []  # past the cursor: nothing again


@pytest.mark.slow
def test_daybook_web_otel_and_a_daybook_worker_otel_processes_send_each_step_of_a_run_once(
    db_url: str,
) -> None:
    env = {**os.environ, "OTEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "both"}
    port = free_port()
    web = subprocess.Popen(
        [sys.executable, "-m", "daybook", "web", "--db", db_url, "--port", str(port), "--otel"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        wait_until(lambda: _up(port))
        with Daybook(db_url) as book:
            book.submit(otel_app.paced, 8, 0.3, run_id="both")
        cmd = [*worker_command(db_url, "--until-idle", "--otel")]
        cmd[cmd.index(str(HERE / "agents.py"))] = str(HERE / "otel_app.py")
        worker = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
        assert worker.returncode == 0 and "run both completed" in worker.stdout, worker.stderr
        with Daybook(db_url) as book:  # the inspector's poll has seen the run's end
            caught_up = _eventually(lambda: Cursor(book.store).read("both") == book.journal("both")[-1].seq)
            log = book.store.entity_view("daybook.otel:both")
    finally:
        web.send_signal(signal.SIGINT)  # uvicorn stops; the SDK flushes its spans at exit
        out, _ = web.communicate(timeout=300)
    both = out + worker.stdout
    assert caught_up, (log, worker.stdout, worker.stderr)
    names = Counter(re.findall(r'"name": "((?:chat|execute_tool|daybook\.run) [^"]+)"', both))
    assert names == {"chat claude-sonnet-4": 4, "execute_tool note": 4, "daybook.run paced": 1}
    ids = re.findall(r'"span_id": "(0x[0-9a-f]+)"', both)
    assert len(ids) == len(set(ids)) == 9


def _eventually(predicate: Any) -> bool:
    try:
        wait_until(predicate)
    except AssertionError:
        return False
    return True


def _up(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2):
            return True
    except OSError:
        return False
