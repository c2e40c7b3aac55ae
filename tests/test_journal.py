"""The journal's everyday contract: record once, replay from the journal, never write on a read."""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3

import psycopg
import pytest

import daybook
from daybook import Daybook, Kind, RunConflict, RunStatus, ScriptedLLM

COUNTER: dict[str, int] = {}


@daybook.tool
def record_call(*, label: str, idempotency_key: str) -> dict[str, str]:
    COUNTER[idempotency_key] = COUNTER.get(idempotency_key, 0) + 1
    return {"label": label, "key": idempotency_key}


def test_decision_and_effect_rows_link_the_effect_key_to_its_decision(
    book: Daybook,
) -> None:
    llm = ScriptedLLM(["sweep 250000 to MMF"])
    state = {"explode": False}

    @daybook.workflow
    def agent(ctx: daybook.Context) -> list[object]:
        plan = ctx.llm(llm, "what should we sweep?")
        out: list[object] = [plan.value["text"]]
        out.append(ctx.effect(record_call, decision=plan, label="wire"))
        if state["explode"]:
            raise RuntimeError("process dies here")
        out.append(ctx.effect(record_call, decision=plan, label="book"))
        return out

    state["explode"] = True
    with pytest.raises(daybook.RunFailed):
        book.run(agent, run_id="replay")
    events = book.journal("replay")
    # An unexpected exception parks the run (resumable after a fix), it does not fail it.
    # A model call is two rows: its reservation (before the call) and its completion.
    kinds = [(e.kind, e.status) for e in events]
    assert kinds[:3] == [("run_started", None), ("decision", "reserved"), ("decision", "recorded")]
    assert [e.kind for e in events[3:]] == ["intent", "outcome", "run_attention"]
    decision = events[2]
    assert decision.data["value"]["model"] == "scripted-1"
    intent = events[3]
    assert intent.key == "replay/1/record_call/0"  # <decision id>/<kind>/<i>
    assert intent.data["decision"] == "replay/1"


def test_resume_replays_recorded_steps_and_continues_live(book: Daybook) -> None:
    COUNTER.clear()
    llm = ScriptedLLM(["plan-a"])
    crash = {"at": 2}

    class Crash(BaseException):
        """Escapes like a crash: nothing journals it, the lease is released."""

    @daybook.workflow
    def agent2(ctx: daybook.Context) -> list[object]:
        plan = ctx.llm(llm, "plan?")
        labels = []
        for i in range(4):
            if i == crash["at"]:
                crash["at"] = -1
                raise Crash()
            labels.append(ctx.effect(record_call, decision=plan, label=f"e{i}")["label"])
        return [plan.value["text"], *labels]

    with pytest.raises(Crash):
        book.run(agent2, run_id="resume-me")
    assert book.get_run("resume-me").status == RunStatus.RUNNING
    result = book.resume("resume-me")
    assert result == ["plan-a", "e0", "e1", "e2", "e3"]
    assert llm.calls == 1  # the model was not sampled again
    keys = [f"resume-me/1/record_call/{i}" for i in range(4)]
    assert [COUNTER[k] for k in keys] == [1, 1, 1, 1]


def test_starting_an_existing_run_id_attaches_instead_of_running_again(book: Daybook) -> None:
    calls: list[int] = []

    @daybook.workflow
    def once(ctx: daybook.Context, n: int) -> int:
        calls.append(n)
        return n * 2

    assert book.run(once, 21, run_id="same") == 42
    assert book.run(once, 21, run_id="same") == 42
    assert calls == [21]
    with pytest.raises(RunConflict, match="different run"):
        book.run(once, 22, run_id="same")


def test_runtime_clock_random_and_uuid_replay_the_recorded_values(book: Daybook) -> None:
    seen: list[tuple[float, float, str]] = []

    class Crash(BaseException):
        pass

    @daybook.workflow
    def sources(ctx: daybook.Context) -> list[object]:
        values = (ctx.now(), ctx.random(), ctx.uuid())
        seen.append(values)
        if len(seen) == 1:
            raise Crash()
        return list(values)

    with pytest.raises(Crash):
        book.run(sources, run_id="sources")
    assert book.resume("sources") == list(seen[0])
    assert seen[0] == seen[1]


