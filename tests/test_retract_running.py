"""Retracting a step while it runs (S11): a tool that declares `cancel` is stopped mid-call, the
step is marked `retracted`, what it did is undone by its inverse, and it never starts again.
Asserted at the counterparty: the chunk files on disk and the tool's own count of starts."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import wait_until

import daybook
from daybook import Daybook

STOP = threading.Event()
STARTS: list[str] = []


def _unwrite(*, original: dict[str, Any], result: list[str], idempotency_key: str) -> int:
    for name in result:
        Path(name).unlink(missing_ok=True)
    return len(result)


unwrite = daybook.tool(_unwrite, name="unwrite", idempotent=True)


def _stop(**_: Any) -> None:
    STOP.set()


@daybook.tool(inverse=unwrite, cancel=_stop)
def translate(*, folder: str, idempotency_key: str) -> list[str]:
    """Writes one chunk file every 50 ms until done (200 chunks) or asked to stop."""
    STARTS.append(idempotency_key)
    written = []
    for i in range(200):
        if STOP.wait(0.05):
            break
        path = Path(folder, f"chunk{i}.txt")
        path.write_text(f"chunk {i}")
        written.append(str(path))
    return written


class NothingApplied(Exception):
    pass


@daybook.tool(cancel=_stop, idempotent=True)
def upload(*, seconds: float, idempotency_key: str) -> str:
    STARTS.append(idempotency_key)
    if STOP.wait(seconds):
        raise NothingApplied("stopped before anything was sent")
    return "sent"


def _loop(tools: dict[str, daybook.Tool[Any]], script: list[str]) -> daybook.AgentLoop:
    prompts: list[str] = []

    def reply(prompt: str) -> str:
        prompts.append(prompt)
        return script[min(len(prompts), len(script)) - 1]

    return daybook.AgentLoop(
        llm=daybook.ScriptedLLM(reply),
        tools=tools,
        observe=lambda: {},
        prompt=lambda goal, obs, history: f"{goal} | {history}",
        judge=lambda goal, history: daybook.Judgement(True),
    )


@pytest.fixture
def quick(db_url: str) -> Any:
    STOP.clear()
    STARTS.clear()
    # A short lease: the heartbeat, which also looks for retractions, beats every 0.3 s.
    with Daybook(db_url, lease_ttl=0.9) as b:
        yield b


def test_retracting_a_running_step_stops_it_undoes_what_it_wrote_and_never_starts_it_again(
    quick: Daybook, tmp_path: Path
) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    loop = _loop(
        {"translate": translate},
        [json.dumps({"tool": "translate", "args": {"folder": str(folder)}}), json.dumps({"tool": "stop"})],
    )

    @daybook.workflow
    def job(ctx: daybook.Context) -> dict[str, Any]:
        return loop.run(ctx, "translate the book").as_dict()

    done: dict[str, Any] = {}
    runner = threading.Thread(target=lambda: done.update(quick.run(job, run_id="job")))
    runner.start()
    wait_until(lambda: len(list(folder.iterdir())) >= 3)  # it is mid-call, writing chunks
    quick.steer("job", "retract", "skip the translation", author="ana", target="translate", wait=0)
    runner.join(60)
    assert STOP.is_set()  # the call was asked to stop; without it, 200 chunks would be written
    assert done["outcome"] == "ok"
    assert list(folder.iterdir()) == []  # what it wrote before it stopped is undone
    assert len(STARTS) == 1  # never started again
    act = [h for h in done["history"] if h.get("tool") == "translate"]
    assert [h["state"] for h in act] == ["retracted"]
    retraction = [h for h in done["history"] if h.get("revision") == "retract"]
    assert retraction[0]["undone"] == [STARTS[0]] and retraction[0]["not_undone"] == []
    assert quick.replay("job") == done
    assert len(STARTS) == 1


def test_a_retraction_reaches_a_running_step_on_an_encrypted_store(db_url: str, tmp_path: Path) -> None:
    # The heartbeat reads the inbox on a connection of its own, behind the same payload guard:
    # under a codec the retraction's payload is encrypted, and it must still be read.
    STOP.clear()
    STARTS.clear()
    with Daybook(db_url, lease_ttl=0.9, codec=daybook.FernetCodec(daybook.FernetCodec.new_key())) as b:
        test_retracting_a_running_step_stops_it_undoes_what_it_wrote_and_never_starts_it_again(b, tmp_path)


def test_a_call_stopped_by_a_retraction_that_applied_nothing_fails_once_and_is_not_retried(
    quick: Daybook,
) -> None:
    @daybook.workflow
    def send(ctx: daybook.Context) -> str:
        try:
            return str(ctx.effect(upload, seconds=30.0))
        except daybook.StepRetracted as exc:
            return f"skipped: {exc}"

    done: list[str] = []
    runner = threading.Thread(target=lambda: done.append(quick.run(send, run_id="send")))
    runner.start()
    wait_until(lambda: STARTS)
    quick.steer("send", "retract", "do not upload", author="bo", target="upload", wait=0)
    runner.join(60)
    assert done[0].startswith("skipped:") and "retraction" in done[0] and "bo" in done[0]
    assert len(STARTS) == 1  # an idempotent tool would be retried on failure; a retracted one is not
    outcome = [ev for ev in quick.journal("send") if ev.kind == "outcome"]
    assert [ev.status for ev in outcome] == ["failed"] and outcome[0].data["by"] == "bo"
    assert quick.resume("send") == done[0]  # replayed: the same answer, no new call
    assert len(STARTS) == 1


def test_a_retraction_of_another_tool_does_not_stop_a_running_call(quick: Daybook) -> None:
    @daybook.workflow
    def send(ctx: daybook.Context) -> str:
        return str(ctx.effect(upload, seconds=1.5))

    done: list[str] = []
    runner = threading.Thread(target=lambda: done.append(quick.run(send, run_id="other")))
    runner.start()
    wait_until(lambda: STARTS)
    quick.steer("other", "retract", "not that", author="bo", target="translate", wait=0)
    runner.join(60)
    assert done == ["sent"] and not STOP.is_set()
