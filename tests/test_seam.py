"""The integration seam: `daybook.current()`, `daybook.idempotency_key()` and
`daybook.journaled_call`, which every integration journals its framework's calls through; and
`daybook worker --otel`, which exports the spans of the runs a worker executes."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import seam_app
from conftest import HERE
from store_bytes import store_text

import daybook
from daybook import ConfigError, Context, Daybook, DaybookError, NotInRun

CARD = "4111-SEAM-CARD-7781"


@pytest.fixture
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "ledger.jsonl"
    monkeypatch.setenv("LEDGER", str(path))
    monkeypatch.setenv("CARD", CARD)
    return path


@daybook.tool(idempotent=True, retry=daybook.Retry(timeout=5.0))
def keyed(*, n: int, idempotency_key: str) -> list[Any]:
    # Under a timeout the call runs on a helper thread: the key (and the run) follow it there.
    return [daybook.idempotency_key(), idempotency_key, daybook.current().run_id]


def _helper() -> str:
    return daybook.current().run_id


@daybook.workflow
def sync_body(ctx: Context) -> dict[str, Any]:
    return {
        "same": daybook.current() is ctx,
        "in_run": daybook.in_run(),
        "helper": _helper(),
        "tool": ctx.effect(keyed, n=1),
    }


@daybook.workflow
async def async_body(ctx: Context) -> dict[str, Any]:
    async def in_task() -> bool:
        await asyncio.sleep(0)
        return daybook.current() is ctx

    tasks = await asyncio.gather(in_task(), asyncio.create_task(in_task()))
    return {"same": daybook.current() is ctx, "tasks": list(tasks)}


def test_current_is_the_running_ctx_sync_and_async_and_refused_outside_a_run(book: Daybook) -> None:
    out = book.run(sync_body, run_id="cur")
    assert out == {"same": True, "in_run": True, "helper": "cur", "tool": ["cur/1", "cur/1", "cur"]}
    assert book.run(async_body, run_id="cur-async") == {"same": True, "tasks": [True, True]}
    assert book.replay("cur") == out and book.replay("cur-async")["tasks"] == [True, True]
    assert daybook.in_run() is False
    with pytest.raises(NotInRun) as outside:
        daybook.current()
    assert isinstance(outside.value, DaybookError) and isinstance(outside.value, ConfigError)
    assert "outside a workflow body" in str(outside.value) and "daybook.in_run()" in str(outside.value)
    with pytest.raises(NotInRun, match="outside a tool's call"):
        daybook.idempotency_key()


def test_journaled_call_async_replays_and_keys_by_step_when_no_key_is_given(book: Daybook) -> None:
    out = book.run(seam_app.refund_async, "B-2", run_id="as")
    assert out == {"result": {"refunded": "B-2", "key": "as/1"}, "current": True}
    (effect,) = book.effects("as")
    assert effect["key"] == "as/1" and effect["status"] == "confirmed"
    assert book.run(seam_app.refund_async, "B-2", run_id="as") == out  # attached: the record


def test_a_journaled_call_killed_after_it_acted_resumes_asks_the_counterparty_and_acts_once(
    db_url: str, ledger: Path
) -> None:
    env = {**os.environ, "HANG_AFTER_REFUND": "1"}
    cmd = [sys.executable, str(HERE / "seam_app.py"), "--db", db_url, "--run", "r1"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not seam_app.ledger_lines() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(seam_app.ledger_lines()) == 1, proc.communicate(timeout=5)
    proc.send_signal(signal.SIGKILL)  # refunded; the outcome never journaled
    proc.wait(timeout=30)
    with Daybook(db_url) as book:
        (effect,) = book.effects("r1")
        assert effect["status"] != "confirmed"  # in flight: the kill landed mid-call
    done = subprocess.run(cmd, env=dict(os.environ), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)["result"]
    assert result == {"refunded": "A-1", "key": "r1/refund"}  # the counterparty's answer
    (line,) = seam_app.ledger_lines()  # one refund at the counterparty
    assert line["key"] == "r1/refund"
    with Daybook(db_url) as book:
        assert book.get_run("r1").status == "completed"
        (effect,) = book.effects("r1")
        assert effect["status"] == "confirmed" and effect["tool"] == "ledger:refund"
    assert CARD not in store_text(db_url)  # the secret argument is a digest in every row


def test_journaled_call_refuses_bad_input_saying_what_to_pass(book: Daybook) -> None:
    def pay(order: str) -> str:
        return order

    async def apay(order: str) -> str:
        return order

    @daybook.workflow(name="seam.bad")
    def bad(ctx: Context, case: str) -> Any:
        calls = {
            "ctx": lambda: daybook.journaled_call("ctx", "x:pay", None, pay),  # type: ignore[arg-type]
            "name": lambda: daybook.journaled_call(ctx, "", None, pay),
            "key": lambda: daybook.journaled_call(ctx, "x:pay", "", pay),
            "fn": lambda: daybook.journaled_call(ctx, "x:pay", None, "pay"),  # type: ignore[arg-type]
            "args": lambda: daybook.journaled_call(ctx, "x:pay", None, pay, args={"idempotency_key": "k"}),
            "secrets": lambda: daybook.journaled_call(
                ctx, "x:pay", None, pay, args={"order": "1"}, secrets=[""]
            ),
            "class": lambda: daybook.journaled_call(ctx, "x:pay", None, pay, effect_class="sometimes"),
            "sync-awaitable": lambda: daybook.journaled_call(ctx, "x:pay", None, lambda: apay("1")),
        }
        try:
            return calls[case]()
        except EffectFailedOrConfig as exc:
            return f"{type(exc).__name__}: {exc}"

    said = {case: book.run(bad, case, run_id=f"bad-{case}") for case in (
        "ctx", "name", "key", "fn", "args", "secrets", "class", "sync-awaitable")}  # fmt: skip
    assert said["ctx"].startswith("ConfigError") and "daybook.current()" in said["ctx"]
    assert said["name"].startswith("ConfigError") and "tool name" in said["name"]
    assert said["key"].startswith("ConfigError") and "non-empty string" in said["key"]
    assert said["fn"].startswith("ConfigError") and "callable" in said["fn"]
    assert said["args"].startswith("ConfigError") and "daybook.idempotency_key()" in said["args"]
    assert said["secrets"].startswith("ConfigError") and "argument names" in said["secrets"]
    assert said["class"].startswith("ConfigError") and "effect_class" in said["class"]
    assert "async def" in said["sync-awaitable"]
    with pytest.raises(NotInRun):
        daybook.journaled_call(daybook.current(), "x:pay", None, pay)


EffectFailedOrConfig = (ConfigError, daybook.EffectFailed)


def test_daybook_worker_otel_exports_the_spans_of_the_runs_it_executes(db_url: str, ledger: Path) -> None:
    with Daybook(db_url) as book:
        book.submit(seam_app.refund, "W-1", run_id="w1")
    env = {**os.environ, "OTEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "worker-under-test"}
    app = str(HERE / "seam_app.py")
    cmd = [sys.executable, "-m", "daybook", "worker", "--db", db_url, "--app", app, "--poll", "0.05"]
    done = subprocess.run(
        [*cmd, "--until-idle", "--otel"], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "run w1 completed" in done.stdout
    assert '"name": "execute_tool ledger:refund"' in done.stdout
    assert '"name": "daybook.run refund"' in done.stdout
    assert '"service.name": "worker-under-test"' in done.stdout
    assert done.stdout.count('"name": "execute_tool ledger:refund"') == 1  # each step once


def test_a_worker_with_a_tracer_provider_exports_only_what_it_executed(db_url: str, ledger: Path) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from daybook.telemetry.otel import trace_ids
    from daybook.worker import Worker

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with Daybook(db_url) as book:
        book.run(seam_app.refund, "E-0", run_id="elsewhere")  # executed here, not by the worker
        book.submit(seam_app.refund, "W-2", run_id="w2")
    stats = Worker(db_url, apps=[str(HERE / "seam_app.py")], poll=0.01, otel=provider).run(until_idle=True)
    assert stats.completed == 1
    spans = exporter.get_finished_spans()
    assert {s.context.trace_id for s in spans} == {trace_ids("w2")[0]}
    names = sorted(s.name for s in spans)
    assert names == ["daybook.run refund", "execute_tool ledger:refund"]


def test_an_unknown_outcome_is_resent_under_its_key_only_when_the_call_is_declared_idempotent(
    book: Daybook,
) -> None:
    calls: list[str] = []

    def send() -> str:
        calls.append(daybook.idempotency_key())
        if len(calls) % 2:
            raise daybook.OutcomeUnknown("the connection dropped after the request went out")
        return "sent"

    @daybook.workflow(name="seam.unknown")
    def unknown(ctx: Context, idempotent: bool) -> Any:
        return daybook.journaled_call(ctx, "x:send", f"{ctx.run_id}/send", send, idempotent=idempotent)

    assert book.run(unknown, True, run_id="idem") == "sent"
    assert calls == ["idem/send", "idem/send"]  # re-sent under the same key
    calls.clear()
    # No status, not idempotent: the class daybook.tool infers is irreversible, never re-sent.
    with pytest.raises(daybook.NeedsAttention):
        book.run(unknown, False, run_id="once")
    assert calls == ["once/send"]


def test_the_same_fn_under_another_profile_is_another_tool_and_lookup_finds_the_last_called(
    book: Daybook,
) -> None:
    """`journaled_call` keeps the tool it built for a fn and profile: the profile a call gives
    is the one its act gets (idempotent, then not, then again), and the tool registered under
    the name is the one the last call used, as when each call built its own."""
    from daybook.journal.tool import lookup

    def send() -> str:
        return "sent"

    @daybook.workflow(name="seam.profiles")
    def profiled(ctx: Context, idempotent: bool) -> Any:
        return daybook.journaled_call(ctx, "x:profiled", None, send, idempotent=idempotent)

    seen = []
    for n, idempotent in enumerate([True, False, True]):
        assert book.run(profiled, idempotent, run_id=f"p{n}") == "sent"
        made = lookup("x:profiled")
        assert made is not None
        seen.append(made.idempotent)
    assert seen == [True, False, True]