def test_reading_a_live_run_never_writes_to_the_journal(book: Daybook) -> None:
    @daybook.workflow
    def peek(ctx: daybook.Context) -> int:
        ctx.effect(record_call, label="x")
        before = len(book.journal(ctx.run_id))
        for _ in range(100):
            book.journal(ctx.run_id)
            book.get_run(ctx.run_id)
            book.export(ctx.run_id)
        return len(book.journal(ctx.run_id)) - before

    assert book.run(peek, run_id="peek") == 0


def test_journal_rows_cannot_be_updated_or_deleted(db_url: str, book: Daybook) -> None:
    @daybook.workflow
    def tiny(ctx: daybook.Context) -> int:
        return ctx.decide("one", lambda: 1).value

    book.run(tiny, run_id="ro")
    errors: tuple[type[Exception], ...] = (sqlite3.DatabaseError, psycopg.Error)
    for sql in ("UPDATE daybook_events SET name = 'x'", "DELETE FROM daybook_events"):
        with pytest.raises(errors, match="append-only"):
            _execute(db_url, sql)
    assert len(book.journal("ro")) == 3


def _execute(db_url: str, sql: str) -> None:
    if db_url.startswith("sqlite"):
        conn = sqlite3.connect(db_url.removeprefix("sqlite:///"))
        try:
            conn.execute(sql)
            conn.commit()
        finally:
            conn.close()
        return
    base, schema = db_url.split("?schema=")
    with psycopg.connect(base, autocommit=True) as pg:
        pg.execute(f'SET search_path TO "{schema}"')
        pg.execute(sql)  # type: ignore[arg-type]


def test_state_rebuilt_from_the_journal_equals_the_live_result(book: Daybook) -> None:
    @daybook.workflow
    def fold(ctx: daybook.Context) -> dict[str, int]:
        total = 0
        for i in range(5):
            total += ctx.decide(f"draw{i}", random.randint, 1, 100).value
        return {"total": total}

    live = book.run(fold, run_id="fold")
    rebuilt = sum(e.data["value"] for e in book.journal("fold") if e.kind == Kind.DECISION)
    assert live == {"total": rebuilt}


def test_async_workflow_with_parallel_steps_replays_with_the_same_ids(book: Daybook) -> None:
    finished: list[str] = []

    world = ["b", "c", "a"]  # not arguments: completion order is the world's

    @daybook.tool
    async def fetch(*, name: str, idempotency_key: str) -> dict[str, str]:
        # Each call finishes after the ones the world finishes before it. (Delays of 10-30 ms
        # did this until a loaded machine took longer than that to journal the next intent.)
        while not set(world[: world.index(name)]) <= set(finished):
            await asyncio.sleep(0.001)
        finished.append(name)
        return {"name": name, "key": idempotency_key}

    class Crash(BaseException):
        pass

    attempts = {"n": 0}

    @daybook.workflow
    async def fan_out(ctx: daybook.Context) -> list[dict[str, str]]:
        results = await asyncio.gather(*(ctx.effect(fetch, name=n) for n in "abc"))
        attempts["n"] += 1
        if attempts["n"] == 1:
            raise Crash()
        return list(results)

    with pytest.raises(Crash):
        book.run(fan_out, run_id="fan")
    first_order = list(finished)
    result = book.resume("fan")
    # Ids follow call order, not completion order; replay runs no tool again.
    assert [r["key"] for r in result] == ["fan/1", "fan/2", "fan/3"]
    assert [r["name"] for r in result] == ["a", "b", "c"]
    assert finished == first_order and first_order != ["a", "b", "c"]


def test_async_decisions_are_recorded_once(book: Daybook) -> None:
    calls: list[int] = []

    async def think(x: int) -> int:
        calls.append(x)
        await asyncio.sleep(0)
        return x + 1

    @daybook.workflow
    async def thinker(ctx: daybook.Context) -> int:
        d = await ctx.decide("think", think, 1)
        return d.value

    assert book.run(thinker, run_id="think") == 2
    assert calls == [1]


def test_export_is_the_run_and_its_whole_journal_as_json(book: Daybook) -> None:
    @daybook.workflow
    def small(ctx: daybook.Context) -> str:
        return ctx.effect(record_call, label="z")["label"]

    book.run(small, run_id="exp")
    doc = json.loads(json.dumps(book.export("exp")))
    assert doc["schema_version"] == daybook.SCHEMA_VERSION
    assert doc["run"]["status"] == "completed" and doc["run"]["result"] == "z"
    assert [e["kind"] for e in doc["events"]] == ["run_started", "intent", "outcome", "run_completed"]


