"""Steering a live run (S8, S9, S10, S16): revisions are durable, ordered, authored; the run reads
them at its next step boundary and acknowledges them; the agent loop folds them into its next
prompt; opposite revisions of one target are reported, never merged. Both stores."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import agents
import pytest
from conftest import cli_in_process, wait_until

import daybook
from daybook import Daybook
from daybook.demo.bank import Bank

STARTED = threading.Event()


@daybook.tool
def draft(*, part: int, seconds: float, idempotency_key: str) -> str:
    STARTED.set()
    time.sleep(seconds)
    return f"part {part}"


@daybook.workflow
def writer(ctx: daybook.Context, parts: int, seconds: float) -> dict[str, Any]:
    heard: list[str] = []
    for part in range(parts):
        heard += [f"{r.kind}:{r.text}:{r.author}" for r in ctx.revisions()]
        ctx.effect(draft, part=part, seconds=seconds)
    heard += [f"{r.kind}:{r.text}:{r.author}" for r in ctx.revisions()]
    return {"heard": heard}


def test_a_revision_sent_during_a_tool_call_is_acknowledged_at_the_next_step_boundary(book: Daybook) -> None:
    STARTED.clear()
    done: dict[str, Any] = {}
    runner = threading.Thread(target=lambda: done.update(book.run(writer, 2, 1.0, run_id="essay")))
    runner.start()
    STARTED.wait(30)
    sent_at = time.monotonic()
    ack = book.steer("essay", "add", "cite the 2019 study", author="ana", wait=30)
    waited = time.monotonic() - sent_at
    runner.join(60)
    assert ack["acked"] is True and ack["conflicts"] == []
    assert waited < 5  # read when the 1 s call ended, not at the end of the run
    assert done["heard"] == ["add:cite the 2019 study:ana"]
    rows = [ev for ev in book.journal("essay") if ev.name == "revisions"]
    assert len(rows) == 1 and rows[0].step == ack["step"]
    assert rows[0].data["revisions"][0]["author"] == "ana"  # type: ignore[index]
    assert book.replay("essay") == done  # replay reads the revision back from the journal


def test_a_run_nobody_steers_journals_nothing_extra(book: Daybook) -> None:
    assert book.run(writer, 2, 0.0, run_id="quiet") == {"heard": []}
    assert not [ev for ev in book.journal("quiet") if ev.name == "revisions"]


def test_a_revision_to_a_waiting_run_is_read_when_it_goes_on(book: Daybook) -> None:
    @daybook.workflow
    def waits(ctx: daybook.Context) -> list[str]:
        ctx.wait_for("go", timeout=3600)
        return [r.text for r in ctx.revisions()]

    book.inline_wait = 0
    with pytest.raises(daybook.Suspended):
        book.run(waits, run_id="asleep")
    ack = book.steer("asleep", "revise", "8000 words, not 6000", author="bo", wait=0)
    assert ack["acked"] is False
    book.signal("asleep", "go")
    assert book.resume("asleep") == ["8000 words, not 6000"]
    rows = [ev for ev in book.journal("asleep") if ev.name == "revisions"]
    assert rows[0].data["inbox_ids"] == [ack["id"]]


def test_opposite_revisions_of_one_target_from_two_people_are_both_journaled_and_reported(
    book: Daybook,
) -> None:
    @daybook.workflow
    def waits(ctx: daybook.Context) -> list[list[str]]:
        ctx.wait_for("go", timeout=3600)
        first = [f"{r.author}:{r.kind}" for r in ctx.revisions()]
        ctx.wait_for("go", timeout=3600)
        second = [f"{r.author}:{r.kind}" for r in ctx.revisions()]
        return [first, second]

    book.inline_wait = 0
    with pytest.raises(daybook.Suspended):
        book.run(waits, run_id="two")
    a = book.steer("two", "add", "a French summary", author="ana", target="translation", wait=0)
    b = book.steer("two", "retract", "no translation at all", author="bo", target="translation", wait=0)
    book.signal("two", "go")
    with pytest.raises(daybook.Suspended):
        book.resume("two")
    c = book.steer("two", "add", "German too", author="cy", target="translation", wait=0)
    book.signal("two", "go")
    assert book.resume("two") == [["ana:add", "bo:retract"], ["cy:add"]]
    rows = [ev for ev in book.journal("two") if ev.name == "revisions"]
    assert rows[0].data["conflicts"] == [{"ids": [a["id"], b["id"]], "target": "translation"}]
    # The later addition conflicts with the earlier retraction, read in an earlier batch.
    assert rows[1].data["conflicts"] == [{"ids": [b["id"], c["id"]], "target": "translation"}]
    assert a["id"] < b["id"] < c["id"]  # totally ordered


def test_the_agent_loop_folds_revisions_into_its_next_prompt_and_a_revision_is_re_evaluated(
    book: Daybook,
) -> None:
    prompts: list[str] = []
    gate = threading.Event()

    def reply(prompt: str) -> str:
        prompts.append(prompt)
        if len(prompts) == 1:
            gate.wait(30)  # the revisions arrive while the model "thinks"
            return '{"tool": "publish", "args": {"text": "outline"}}'
        return '{"tool": "stop"}'

    @daybook.tool(irreversible=False)
    def publish(*, text: str, idempotency_key: str) -> str:
        return text

    loop = daybook.AgentLoop(
        llm=daybook.ScriptedLLM(reply),
        tools={"publish": publish},
        observe=lambda: {},
        prompt=lambda goal, obs, history: f"{goal} | {history}",
        judge=lambda goal, history: daybook.Judgement(True),
        reevaluate=lambda rev, history: [h["decision"] for h in history if "decision" in h],
    )

    @daybook.workflow
    def essay(ctx: daybook.Context) -> dict[str, Any]:
        return loop.run(ctx, "write the essay").as_dict()

    done: dict[str, Any] = {}
    runner = threading.Thread(target=lambda: done.update(book.run(essay, run_id="loop")))
    runner.start()
    wait_until(lambda: prompts)
    for kind, text in (("add", "cite the 2019 study"), ("revise", "8000 words, not 6000")):
        book.steer("loop", kind, text, author="ana", wait=0)
    gate.set()
    runner.join(60)
    assert done["outcome"] == "ok"
    assert "cite the 2019 study" in prompts[1] and "8000 words" in prompts[1]
    assert "cite the 2019 study" not in prompts[0]
    redo = [ev for ev in book.journal("loop") if ev.name == "re-evaluate"]
    assert len(redo) == 1  # the addition redoes nothing; the revision has its re-evaluate step
    assert redo[0].data["value"]["redo"] == ["loop/2"]  # type: ignore[index]


def test_steer_refuses_bad_kinds_and_finished_runs_and_the_cli_prints_the_acknowledgement(
    db_url: str,
) -> None:
    with Daybook(db_url) as book:
        book.run(writer, 1, 0.0, run_id="done")
        with pytest.raises(daybook.ConfigError, match="add, revise, retract"):
            book.steer("done", "delete", "x")
        with pytest.raises(daybook.ConfigError, match="finished run"):
            book.steer("done", "add", "x")
        with pytest.raises(daybook.ConfigError, match="reserved"):
            book.signal("done", "steer:", {"kind": "add", "text": "x"})
        book.inline_wait = 0

        @daybook.workflow
        def waits(ctx: daybook.Context) -> None:
            ctx.wait_for("go", timeout=3600)

        with pytest.raises(daybook.Suspended):
            book.run(waits, run_id="cli")
    out = cli_in_process("steer", "cli", "add", "also X", "--as", "ana", "--wait", "0", db=db_url)
    assert out.returncode == 0 and "queued" in out.stdout, out.stderr
    bad = cli_in_process("steer", "cli", "remove", "x", db=db_url)
    assert bad.returncode == 2


@daybook.tool(irreversible=False)
def delete_note(*, original: dict[str, Any], result: Any, idempotency_key: str) -> str:
    Path(original["path"]).unlink(missing_ok=True)
    return "deleted"


@daybook.tool(inverse=delete_note)
def write_note(*, path: str, text: str, idempotency_key: str) -> str:
    Path(path).write_text(text)
    return path


def test_a_retraction_undoes_what_was_done_for_the_steps_it_names(
    book: Daybook, bank: Bank, tmp_path: Path
) -> None:
    note = tmp_path / "offer.txt"
    prompts: list[str] = []
    gate = threading.Event()
    script = [
        json.dumps({"tool": "write_note", "args": {"path": str(note), "text": "20% off"}}),
        json.dumps({"tool": "book_leg", "args": {"bank": bank.url, "n": 1, "fail_inverse_of": -1}}),
        json.dumps({"tool": "stop"}),
    ]

    def reply(prompt: str) -> str:
        prompts.append(prompt)
        if len(prompts) == 2:
            gate.wait(30)  # the retractions arrive while the model picks the second act
        return script[len(prompts) - 1]

    loop = daybook.AgentLoop(
        llm=daybook.ScriptedLLM(reply),
        tools={"write_note": write_note, "book_leg": agents.book_leg},
        observe=lambda: {},
        prompt=lambda goal, obs, history: f"{goal} | {history}",
        judge=lambda goal, history: daybook.Judgement(True),
    )

    @daybook.workflow
    def offer(ctx: daybook.Context) -> dict[str, Any]:
        return loop.run(ctx, "make the offer").as_dict()

    done: dict[str, Any] = {}
    runner = threading.Thread(target=lambda: done.update(book.run(offer, run_id="offer")))
    runner.start()
    wait_until(lambda: len(prompts) >= 2)
    assert note.read_text() == "20% off"
    key = book.add_approver("ana", roles=["operator"])  # only an operator's retraction undoes
    book.steer("offer", "retract", "no written offer", author="ana", target="write_note", wait=0, token=key)
    book.steer("offer", "retract", "no hold either", author="ana", target="book_leg", wait=0, token=key)
    gate.set()
    runner.join(60)
    assert done["outcome"] == "ok"
    assert not note.exists()  # the file is gone
    assert len(bank.records["payments"]) == 1 and len(bank.records["cancels"]) == 1  # hold released
    retractions = [h for h in done["history"] if h.get("revision") == "retract"]
    assert [r["undone"] for r in retractions] == [["offer/2/write_note/0"], ["offer/5/book_leg/0"]]
    assert all(r["not_undone"] == [] for r in retractions)
    acts = [h for h in done["history"] if "tool" in h]
    assert [h["state"] for h in acts] == ["retracted", "retracted"]
    assert all(n == 1 for n in bank.stats()["executions_by_key"].values())


def test_after_a_long_pause_the_agent_loop_starts_again_from_a_recorded_primer(book: Daybook) -> None:
    prompts: list[str] = []
    script = [
        json.dumps({"tool": "announce", "args": {"text": "sale"}}),
        json.dumps({"tool": "stop"}),
    ]

    def reply(prompt: str) -> str:
        prompts.append(prompt)
        return script[min(len(prompts), len(script)) - 1]

    @daybook.tool(irreversible=True)
    def announce(*, text: str, idempotency_key: str) -> str:
        return text

    loop = daybook.AgentLoop(
        llm=daybook.ScriptedLLM(reply),
        tools={"announce": announce},
        observe=lambda: {},
        prompt=lambda goal, obs, history: f"{goal} | {history}",
        judge=lambda goal, history: daybook.Judgement(True),
        primer_after=0.3,
    )

    @daybook.workflow
    def sale(ctx: daybook.Context) -> dict[str, Any]:
        return loop.run(ctx, "announce the sale").as_dict()

    book.inline_wait = 0
    token = book.add_approver("ana", roles=["approver", "operator"])
    with pytest.raises(daybook.Suspended):
        book.run(sale, run_id="sale")  # the irreversible announcement waits for approval
    assert book.pause("sale", by="ana", token=token) == "paused"
    time.sleep(0.5)  # longer than primer_after
    book.approve("sale", book.approvals()[0]["gate_id"], approver="ana", token=token)
    done = book.resume("sale")
    primers = [h["primer"] for h in done["history"] if "primer" in h]
    assert len(primers) == 1 and primers[0].startswith("Resumed after a pause of")
    assert "announce done" in primers[0]
    assert "Resumed after a pause" in prompts[-1]  # the next model call starts from it
    rows = [ev for ev in book.journal("sale") if ev.name == "primer"]
    assert len(rows) == 1 and rows[0].data["why"]["note"] == primers[0]  # type: ignore[index]
    assert book.replay("sale") == done


def test_a_short_pause_makes_no_primer(book: Daybook) -> None:
    @daybook.workflow
    def brief(ctx: daybook.Context) -> str | None:
        ctx.wait_for("go", timeout=3600)
        return ctx.primer(3600, lambda paused: "never")

    book.inline_wait = 0
    with pytest.raises(daybook.Suspended):
        book.run(brief, run_id="brief")
    book.pause("brief")
    book.signal("brief", "go")
    assert book.resume("brief") is None
    assert not [ev for ev in book.journal("brief") if ev.name == "primer"]
