"""Edge cases a production user hits: doubtful retries, a failing store, lost leases, async replay."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time

import psycopg
import pytest

import daybook
from daybook import Daybook, Kind, NeedsAttention, RunStatus


def test_a_refusal_after_an_unknown_attempt_is_not_reported_as_a_certain_failure(
    book: Daybook,
) -> None:
    calls: list[str] = []

    @daybook.tool(idempotent=True, retry=daybook.Retry(max_attempts=2, backoff=0))
    def wire(*, idempotency_key: str) -> str:
        calls.append(idempotency_key)
        if len(calls) == 1:
            raise TimeoutError("no answer")  # may have landed
        raise ConnectionRefusedError("bank down")

    @daybook.workflow
    def doubtful(ctx: daybook.Context) -> str:
        try:
            return ctx.effect(wire)
        except daybook.EffectFailed:
            return "took another path"  # would be a second wire if the first landed

    with pytest.raises(NeedsAttention, match="attempts are used"):
        book.run(doubtful, run_id="doubt")
    assert calls == ["doubt/1", "doubt/1"]


def test_an_operator_absent_resolution_overrides_the_attempt_limit(book: Daybook) -> None:
    sent: list[str] = []

    @daybook.tool(retry=daybook.Retry(max_attempts=1))
    def once(*, idempotency_key: str) -> str:
        sent.append(idempotency_key)
        if len(sent) == 1:
            raise TimeoutError("no answer")
        return "ok"

    @daybook.workflow
    def once_wf(ctx: daybook.Context) -> str:
        return ctx.effect(once)

    with pytest.raises(NeedsAttention):
        book.run(once_wf, run_id="absent-limit")
    book.resolve("absent-limit", 1, absent=True, by="ops", evidence="bank: no such key")
    assert book.resume("absent-limit") == "ok"
    assert sent == ["absent-limit/1", "absent-limit/1"]


def test_a_failing_store_write_leaves_the_run_resumable_not_failed(db_url: str) -> None:
    sent: list[str] = []

    @daybook.tool(idempotent=True)
    def post(*, idempotency_key: str) -> str:
        sent.append(idempotency_key)
        return "posted"

    @daybook.workflow
    def posting(ctx: daybook.Context) -> str:
        return ctx.effect(post)

    with Daybook(db_url) as book:
        real, real_finish = book.store.append, book.store.finish

        def down(*_args: object) -> None:
            raise (
                sqlite3.OperationalError("database is locked")
                if db_url.startswith("sqlite")
                else psycopg.OperationalError("server closed the connection")
            )

        def flaky(event: daybook.Event) -> None:
            if event.kind == Kind.OUTCOME:
                down()
            real(event)

        # The idempotent tool's confirmed outcome is held for the run's next row, here its end
        # (one commit, docs/stores.md): the store fails wherever that outcome goes.
        book.store.append = flaky  # type: ignore[method-assign]
        book.store.finish = down  # type: ignore[method-assign,assignment]
        with pytest.raises(daybook.StoreUnavailable, match="resume"):
            book.run(posting, run_id="store-down")
        book.store.append, book.store.finish = real, real_finish  # type: ignore[method-assign]
        info = book.get_run("store-down")
        assert info.status == RunStatus.RUNNING and info.lease_owner is None
        assert book.resume("store-down") == "posted"
    assert sent == ["store-down/1", "store-down/1"]  # re-sent under the same key (idempotent)


def test_a_process_that_lost_its_lease_cannot_record_the_end(db_url: str) -> None:
    with Daybook(db_url) as a, Daybook(db_url) as b:

        @daybook.workflow(name="contested")
        def contested(ctx: daybook.Context) -> int:
            # Another host takes the run over (as if this process had stalled past its lease).
            b.store.claim(ctx.run_id, "otherhost:1:1:x:y:z", 60, time.time() + 1000, None)
            return 1

        with pytest.raises(daybook.LeaseLost):
            a.run(contested, run_id="contested")
        assert [e.kind for e in a.journal("contested")] == ["run_started"]


def test_a_run_taken_from_needs_attention_shows_as_running_while_it_runs(book: Daybook) -> None:
    seen: list[str] = []
    state = {"fail": True}

    @daybook.workflow(name="flip")
    def flip(ctx: daybook.Context) -> str:
        seen.append(book.get_run(ctx.run_id).status)
        if state["fail"]:
            return ctx.decide("x", lambda: object()).value  # not JSON: needs attention
        return "ok"

    with pytest.raises(daybook.NotSerializable):
        book.run(flip, run_id="flip")
    assert book.get_run("flip").status == RunStatus.NEEDS_ATTENTION
    state["fail"] = False

    @daybook.workflow(name="flip")
    def fixed(ctx: daybook.Context) -> str:
        seen.append(book.get_run(ctx.run_id).status)
        return "ok"

    assert book.resume("flip") == "ok"
    assert seen == ["running", "running"]


def test_an_async_decision_that_failed_fails_at_await_on_replay_too(book: Daybook) -> None:
    async def bad() -> int:
        raise ValueError("model timed out")

    async def good() -> int:
        return 1

    @daybook.workflow
    async def gathered(ctx: daybook.Context) -> int:
        a = ctx.decide("a", bad)
        b = ctx.decide("b", good)
        with contextlib.suppress(daybook.StepFailed):
            await a
        return (await b).value + (await ctx.decide("c", good)).value

    assert book.run(gathered, run_id="async-fail") == 2
    assert book.replay("async-fail") == 2


def test_run_async_accepts_a_sync_workflow(book: Daybook) -> None:
    @daybook.workflow
    def plain(ctx: daybook.Context) -> int:
        return ctx.decide("one", lambda: 1).value

    assert asyncio.run(book.run_async(plain, run_id="plain")) == 1
    assert book.get_run("plain").status == RunStatus.COMPLETED