def test_replaying_a_finished_run_with_every_tool_broken_gives_the_same_result(
    book: Daybook,
) -> None:
    broken = {"on": False}
    llm = ScriptedLLM(["go"])

    @daybook.tool
    def fragile(*, n: int, idempotency_key: str) -> int:
        if broken["on"]:
            raise RuntimeError("tool called during replay")
        return n * 10

    @daybook.workflow
    def steady(ctx: daybook.Context) -> list[object]:
        plan = ctx.llm(llm, "plan")
        return [plan.value["text"], ctx.now() > 0, *(ctx.effect(fragile, n=i) for i in range(3))]

    live = book.run(steady, run_id="steady")
    rows = len(book.journal("steady"))
    broken["on"] = True
    assert book.replay("steady") == live
    assert llm.calls == 1 and len(book.journal("steady")) == rows


def test_replay_of_changed_code_reports_divergence_without_writing(book: Daybook) -> None:
    @daybook.workflow(name="drift")
    def v1(ctx: daybook.Context) -> int:
        return ctx.decide("a", lambda: 1).value

    book.run(v1, run_id="drift")

    @daybook.workflow(name="drift")
    def v2(ctx: daybook.Context) -> int:
        return ctx.decide("a", lambda: 1).value + ctx.decide("b", lambda: 2).value

    with pytest.raises(daybook.NonDeterminismError, match="step 2"):
        book.replay("drift")
    assert [e.kind for e in book.journal("drift")] == ["run_started", "decision", "run_completed"]


def test_replayed_values_keep_their_key_order(book: Daybook) -> None:
    seen: list[list[str]] = []

    class Crash(BaseException):
        pass

    @daybook.workflow
    def ordered(ctx: daybook.Context) -> list[str]:
        value = ctx.decide("dict", lambda: {"zeta": 1, "alpha": 2, "mid": {"y": 1, "b": 2}}).value
        seen.append([*value, *value["mid"]])
        if len(seen) == 1:
            raise Crash()
        return seen[-1]

    with pytest.raises(Crash):
        book.run(ordered, run_id="order")
    assert book.resume("order") == ["zeta", "alpha", "mid", "y", "b"]


@pytest.mark.slow
def test_continue_as_new_keeps_each_segment_short_and_resumes_from_the_latest(
    book: Daybook,
) -> None:
    COUNTER.clear()
    crash = {"at": 625}  # in the third segment: a chain of three, as at any length

    class Crash(BaseException):
        pass

    @daybook.workflow
    def segmented(ctx: daybook.Context, start: int, total: int) -> int:
        end = min(start + 250, total)
        for i in range(start, end):
            if i == crash["at"]:
                crash["at"] = -1
                raise Crash()
            ctx.effect(record_call, label=f"item-{i}")
        if end < total:
            ctx.continue_as_new(end, total)
        return total

    with pytest.raises(Crash):
        book.run(segmented, 0, 750, run_id="seg")
    assert book.get_run("seg").result == {"daybook.continued_as": "seg~2"}
    assert book.get_run("seg~2").status == RunStatus.COMPLETED
    # Resuming reads only the latest segment's journal (about 250 rows, not 1,500).
    assert len(book.journal("seg~3")) < 275
    assert book.resume("seg~3") == 750
    assert book.run(segmented, 0, 750, run_id="seg") == 750  # the chain is followed
    assert all(n == 1 for n in COUNTER.values()) and len(COUNTER) == 750


@pytest.mark.slow
def test_a_long_continue_as_new_chain_neither_recurses_nor_loses_signals(book: Daybook) -> None:
    @daybook.workflow
    def hopper(ctx: daybook.Context, left: int) -> object:
        if left > 0:
            ctx.continue_as_new(left - 1)
        got = ctx.wait_for("note", timeout=0)
        return None if got is None else got.payload

    book.submit(hopper, 600, run_id="hop")
    book.signal("hop", "note", "kept")  # unread by the first segment: carried along the chain
    assert book.resume("hop") == "kept"  # 601 segments, followed in a loop
    assert book.run(hopper, 600, run_id="hop") == "kept"  # attaching follows the chain too
    report = book.replay_check(["hop", "hop~2", "hop~601"])
    assert [r["state"] for r in report] == ["ok", "ok", "ok"]
