"""Poison values: what a store cannot encode is refused at the step that produced it, and the run
is parked for a person, never retried in a hot loop, never reported as a store outage."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import poison_agents
import pytest
from conftest import HERE

import daybook
from daybook import Daybook, Kind, NotSerializable, RunNotFound, RunStatus, records


def _calls(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_a_model_reply_cut_inside_an_emoji_parks_the_run_and_the_model_is_called_once(
    db_url: str, tmp_path: Path
) -> None:
    calls = tmp_path / "calls.log"
    with Daybook(db_url) as book:
        book.submit(poison_agents.poison_decide, str(calls), run_id="P2")
    worker = subprocess.run(
        [sys.executable, "-m", "daybook", "worker", "--db", db_url, "--app", str(HERE / "poison_agents.py"),
         "--poll", "0.05", "--until-idle"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert worker.returncode == 0, worker.stderr
    assert _calls(calls) == 1  # the model was asked once, not in a loop
    with Daybook(db_url) as book:
        info = book.get_run("P2")
        assert info.status == RunStatus.NEEDS_ATTENTION and info.lease_owner is None
        assert info.error["type"] == "NotSerializable"
        message = info.error["message"]
        assert "step 1" in message and "'plan'" in message and "surrogate" in message
        assert "unavailable" not in message and "fix the store" not in message
        assert [e.kind for e in book.journal("P2")] == [Kind.RUN_STARTED]  # nothing half-written


def test_a_nul_in_a_step_name_parks_the_run_on_both_stores(book: Daybook) -> None:
    @daybook.workflow
    def nul_name(ctx: daybook.Context) -> int:
        return int(ctx.decide("pl\x00an", lambda: 1).value)

    with pytest.raises(NotSerializable, match=r"step 1 .*NUL"):
        book.run(nul_name, run_id="nul-step")
    info = book.get_run("nul-step")
    assert info.status == RunStatus.NEEDS_ATTENTION and info.lease_owner is None


def test_a_nul_inside_a_value_is_kept_exactly_on_both_stores(book: Daybook) -> None:
    @daybook.workflow
    def nul_value(ctx: daybook.Context) -> str:
        return str(ctx.decide("text", lambda: "a\x00b").value)

    assert book.run(nul_value, run_id="nul-value") == "a\x00b"
    assert book.replay("nul-value") == "a\x00b"


def test_nul_and_surrogates_in_ids_names_and_senders_are_refused_cleanly(book: Daybook) -> None:
    @daybook.workflow
    def waits(ctx: daybook.Context) -> None:
        ctx.wait_for("go", timeout=0)

    book.run(waits, run_id="target")
    for bad in ("a\x00b", "a\ud800"):
        with pytest.raises(NotSerializable, match="run id"):
            book.run(waits, run_id=bad)
        with pytest.raises(NotSerializable, match="signal name"):
            book.signal("target", bad)
        with pytest.raises(NotSerializable, match="sender"):
            book.signal("target", "go", sender=bad)
        with pytest.raises(NotSerializable, match="entity name"):
            book.entity(bad).claim("agent", 10)
        with pytest.raises(NotSerializable, match="claiming agent"):
            book.entity("incident").claim(bad, 10)
        with pytest.raises(NotSerializable, match="approver name"):
            book.add_approver(bad)
    with pytest.raises(daybook.DaybookError):  # a read: not found (SQLite) or refused (PostgreSQL)
        book.get_run("a\x00b")


def test_a_lone_surrogate_as_input_is_refused_before_anything_is_written(book: Daybook) -> None:
    @daybook.workflow
    def echo(ctx: daybook.Context, text: str) -> str:
        return text

    with pytest.raises(NotSerializable, match="surrogate"):
        book.run(echo, "a\ud800", run_id="surrogate-in")
    with pytest.raises(RunNotFound):
        book.get_run("surrogate-in")


def test_a_workflow_returning_a_lone_surrogate_is_parked_not_left_running(book: Daybook) -> None:
    @daybook.workflow
    def returns_half_an_emoji(ctx: daybook.Context) -> str:
        return "a\ud800"

    with pytest.raises(NotSerializable, match="result"):
        book.run(returns_half_an_emoji, run_id="surrogate-out")
    info = book.get_run("surrogate-out")
    assert info.status == RunStatus.NEEDS_ATTENTION and info.lease_owner is None


def test_an_exception_whose_message_holds_a_lone_surrogate_is_recorded_escaped(book: Daybook) -> None:
    @daybook.workflow
    def raises(ctx: daybook.Context) -> None:
        raise daybook.WorkflowFailed("bad reply: \ud83d")

    with pytest.raises(daybook.RunFailed):
        book.run(raises, run_id="surrogate-error")
    info = book.get_run("surrogate-error")
    assert info.status == RunStatus.FAILED and "\\ud83d" in info.error["message"]
    assert "\\ud83d" in info.error["traceback"]


def test_a_value_nested_5000_deep_parks_the_run_instead_of_failing_it(book: Daybook) -> None:
    def deep() -> list[object]:
        value: list[object] = []
        for _ in range(5000):
            value = [value]
        return value

    @daybook.workflow
    def nests(ctx: daybook.Context) -> object:
        return ctx.decide("deep", deep).value

    with pytest.raises(NotSerializable, match=f"deeper than {records.MAX_DEPTH}"):
        book.run(nests, run_id="deep")
    assert book.get_run("deep").status == RunStatus.NEEDS_ATTENTION
    with pytest.raises(NotSerializable, match="deeper"):
        book.run(nests, deep(), run_id="deep-input")  # as input: refused before any write
    with pytest.raises(RunNotFound):
        book.get_run("deep-input")


def test_a_tool_result_over_the_size_limit_is_recorded_unknown_and_the_run_parks(
    book: Daybook,
    bank,
    monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
) -> None:
    import agents

    monkeypatch.setattr(records, "MAX_PAYLOAD", 2_000)

    @daybook.tool(idempotent=True)
    def big_reply(*, bank: str, idempotency_key: str) -> str:
        agents.post(f"{bank}/payments", {"n": 1}, idempotency_key)
        return "x" * 5_000

    @daybook.workflow
    def asks_for_a_lot(ctx: daybook.Context, bank: str) -> str:
        return ctx.effect(big_reply, bank=bank)

    with pytest.raises(NotSerializable, match="over daybook's limit"):
        book.run(asks_for_a_lot, bank.url, run_id="big")
    info = book.get_run("big")
    assert info.status == RunStatus.NEEDS_ATTENTION and info.lease_owner is None
    outcome = [e for e in book.journal("big") if e.kind == Kind.OUTCOME][-1]
    assert outcome.status == "unknown" and "cannot journal" in outcome.data["reason"]
    assert bank.stats()["executions_by_key"] == {"big/1": 1}
