"""One fsync per effect step (issue 28 goal 2): the confirmed outcome of a tool whose unknown
daybook settles by itself (a status query: `pay`; an idempotent re-send: `pay_idem`) is
committed with the run's next row. A real process is SIGKILLed at each crash point this adds,
on both backends, and the bank (a real HTTP counterparty counting effects by key) is the judge:
every payment executed exactly once, none lost, and the run completes after resume.

The crash points (steps 1..3 are the three payments, the crash around step 2's outcome):

- `held`: step 2's tool returned and its outcome is held; killed before the commit of step 3's
  intent that would carry it (neither is durable);
- `carried`: killed right after that commit (step 2's outcome and step 3's intent durable);
- `end`: the last payment's outcome held at the end of the run; killed before the commit that
  ends the run, which carries it (neither is durable);
- `flushed`: killed right after that commit (the outcome and the run's completion durable).

A tool without such a profile (`pay_blind`) keeps its immediate outcome commit; the control
shows why: held like the others (`--defer-any`, which daybook never does), the `held` point
leaves an unknown nobody can settle, and the run needs a person.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import agents
import pytest
from conftest import HERE, killed
from store_bytes import store_text

import daybook
from daybook import Confirmed, Daybook, Kind, RunStatus, Secret
from daybook.demo.bank import Bank

COUNT = 3
POINTS = {
    "held": ("--kill-before", f"intent:{COUNT}"),
    "carried": ("--kill-after", f"intent:{COUNT}"),
    "end": ("--kill-before", f"outcome:{COUNT}"),
    "flushed": ("--kill-after", f"outcome:{COUNT}"),
}


def _child(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(HERE / "defer_child.py"), *args], capture_output=True, text=True, timeout=300
    )


def _steps(book: Daybook, run_id: str) -> dict[int, list[tuple[str, str | None]]]:
    out: dict[int, list[tuple[str, str | None]]] = {}
    for ev in book.journal(run_id):
        if ev.step is not None:
            out.setdefault(ev.step, []).append((ev.kind, ev.status))
    return out


def _once_each(bank: Bank, run_id: str) -> None:
    stats = bank.stats()
    for step in range(1, COUNT + 1):
        assert stats["executions_by_key"].get(f"{run_id}/{step}") == 1, (step, stats)  # 0 lost, 0 doubles
    assert stats["executed"]["payments"] == COUNT


@pytest.mark.parametrize("tool", ["pay", "pay_idem"])
@pytest.mark.parametrize("point", list(POINTS))
def test_killed_at_each_deferred_outcome_point_resume_pays_each_once(
    db_url: str, bank: Bank, tool: str, point: str
) -> None:
    run_id = f"defer-{tool}-{point}"
    proc = _child(db_url, "start", run_id, tool, bank.url, str(COUNT), *POINTS[point])
    assert killed(proc), proc.stdout + proc.stderr

    with Daybook(db_url) as book:
        steps = _steps(book, run_id)
        requests = bank.stats()["requests_by_key"]
        if point == "held":
            # The tool returned (the bank executed step 2), its outcome was only in memory.
            assert steps == {1: [("intent", None), ("outcome", "confirmed")], 2: [("intent", None)]}
            assert requests[f"{run_id}/2"] == 1 and f"{run_id}/3" not in requests
        elif point == "carried":
            assert steps[2] == [("intent", None), ("outcome", "confirmed")]
            assert steps[3] == [("intent", None)] and f"{run_id}/3" not in requests
        elif point == "end":
            assert steps[3] == [("intent", None)] and requests[f"{run_id}/3"] == 1
        else:
            assert steps[3] == [("intent", None), ("outcome", "confirmed")]
        # The last outcome and the run's end are one commit: both or neither.
        ended = point == "flushed"
        assert book.get_run(run_id).status == (RunStatus.COMPLETED if ended else RunStatus.RUNNING)

        result = book.resume(run_id, wait=10)
        steps = _steps(book, run_id)
        assert book.get_run(run_id).status == RunStatus.COMPLETED
    assert len(result) == COUNT
    _once_each(bank, run_id)
    requests = bank.stats()["requests_by_key"]
    lost = {"held": 2, "end": 3}.get(point)
    if lost is not None:
        # The lost outcome became an unknown the tool's profile settled: asked (no re-send), or
        # re-sent under the same key and deduplicated by the bank.
        assert steps[lost][1] == ("outcome", "unknown") and steps[lost][-1] == ("outcome", "confirmed")
        assert requests[f"{run_id}/{lost}"] == (1 if tool == "pay" else 2)
    if point == "carried":
        # Step 3's intent was durable, its call never made: settled the same way, sent once.
        assert steps[3][-1] == ("outcome", "confirmed")


@pytest.mark.parametrize("defer_any", [False, True], ids=["as-daybook-does", "control-deferred"])
def test_a_tool_without_a_profile_is_not_deferred_and_the_control_shows_why(
    db_url: str, bank: Bank, defer_any: bool
) -> None:
    run_id = f"blind-{defer_any}"
    extra = ["--defer-any"] if defer_any else []
    proc = _child(db_url, "start", run_id, "pay_blind", bank.url, str(COUNT), *POINTS["held"], *extra)
    assert killed(proc), proc.stdout + proc.stderr
    with Daybook(db_url) as book:
        steps = _steps(book, run_id)
        if not defer_any:
            # Today's rule: the outcome was committed before the workflow went on.
            assert steps[2] == [("intent", None), ("outcome", "confirmed")]
            assert len(book.resume(run_id, wait=10)) == COUNT
            _once_each(bank, run_id)
            return
        # Held, the outcome was lost; nothing can ask the bank and a re-send is not known safe.
        assert steps[2] == [("intent", None)]
        with pytest.raises(daybook.DaybookError, match="outcome unknown"):
            book.resume(run_id, wait=10)
        assert book.get_run(run_id).status == RunStatus.NEEDS_ATTENTION
    # No double at the counterparty, but the run does not complete without a person.
    assert bank.stats()["executions_by_key"][f"{run_id}/2"] == 1
    assert f"{run_id}/3" not in bank.stats()["requests_by_key"]


@pytest.fixture
def sqlite_url(tmp_path: Any) -> Iterator[str]:
    yield f"sqlite:///{tmp_path / 'commits.db'}"


def _commits(url: str, tool: str, bank: Bank, defer: bool = True) -> tuple[int, list[list[str]]]:
    """The store commits of a run of COUNT payments, and what another handle saw of the journal
    when each payment returned (the kinds of its step's rows)."""
    seen: list[list[str]] = []

    @daybook.workflow(name=f"watched_{tool}")
    def watched(ctx: daybook.Context) -> None:
        chosen = {"pay": agents.pay, "pay_blind": agents.pay_blind}[tool]
        with Daybook(url) as other:
            for n in range(COUNT):
                ctx.effect(chosen, bank=bank.url, n=n)
                step = n + 1
                seen.append([e.kind for e in other.journal(ctx.run_id) if e.step == step])

    with Daybook(url, defer_outcomes=defer) as book:
        group = book.store.inner.dialect.group  # type: ignore[attr-defined]
        before = group.commits
        book.run(watched, run_id=f"watch-{tool}-{defer}")
        return group.commits - before, seen


def test_a_profileless_tool_still_commits_its_outcome_before_the_workflow_goes_on(
    sqlite_url: str, bank: Bank
) -> None:
    blind, blind_seen = _commits(sqlite_url, "pay_blind", bank)
    settled, settled_seen = _commits(sqlite_url, "pay", bank)
    off, off_seen = _commits(sqlite_url, "pay", bank, defer=False)
    # Each step of the profile-less tool: its outcome durable (seen by another handle) at once.
    assert blind_seen == [["intent", "outcome"]] * COUNT == off_seen
    # A status-query tool's outcome rides with the next row: the other handle sees it later.
    assert settled_seen == [["intent"]] * COUNT
    # One commit per step saved, the last one too (carried by the commit that ends the run).
    assert blind - settled == COUNT
    assert off == blind


def test_a_deferred_outcome_is_concealed_like_any_other(db_url: str, bank: Bank) -> None:
    planted = "sk-deferred-7Hq2Lw9xPzR4"

    @daybook.tool(reconcile=lambda key, args: Confirmed({"token": planted}), secret_result=True)
    def issue(n: int, idempotency_key: str) -> dict[str, str]:
        return {"token": planted, "n": str(n)}

    @daybook.tool(reconcile=lambda key, args: Confirmed({"echo": "x"}))
    def echo(text: str, idempotency_key: str) -> dict[str, str]:
        return {"echo": text}

    @daybook.workflow
    def secrets(ctx: daybook.Context) -> int:
        token = ctx.effect(issue, n=1)  # held, then carried by the next intent
        assert isinstance(token, Secret)
        # A live secret's text quoted in a result: scrubbed from the held row on its way in.
        ctx.effect(echo, text="quoted " + token.reveal()["token"])
        return 2

    with Daybook(db_url) as book:
        assert book.run(secrets, run_id="deferred-secret") == 2
        rows = book.journal("deferred-secret")
    outcomes = [e for e in rows if e.kind == Kind.OUTCOME]
    assert len(outcomes) == 2 and "$secret" in json.dumps(outcomes[0].data["result"])
    assert planted not in store_text(db_url)


def test_a_held_outcome_is_written_before_another_use_of_the_store_and_at_a_suspend(
    db_url: str, bank: Bank
) -> None:
    seen: dict[str, list[str]] = {}

    @daybook.workflow
    def shares(ctx: daybook.Context) -> None:
        with Daybook(db_url) as other:

            def kinds(step: int) -> list[str]:
                return [e.kind for e in other.journal(ctx.run_id) if e.step == step]

            ctx.effect(agents.pay, bank=bank.url, n=1)
            seen["held"] = kinds(1)
            # An entity another process reads: the outcome is durable before it is touched.
            ctx.entity("ledger").record("agent", "paid", {"n": 1})
            seen["entity"] = kinds(1)
            ctx.effect(agents.pay, bank=bank.url, n=2)
        ctx.sleep(3600)  # suspends: the run's lease is given back, the held outcome first

    with Daybook(db_url, inline_wait=0) as book:
        with pytest.raises(daybook.Suspended):
            book.run(shares, run_id="shares")
        rows = [(e.step, e.kind, e.status) for e in book.journal("shares") if e.step in (1, 2)]
    assert seen == {"held": ["intent"], "entity": ["intent", "outcome"]}
    assert rows == [
        (1, "intent", None),
        (1, "outcome", "confirmed"),
        (2, "intent", None),
        (2, "outcome", "confirmed"),
    ]


def test_a_held_outcome_is_never_written_once_the_lease_is_lost(db_url: str, bank: Bank) -> None:
    lose = [True]

    @daybook.workflow(name="fenced")
    def fenced(ctx: daybook.Context) -> list[str]:
        first = ctx.effect(agents.pay, bank=bank.url, n=1)["id"]
        heartbeat = ctx._exe.heartbeat
        if lose and heartbeat is not None:  # once: the resume below keeps its lease
            lose.clear()
            heartbeat.lost = True  # what the heartbeat sets when a renewal is refused
        return [first, ctx.effect(agents.pay, bank=bank.url, n=2)["id"]]

    with Daybook(db_url, lease_ttl=1.0) as book:
        with pytest.raises(daybook.LeaseLost):
            book.run(fenced, run_id="fenced")
        # Neither the held outcome nor anything after it reached the journal.
        assert [(e.step, e.kind) for e in book.journal("fenced") if e.step] == [(1, "intent")]
        assert book.resume("fenced", wait=10) is not None
        steps = _steps(book, "fenced")
    assert steps[1] == [("intent", None), ("outcome", "unknown"), ("outcome", "confirmed")]
    stats = bank.stats()
    assert stats["executions_by_key"] == {"fenced/1": 1, "fenced/2": 1}
    assert stats["requests_by_key"]["fenced/1"] == 1  # asked by status, not re-sent


def test_a_large_outcome_is_not_held(sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A row a codec's envelope could take over the payload limit is written at once, so a
    refusal is the step's own, never blamed on the next row."""
    from daybook.journal import execution

    monkeypatch.setattr(execution, "MAX_PAYLOAD", 400)

    @daybook.tool(idempotent=True)
    def big(n: int, idempotency_key: str) -> str:
        return "x" * (250 if n else 10)

    @daybook.workflow
    def sizes(ctx: daybook.Context) -> None:
        with Daybook(sqlite_url) as other:
            for n in (0, 1):
                ctx.effect(big, n=n)
                seen.append([e.kind for e in other.journal(ctx.run_id) if e.step == n + 1])

    seen: list[list[str]] = []
    with Daybook(sqlite_url) as book:
        book.run(sizes, run_id="sizes")
    assert seen == [["intent"], ["intent", "outcome"]]  # small: held; large: written at once


def test_parallel_async_effects_hold_and_carry_their_outcomes(db_url: str) -> None:
    import asyncio

    @daybook.tool(reconcile=lambda key, args: Confirmed({"name": args["name"]}))
    async def fetch(*, name: str, idempotency_key: str) -> dict[str, str]:
        await asyncio.sleep(0.001 * (3 - "abc".index(name)))  # finishes out of call order
        return {"name": name}

    @daybook.workflow
    async def fan_out(ctx: daybook.Context) -> list[str]:
        results = await asyncio.gather(*(ctx.effect(fetch, name=n) for n in "abc"))
        last = await ctx.effect(fetch, name="a")  # carries whatever is still held
        return [r["name"] for r in results] + [last["name"]]

    with Daybook(db_url) as book:
        assert book.run(fan_out, run_id="fan") == ["a", "b", "c", "a"]
        rows = book.journal("fan")
        assert book.resume("fan") == ["a", "b", "c", "a"]
    assert [e.seq for e in rows] == list(range(1, len(rows) + 1))
    for step in (1, 2, 3, 4):
        assert [(e.kind, e.status) for e in rows if e.step == step] == [
            ("intent", None),
            ("outcome", "confirmed"),
        ]


def test_a_held_outcome_that_cannot_be_written_stops_the_run_with_no_gap(db_url: str) -> None:
    import sqlite3

    import psycopg

    @daybook.tool(reconcile=lambda key, args: Confirmed({"ok": True}))
    def act(idempotency_key: str) -> dict[str, bool]:
        return {"ok": True}

    @daybook.workflow
    def naps(ctx: daybook.Context) -> None:
        ctx.effect(act)
        ctx.entity("ledger").record("agent", "acted")  # the held outcome is written first
        ctx.sleep(3600)

    with Daybook(db_url, inline_wait=0) as book:
        real = book.store.append

        def down(event: daybook.Event) -> None:
            if event.kind == Kind.OUTCOME:  # the held outcome's flush before the entity
                raise (
                    sqlite3.OperationalError("disk I/O error")
                    if db_url.startswith("sqlite")
                    else psycopg.OperationalError("server closed the connection")
                )
            real(event)

        book.store.append = down  # type: ignore[method-assign]
        with pytest.raises(daybook.StoreUnavailable):
            book.run(naps, run_id="naps")
        book.store.append = real  # type: ignore[method-assign]
        rows = book.journal("naps")
        # Nothing after the row that could not be written: no row past a missing seq.
        assert [(e.seq, e.kind) for e in rows] == [(1, "run_started"), (2, "intent")]
        assert book.get_run("naps").status == RunStatus.RUNNING
        with pytest.raises(daybook.Suspended):
            book.resume("naps")
        rows = book.journal("naps")
    assert [e.seq for e in rows] == list(range(1, len(rows) + 1))
    assert [(e.kind, e.status) for e in rows if e.step == 1][-1] == ("outcome", "confirmed")
