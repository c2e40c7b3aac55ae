"""A PostgreSQL worker whose threads cannot get a connection at first (the role's CONNECTION
LIMIT reached, as with `FATAL: too many clients`) says so on stderr, keeps trying, and once the
connections free up works with all its threads; a worker holds `--concurrency` + 1 connections
(the README's count)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from conftest import HERE, PG_URL, wait_until

from daybook import Daybook, RunStatus

pytestmark = pytest.mark.slow
THREADS = 3


@pytest.fixture
def limited_role() -> Iterator[tuple[str, str]]:
    """A role allowed THREADS + 1 connections, owning a fresh schema; yields (role, its URL)."""
    try:
        psycopg.connect(PG_URL, connect_timeout=3).close()
    except psycopg.OperationalError:
        pytest.skip("PostgreSQL is not reachable")
    role = f"dbk_lim_{uuid.uuid4().hex[:8]}"
    base = PG_URL.split("?")[0]
    with psycopg.connect(base, autocommit=True) as pg:
        pg.execute(f"CREATE ROLE {role} LOGIN CONNECTION LIMIT {THREADS + 1}")  # type: ignore[arg-type]
        pg.execute(f"CREATE SCHEMA {role} AUTHORIZATION {role}")  # type: ignore[arg-type]
    host = base.split("://", 1)[1]
    try:
        yield role, f"postgresql://{role}@{host}?schema={role}"
    finally:
        with psycopg.connect(base, autocommit=True) as pg:
            pg.execute(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{role}'")  # type: ignore[arg-type]
            pg.execute(f"DROP SCHEMA IF EXISTS {role} CASCADE")  # type: ignore[arg-type]
            pg.execute(f"DROP ROLE IF EXISTS {role}")  # type: ignore[arg-type]


def _connections(role: str) -> int:
    with psycopg.connect(PG_URL.split("?")[0], autocommit=True) as pg:
        row = pg.execute("SELECT count(*) FROM pg_stat_activity WHERE usename = %s", (role,)).fetchone()
    return int(row[0]) if row else 0


def _worker(url: str, *extra: str) -> tuple[subprocess.Popen[str], list[str]]:
    """`daybook worker` over tests/crowd_app.py; its stderr lines collected as they come."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "daybook", "worker", "--db", url, "--app", str(HERE / "crowd_app.py"),
         "--concurrency", str(THREADS), "--poll", "0.05", "--no-schedules", *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=HERE,
    )  # fmt: skip
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(proc.stderr or ()), daemon=True).start()
    return proc, lines


def test_a_worker_whose_threads_cannot_connect_at_first_works_with_all_of_them_later(
    limited_role: tuple[str, str], tmp_path: Path
) -> None:
    import crowd_app

    _, url = limited_role
    with Daybook(url) as book:
        runs = [
            book.submit(crowd_app.together, str(tmp_path), f"c{i}", THREADS, run_id=f"c{i}")
            for i in range(THREADS)
        ]
    # Take all the role's connections but one: the worker opens its shared handle, and its
    # work threads are refused (FATAL: too many connections for role).
    held = [psycopg.connect(url.split("?")[0]) for _ in range(THREADS)]
    worker, said = _worker(url, "--until-idle")
    try:
        wait_until(lambda: sum("cannot open its store connection" in line for line in said) >= THREADS, 60)
        assert f"0 of {THREADS} threads working" in "".join(said)
        time.sleep(1.0)  # refused for a while: the threads are still alive and trying
        for conn in held:
            conn.close()
        assert worker.wait(timeout=120) == 0, "".join(said)
    finally:
        if worker.poll() is None:
            worker.kill()
    assert f"{THREADS} of {THREADS} threads working" in "".join(said)
    with Daybook(url) as book:
        assert {book.get_run(r).status for r in runs} == {RunStatus.COMPLETED}, "".join(said)
    done = {p.name: p.read_text().splitlines() for p in tmp_path.glob("*.done")}
    assert sorted(done) == [f"c{i}.done" for i in range(THREADS)]  # all ran at once, each once
    assert all(len(lines) == 1 for lines in done.values())


def test_a_postgresql_worker_holds_its_concurrency_plus_one_connections(
    limited_role: tuple[str, str],
) -> None:
    role, url = limited_role
    Daybook(url).close()  # the tables, made before the worker starts
    worker, said = _worker(url)
    try:
        wait_until(lambda: _connections(role) == THREADS + 1, 60)
        time.sleep(1.0)
        assert _connections(role) == THREADS + 1, "".join(said)
        assert not said, "".join(said)  # nothing refused at this limit: the count is exact
    finally:
        worker.terminate()
        worker.wait(timeout=300)
