"""The durable agent loop: every outcome is reachable, stays the same on replay, and a kill at any
point changes neither the model calls, nor what the counterparty executed, nor what was spent."""

from __future__ import annotations

import json
import uuid

import agents
import pytest
from conftest import killed, run_child
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import daybook
from daybook import Daybook, Kind, RunStatus
from daybook.demo.bank import Bank


def _llm_calls(book: Daybook, run_id: str) -> int:
    """Completions recorded (a model call's `reserved` row, written before it, is not one)."""
    rows = book.journal(run_id)
    return sum(1 for e in rows if e.kind == Kind.DECISION and e.name == "llm" and e.status != "reserved")


@pytest.mark.parametrize("scenario", ["ok", "compensated", "needs_review"])
def test_each_loop_outcome_is_reachable_and_stable_on_replay(
    db_url: str,
    bank,
    scenario: str,  # type: ignore[no-untyped-def]
) -> None:
    with Daybook(db_url, inline_wait=1.0) as book:
        result = book.run(agents.looped, bank.url, scenario, run_id=f"loop-{scenario}")
        assert result["outcome"] == scenario
        assert book.replay(f"loop-{scenario}") == result  # no model call, no act, no charge
        assert _llm_calls(book, f"loop-{scenario}") == 3
    cancels = bank.records.get("cancels", {})
    assert len(cancels) == (2 if scenario == "compensated" else 0)  # weak judge: no unwind


def test_a_stuck_unwind_is_the_runs_status(db_url: str, bank) -> None:  # type: ignore[no-untyped-def]
    with Daybook(db_url) as book:
        with pytest.raises(daybook.RunStuck):
            book.run(agents.looped, bank.url, "stuck", run_id="loop-stuck")
        assert book.get_run("loop-stuck").status == RunStatus.STUCK


def test_a_stale_precondition_skips_the_act(book: Daybook, bank) -> None:  # type: ignore[no-untyped-def]
    loop = agents._loop(bank.url, "ok")
    seen = {"n": 0}

    def moving() -> dict[str, int]:
        seen["n"] += 1  # the world moves between the observation and the act
        return {"price": 100 + seen["n"]}

    loop.observe = moving
    loop.verify = lambda action, fresh: fresh["price"] <= 101

    @daybook.workflow
    def stale(ctx: daybook.Context) -> dict[str, object]:
        return loop.run(ctx, "buy at 101 or less").as_dict()

    result = book.run(stale, run_id="stale")
    assert [h["state"] for h in result["history"]] == ["stale", "stale"]
    assert not [e for e in book.journal("stale") if e.kind == Kind.INTENT]


@pytest.mark.slow
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.integers(min_value=1, max_value=30), before=st.booleans())
def test_a_kill_anywhere_changes_no_model_call_execution_or_spend(
    db_url: str, where: int, before: bool
) -> None:
    with Bank() as bank, Daybook(db_url) as book:
        clean = f"clean-{uuid.uuid4().hex[:6]}"
        expected = book.run(agents.looped, bank.url, "compensated", run_id=clean)
        want = (_llm_calls(book, clean), book.budget(clean)["spent"])
        executed = len(bank.stats()["executions_by_key"])

        rid = f"kill-{uuid.uuid4().hex[:6]}"
        flag = "--kill-before" if before else "--kill-after"
        proc = run_child(
            db_url, "start", rid, "looped", json.dumps([bank.url, "compensated"]), flag, f"any:{where}"
        )
        # A kill point past the last row lets the run finish on its own.
        got = book.resume(rid, wait=10) if killed(proc) else json.loads(proc.stdout)["result"]
        assert got["outcome"] == expected["outcome"] == "compensated"
        assert (_llm_calls(book, rid), book.budget(rid)["spent"]) == want
        mine = {k: v for k, v in bank.stats()["executions_by_key"].items() if rid in k}
        assert len(mine) == executed and set(mine.values()) == {1}


def test_a_tool_with_no_profile_counts_as_irreversible() -> None:
    @daybook.tool
    def bare(*, idempotency_key: str) -> None:
        return None

    @daybook.tool(idempotent=True)
    def profiled(*, idempotency_key: str) -> None:
        return None

    assert bare.irreversible and not profiled.irreversible


def test_an_irreversible_tool_is_gated_even_when_the_policy_names_nothing(book: Daybook) -> None:
    published: list[str] = []

    @daybook.tool(irreversible=True)
    def publish(*, text: str, idempotency_key: str) -> str:
        published.append(text)
        return text

    loop = daybook.AgentLoop(
        llm=daybook.ScriptedLLM(
            lambda p: '{"tool": "publish", "args": {"text": "hi"}}' if "steps=0" in p else '{"tool": "stop"}'
        ),
        tools={"publish": publish},
        observe=lambda: {},
        prompt=lambda goal, obs, history: f"steps={len(history)}",
        judge=lambda goal, history: daybook.Judgement(True),
    )

    @daybook.workflow
    def announce(ctx: daybook.Context) -> dict[str, object]:
        return loop.run(ctx, "announce").as_dict()

    book.inline_wait = 0.05
    with pytest.raises(daybook.Suspended, match="verdict"):
        book.run(announce, run_id="pub")
    assert published == []
