"""Store trouble: a run whose writes keep failing backs off while the worker serves others; a
PostgreSQL worker outlives its connections; opening a store is idempotent and safe in parallel."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import agents
import poison_agents
import psycopg
import pytest
from conftest import PG_URL, _pg_available, worker_command

import daybook
from daybook import Daybook, RunStatus, SchemaVersionError, StoreUnavailable
from daybook.worker import Worker


def _sql(db_url: str, *statements: str) -> None:
    if db_url.startswith("sqlite"):
        conn = sqlite3.connect(db_url.removeprefix("sqlite:///"), isolation_level=None)
        for stmt in statements:
            conn.execute(stmt)
        conn.close()
        return
    schema = db_url.rsplit("schema=", 1)[1]
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        conn.execute(f'SET search_path TO "{schema}"')
        for stmt in statements:
            conn.execute(stmt)


def _refuse_journal_writes_of(db_url: str, run_id: str) -> None:
    """The store itself refuses the run's journal rows after its first, as a full disk would."""
    if db_url.startswith("sqlite"):
        _sql(
            db_url,
            f"CREATE TRIGGER stall BEFORE INSERT ON daybook_events WHEN NEW.run_id = '{run_id}' "
            "AND NEW.seq > 1 BEGIN SELECT abs(-9223372036854775807 - 1); END",
        )
        return
    _sql(
        db_url,
        "CREATE FUNCTION stall() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION "
        "'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; END $$ "
        "LANGUAGE plpgsql",
        f"CREATE TRIGGER stall BEFORE INSERT ON daybook_events FOR EACH ROW WHEN "
        f"(NEW.run_id = '{run_id}' AND NEW.seq > 1) EXECUTE FUNCTION stall()",
    )


