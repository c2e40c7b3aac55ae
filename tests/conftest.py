"""Shared fixtures: a real store on each backend, a real bank on 127.0.0.1, child processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
import pytest
from click.testing import CliRunner

from daybook import Daybook
from daybook.cli import main
from daybook.demo.bank import Bank

if TYPE_CHECKING:  # imported when used: the DART child's mail server needs aiosmtpd
    from dart_schedule import Sink

# Cache bytecode, as Python does by default. The suite starts hundreds of Python processes
# (agents, workers, CLI calls, and one pytest worker per xdist node); where the environment sets
# PYTHONDONTWRITEBYTECODE, each of them compiled daybook and the test helpers from source and
# rewrote every test module's asserts again, about a sixth of the suite's CPU time. Loaded before
# xdist starts its workers, so they and every process they start inherit this. The caches go to
# __pycache__ folders, which git ignores.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False
# A store named by the environment would be one store shared by every test, worker and child
# process (the examples and the CLI fall back to it); each test names its own instead.
os.environ.pop("DAYBOOK_DB", None)

HERE = Path(__file__).parent
PG_URL = os.environ.get("DAYBOOK_TEST_PG", "postgresql://127.0.0.1:5432/test")

T = TypeVar("T")


def wait_until(predicate: Callable[[], T], timeout: float = 120.0, interval: float = 0.02) -> T:
    """Poll `predicate` until it returns something truthy, and return that. The timeout only
    guards against a hang (a loaded machine is slow, not wrong): it is generous on purpose."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"gave up after {timeout}s waiting for {predicate!r}")
        time.sleep(interval)


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto` (pyproject's addopts): two workers per CPU this process may use, 2 to 8. Most
    tests wait on child processes, sockets and the database rather than compute, so two per core
    keeps the cores busy; past that a loaded machine only queues them. $PYTEST_XDIST_AUTO_NUM_WORKERS
    still decides when set (or `-n N` on the command line)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS", "").isdigit():
        return int(os.environ["PYTEST_XDIST_AUTO_NUM_WORKERS"])
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(2, min(2 * cpus, 8))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked slow first, each group in file order (the sort is stable): handed out to the
    xdist workers in this order, the long tests start early and the run ends on short ones."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def _pg_available() -> bool:
    try:
        psycopg.connect(PG_URL, connect_timeout=3).close()
        return True
    except psycopg.OperationalError:
        return False


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty store: a SQLite file, or a PostgreSQL schema dropped afterwards."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'journal.db'}"
        return
    if not _pg_available():
        if os.environ.get("DAYBOOK_REQUIRE_PG"):
            pytest.fail(f"PostgreSQL at {PG_URL} is required (DAYBOOK_REQUIRE_PG) but unreachable")
        pytest.skip(f"PostgreSQL at {PG_URL} is not reachable")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    sep = "&" if "?" in PG_URL else "?"
    yield f"{PG_URL}{sep}schema={schema}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def book(db_url: str) -> Iterator[Daybook]:
    with Daybook(db_url, lease_ttl=5.0) as b:
        yield b


@pytest.fixture(scope="session")
def _kept_browser() -> Iterator[dict[str, Any]]:
    """The one Chromium a worker process keeps between its browser tests (started by the first)."""
    kept: dict[str, Any] = {}
    yield kept
    if "driver" in kept:
        kept.pop("driver").quit()


@pytest.fixture
def browser(_kept_browser: dict[str, Any]) -> Iterator[Any]:
    """A real headless Chromium (`webtools.chromium`: skipped when none is installed), as a new
    one starts: no cookies, no cache, no page, no console lines, the usual window. One is kept
    per worker and reset after each test (starting a Chromium per test was a second of CPU each);
    one that fails to reset is quit, and the next test starts another."""
    from webtools import chromium, reset

    if "driver" not in _kept_browser:
        _kept_browser["driver"] = chromium()
    driver = _kept_browser["driver"]
    try:
        yield driver
    finally:
        try:
            reset(driver)
        except Exception:
            _kept_browser.pop("driver", None)
            driver.quit()


@pytest.fixture
def sink() -> Iterator[Sink]:
    """A real SMTP server on 127.0.0.1 that keeps what it is sent (the DART schedule's mail)."""
    from dart_schedule import Sink

    server = Sink().start()
    yield server
    server.stop()


@pytest.fixture
def cal(tmp_path: Path) -> str:
    """A fresh calendar database for the DART schedule (tests/dart_schedule.py)."""
    import dart_schedule as ds

    path = str(tmp_path / "calendar.db")
    ds.calendar(path)
    ds.arm(path, "confirm")  # the producer's confirmation fails once, after its consumers committed
    return path


@pytest.fixture
def bank() -> Iterator[Bank]:
    with Bank() as b:
        yield b


def cli(
    *args: str, db: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m daybook ARGS [--db DB]` in a new process, from the tests' folder."""
    extra = ["--db", db] if db else []
    return subprocess.run(
        [sys.executable, "-m", "daybook", *args, *extra],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=HERE,
        env=env,
    )


