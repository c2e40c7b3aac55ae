"""Workers take pending and orphaned runs; a SIGKILLed worker's runs finish elsewhere, once."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import time

import agents
import psycopg
from conftest import worker_command

import daybook
from daybook import Daybook, RunStatus
from daybook.worker import Worker


def _worker_proc(db_url: str, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        worker_command(db_url, "--lease-ttl", "1", *extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_worker_executes_submitted_runs_until_idle(db_url: str, bank) -> None:  # type: ignore[no-untyped-def]
    with Daybook(db_url) as book:
        ids = [book.submit(agents.payments, bank.url, 3, run_id=f"sub-{i}") for i in range(6)]
        assert {book.get_run(i).status for i in ids} == {RunStatus.PENDING}
        assert book.submit(agents.payments, bank.url, 3, run_id="sub-0") == "sub-0"  # idempotent
    stats = Worker(db_url, concurrency=2, poll=0.01).run(until_idle=True)
    assert stats.completed == 6
    with Daybook(db_url) as book:
        assert {book.get_run(i).status for i in ids} == {RunStatus.COMPLETED}
    executions = bank.stats()["executions_by_key"]
    assert len(executions) == 18 and set(executions.values()) == {1}


def test_runs_of_a_sigkilled_worker_are_finished_by_another_exactly_once(
    db_url: str,
    bank,  # type: ignore[no-untyped-def]
) -> None:
    with Daybook(db_url) as book:
        ids = [book.submit(agents.slow_payments, bank.url, 2, 0.05, run_id=f"w-{i}") for i in range(12)]
    first = _worker_proc(db_url, "--concurrency", "2")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(bank.stats()["executions_by_key"]) < 6:
        time.sleep(0.02)
    first.send_signal(signal.SIGKILL)
    first.wait()
    with Daybook(db_url) as book:
        assert any(book.get_run(i).status != RunStatus.COMPLETED for i in ids)
    second = _worker_proc(db_url, "--until-idle", "--quiet")
    _, err = second.communicate(timeout=300)
    assert second.returncode == 0, err
    with Daybook(db_url) as book:
        assert {book.get_run(i).status for i in ids} == {RunStatus.COMPLETED}
    executions = bank.stats()["executions_by_key"]
    assert len(executions) == 24 and set(executions.values()) == {1}


def test_a_schema_v1_store_is_upgraded_on_open_and_keeps_its_runs(db_url: str) -> None:
    with Daybook(db_url) as book:
        import daybook

        @daybook.workflow
        def kept(ctx: daybook.Context) -> int:
            return ctx.decide("x", lambda: 7).value

        book.run(kept, run_id="old")
    # Make the store look like one written by schema v1 (before the runnable-runs index of v2
    # and the inbox of v3).
    _sql(db_url, "DROP INDEX daybook_runs_runnable")
    _sql(db_url, "DROP INDEX daybook_runs_waking")
    _sql(db_url, "DROP TABLE daybook_inbox")
    _sql(db_url, "UPDATE daybook_meta SET value = '1' WHERE key = 'schema_version'")
    with Daybook(db_url) as book:
        assert book.get_run("old").result == 7
        assert book.store.inbox("old") == []  # the v3 table is back
    assert _sql(db_url, "SELECT value FROM daybook_meta WHERE key = 'schema_version'") == str(
        daybook.SCHEMA_VERSION
    )


def _sql(db_url: str, sql: str) -> object:
    if db_url.startswith("sqlite"):
        conn = sqlite3.connect(db_url.removeprefix("sqlite:///"))
        row = conn.execute(sql).fetchone()
        conn.commit()
        conn.close()
        return row[0] if row else None
    base, schema = db_url.split("?schema=")
    with psycopg.connect(base, autocommit=True) as pg:
        pg.execute(f'SET search_path TO "{schema}"')
        cur = pg.execute(sql)  # type: ignore[arg-type]
        return cur.fetchone()[0] if cur.description else None


@daybook.workflow(name="worker_poison_value")
def _poison_value(ctx: daybook.Context) -> object:
    return ctx.decide("plan", lambda: {"text": "Sure \ud83d"}).value  # half an emoji


@daybook.workflow(name="worker_poison_return")
def _poison_return(ctx: daybook.Context) -> str:
    return "a\ud800"


@daybook.workflow(name="worker_fails_on_purpose")
def _fails(ctx: daybook.Context) -> None:
    raise daybook.WorkflowFailed("no stock")


def test_a_worker_counts_parked_runs_as_needing_attention_not_failed(db_url: str) -> None:
    with Daybook(db_url) as book:
        book.submit(_poison_value, run_id="pv")
        book.submit(_poison_return, run_id="pr")
        book.submit(_fails, run_id="ff")
    said: list[str] = []
    stats = Worker(db_url, poll=0.01, echo=said.append).run(until_idle=True)
    assert (stats.attention, stats.failed) == (2, 1), said
    with Daybook(db_url) as book:
        assert [book.get_run(r).status for r in ("pv", "pr", "ff")] == ["needs_attention"] * 2 + ["failed"]
    assert sum("needs attention" in line for line in said) == 2