def _calls(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def _wait_for(check: object, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "gave up waiting"
        time.sleep(0.05)


def test_a_run_whose_writes_keep_failing_backs_off_while_the_worker_serves_other_runs(
    db_url: str, tmp_path: Path
) -> None:
    stalled, healthy = tmp_path / "stalled.log", tmp_path / "healthy.log"
    with Daybook(db_url) as book:
        book.submit(poison_agents.one_step, str(stalled), run_id="stalled")  # first in the queue
        book.submit(poison_agents.one_step, str(healthy), run_id="healthy")
    _refuse_journal_writes_of(db_url, "stalled")
    worker = Worker(db_url, poll=0.01)
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        with Daybook(db_url) as book:
            _wait_for(lambda: book.get_run("healthy").status == RunStatus.COMPLETED)
    finally:
        worker.stop.set()
        thread.join()
    with Daybook(db_url) as book:
        info = book.get_run("stalled")
        # Resumable, given back, and not due before its backoff has passed.
        assert info.status == RunStatus.RUNNING and info.lease_owner is None
        assert info.error["type"] == "StoreUnavailable"
        failures = info.error["failures"]
        assert _calls(stalled) == failures <= 3  # one model call per attempt, no hot loop
        assert info.wake_at - info.updated_at == pytest.approx(2 ** (failures - 1))
        # Each further failure at the same place doubles the wait.
        with pytest.raises(StoreUnavailable):
            book.resume("stalled")
        again = book.get_run("stalled")
        assert again.error["failures"] == failures + 1
        assert again.wake_at - again.updated_at == pytest.approx(2**failures)


@pytest.fixture
def own_database() -> Iterator[str]:
    """A PostgreSQL database of this test's own, so killing its backends touches nobody else."""
    if not _pg_available():
        pytest.fail(f"PostgreSQL at {PG_URL} is required for this test")
    name = f"daybook_heal_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield PG_URL.rsplit("/", 1)[0] + "/" + name
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _terminate_backends(url: str) -> int:
    name = url.rsplit("/", 1)[1]
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s "
            "AND pid <> pg_backend_pid()",
            (name,),
        ).fetchall()
    return len(rows)


# Its teardown drops the test's own database, which waits for a PostgreSQL checkpoint: 97 s
# on a machine with both cores busy (under a second quiet): the suite's timeout allows it.
def test_a_postgresql_worker_goes_on_after_every_backend_of_its_database_is_killed(
    own_database: str,
    bank,  # type: ignore[no-untyped-def]
) -> None:
    url = own_database
    with Daybook(url) as book:
        first = [book.submit(agents.slow_payments, bank.url, 3, 0.05, run_id=f"before-{i}") for i in range(4)]
    proc = subprocess.Popen(
        worker_command(url, "--lease-ttl", "3", "--concurrency", "2"),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        _wait_for(lambda: len(bank.stats()["executions_by_key"]) >= 2)
        assert _terminate_backends(url) >= 3  # the worker's threads and heartbeat, mid-run
        with Daybook(url) as book:
            later = [book.submit(agents.slow_payments, bank.url, 2, 0.0, run_id=f"a-{i}") for i in range(3)]
            _wait_for(
                lambda: all(book.get_run(r).status == RunStatus.COMPLETED for r in first + later),
                seconds=90,
            )
        assert proc.poll() is None  # still serving
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    executions = bank.stats()["executions_by_key"]
    assert len(executions) == 4 * 3 + 3 * 2 and set(executions.values()) == {1}, out


# Its teardown drops the test's own database, which waits for a PostgreSQL checkpoint: 97 s
# on a machine with both cores busy (under a second quiet): the suite's timeout allows it.
def test_a_handle_survives_its_connection_being_killed_between_calls(own_database: str) -> None:
    @daybook.workflow
    def small(ctx: daybook.Context, n: int) -> int:
        return int(ctx.decide("n", lambda: n).value)

    with Daybook(own_database) as book:
        assert book.run(small, 1, run_id="one") == 1
        assert _terminate_backends(own_database) >= 1  # as an idle timeout or a restart would
        assert book.run(small, 2, run_id="two") == 2
        assert book.get_run("one").status == RunStatus.COMPLETED


@pytest.mark.parametrize("damage", ["lowered", "deleted"])
def test_opening_a_store_whose_stamp_was_lowered_or_deleted_upgrades_it_again(
    db_url: str, damage: str
) -> None:
    @daybook.workflow
    def kept(ctx: daybook.Context) -> int:
        return int(ctx.decide("x", lambda: 7).value)

    with Daybook(db_url) as book:
        book.run(kept, run_id="kept")
    if damage == "lowered":
        _sql(db_url, "UPDATE daybook_meta SET value = '2' WHERE key = 'schema_version'")
    else:
        _sql(db_url, "DELETE FROM daybook_meta")
    with Daybook(db_url) as book:
        assert book.get_run("kept").result == 7
        assert book.run(kept, run_id="kept-2") == 7


def test_a_schema_stamp_that_is_not_a_number_is_a_clear_error(db_url: str) -> None:
    Daybook(db_url).close()
    _sql(db_url, "UPDATE daybook_meta SET value = 'abc' WHERE key = 'schema_version'")
    with pytest.raises(SchemaVersionError, match="not a number"):
        Daybook(db_url)


def test_processes_opening_a_new_store_at_once_all_succeed(db_url: str) -> None:
    code = f"import daybook; daybook.Daybook({db_url!r}).close()"
    procs = [
        subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True) for _ in range(4)
    ]
    errors = [p.communicate(timeout=300)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], errors


def test_a_store_with_foreign_daybook_tables_or_a_bad_url_option_is_a_clear_error(db_url: str) -> None:
    _sql(db_url, "CREATE TABLE daybook_runs (id INTEGER)")  # someone else's table, same name
    with pytest.raises(daybook.ConfigError, match="did not make"):
        Daybook(db_url)
    if not db_url.startswith("sqlite"):
        with pytest.raises(daybook.ConfigError, match="cannot connect"):
            Daybook(db_url + "&bogus=1")