def cli_in_process(
    *args: str, db: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`daybook ARGS [--db DB]` through click's runner in this process: the same parsing, store,
    output and exit code as `cli` without starting an interpreter and importing daybook again
    (a third of a second of CPU each; a test looping over many commands took minutes under load).
    For tests about what a command says and does; what a real process adds (argv bytes, the
    working directory, the import path, signals) stays with `cli`. An exception escaping the
    command is put in stderr as the traceback a process would print, so "no Traceback" holds."""
    extra = ["--db", db] if db else []
    result = CliRunner().invoke(main, [*args, *extra], env=env)
    stderr = result.stderr
    if result.exc_info is not None and not issubclass(result.exc_info[0], SystemExit):
        stderr += "Traceback (most recent call last):\n" + "".join(
            traceback.format_exception(*result.exc_info)
        )
    return subprocess.CompletedProcess([*args, *extra], result.exit_code, result.stdout, stderr)


def run_child(*args: str, timeout: float = 300.0) -> subprocess.CompletedProcess[str]:
    """Run tests/child.py in a new Python process (the crash and race tests' agent process)."""
    return subprocess.run(
        [sys.executable, str(HERE / "child.py"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def start_child(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(HERE / "child.py"), *args],
        stdin=subprocess.PIPE if "--ready-go" in args else None,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def release_together(procs: list[subprocess.Popen[str]]) -> None:
    """Wait until every process started with `--ready-go` says `ready`, then let them all go at
    once: a race between processes must not be decided by which one started faster."""
    for proc in procs:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if line.strip() != "ready":
            proc.kill()
            _, err = proc.communicate(timeout=30)
            raise AssertionError(f"child never got ready: {line!r}\n{err}")
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()


def killed(proc: subprocess.CompletedProcess[str] | subprocess.Popen[str]) -> bool:
    return proc.returncode == -signal.SIGKILL


def last_json(text: str) -> object:
    lines = [ln for ln in text.strip().splitlines() if ln.startswith(("{", "[", '"'))]
    return json.loads(lines[-1])


def worker_command(db_url: str, *extra: str) -> list[str]:
    """`daybook worker` over the tests' workflows (tests/agents.py), polling fast."""
    return [
        sys.executable,
        "-m",
        "daybook",
        "worker",
        "--db",
        db_url,
        "--app",
        str(HERE / "agents.py"),
        "--poll",
        "0.05",
        *extra,
    ]


def run_worker(db_url: str, *extra: str, timeout: float = 300.0) -> subprocess.CompletedProcess[str]:
    """A worker in a new process, until no run is left."""
    return subprocess.run(
        worker_command(db_url, "--until-idle", *extra), capture_output=True, text=True, timeout=timeout
    )
