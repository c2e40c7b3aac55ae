"""Reading never writes: read commands and `Daybook(read_only=True)` open the store read-only. They
never create a store (a mistyped --db is an error naming it), never upgrade one, leave the file's
bytes and time as they were, read a read-only file in a read-only directory, and are not blocked
by another process's write lock; a write under a held lock says so, without a traceback."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner
from conftest import cli, cli_in_process
from test_append_only import _create_previous_version, _sql

import daybook
from daybook import ConfigError, Daybook, SchemaVersionError, StoreUnavailable
from daybook.cli import main

# Every command that only reads, with its arguments (`r1` exists in the stores made below).
READS = [
    ["runs"],
    ["runs", "--json"],
    ["show", "r1"],
    ["export", "r1"],
    ["export", "r1", "--raw"],
    ["unknowns"],
    ["effects"],
    ["effects", "r1", "--history"],
    ["why", "r1/3"],
    ["versions"],
    ["replay-check", "r1", "--app", "test_read_only"],  # only code named is imported
    ["obligations"],
    ["reconcile"],
    ["orphans"],
    ["approvers", "list"],
    ["approvals"],
    ["budget", "r1"],
    ["leases"],
    ["entity", "desk"],
    ["check"],
]
# The few of them also run as real processes in each test (the rest in-process, through click's
# runner: twenty interpreters per test took a minute on a loaded machine, for the same answer).
IN_A_PROCESS = {"show", "check"}


def _read(args: list[str], db: str) -> subprocess.CompletedProcess[str]:
    return (cli if args[0] in IN_A_PROCESS else cli_in_process)(*args, db=db)


@daybook.tool(idempotent=True)
def post(*, label: str, idempotency_key: str) -> str:
    return f"{label}:{idempotency_key}"


@daybook.workflow
def ledger(ctx: daybook.Context) -> str:
    ctx.decide("plan", lambda: "post it")
    ctx.obligation("settle", owner="ops", due_in=3600)
    return str(ctx.effect(post, label="x"))


def _fill(book: Daybook) -> None:
    book.run(ledger, run_id="r1")
    book.entity("desk").claim("agent-a", 60)
    book.add_approver("carol")


def _fingerprint(path: Path) -> tuple[str, int]:
    return hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns


@pytest.mark.slow
def test_read_commands_leave_the_store_file_byte_for_byte_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "books.db"
    url = f"sqlite:///{path}"
    with Daybook(url) as book:
        _fill(book)
    before = _fingerprint(path)
    for args in READS:
        proc = _read(args, url)
        assert proc.returncode == 0, (args, proc.stderr)
        assert "Traceback" not in proc.stderr
    with Daybook(url, read_only=True) as book:
        assert [r.run_id for r in book.runs()] == ["r1"]
        assert book.export("r1")["run"]["result"] == "x:r1/3"  # type: ignore[index]
    assert _fingerprint(path) == before


@pytest.mark.slow
def test_a_read_command_on_a_missing_store_is_an_error_naming_it_and_creates_nothing(db_url: str) -> None:
    for args in READS:
        proc = _read(args, db_url)
        assert proc.returncode == 1, (args, proc.stdout)
        assert "Traceback" not in proc.stderr
        said = proc.stderr + proc.stdout  # check reports it as a finding, on stdout
        if db_url.startswith("sqlite"):
            assert "journal.db" in said and "does not exist" in said, args
        else:
            assert "no schema" in said, args
    if db_url.startswith("sqlite"):
        assert not Path(db_url.removeprefix("sqlite:///")).exists()
    else:
        base, schema = db_url.split("?schema=")
        with psycopg.connect(base) as pg:
            assert pg.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone() is None
    with pytest.raises(ConfigError, match="never creates"):
        Daybook(db_url, read_only=True)


def test_an_empty_file_or_a_foreign_database_is_not_read_as_a_store(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    proc = cli_in_process("runs", db=f"sqlite:///{empty}")
    assert proc.returncode == 1 and "empty file" in proc.stderr
    assert empty.stat().st_size == 0
    foreign = tmp_path / "other.db"
    sqlite3.connect(foreign).execute("CREATE TABLE t (x)").connection.close()
    proc = cli_in_process("runs", db=f"sqlite:///{foreign}")
    assert proc.returncode == 1 and "not a daybook store" in proc.stderr


def test_a_read_only_handle_refuses_every_write_and_changes_nothing(db_url: str) -> None:
    with Daybook(db_url) as book:
        _fill(book)
    with Daybook(db_url, read_only=True) as book:
        assert book.read_only
        writes = [
            lambda: book.run(ledger, run_id="r2"),
            lambda: book.submit(ledger, run_id="r3"),
            lambda: book.signal("r1", "go"),
            lambda: book.add_approver("dave"),
            lambda: book.entity("desk").claim("agent-b", 60),
            lambda: book.transaction("t", lambda tx: tx.put("c", "1", {})),
            lambda: book.resolve("r1", 3, absent=True),
        ]
        for write in writes:
            with pytest.raises(ConfigError, match="read-only"):
                write()
        assert [r.run_id for r in book.runs()] == ["r1"]
        assert len(book.journal("r1")) == 6
        assert book.store.inbox("r1") == []


def test_reading_a_store_of_the_previous_version_does_not_upgrade_it(db_url: str) -> None:
    previous = str(daybook.SCHEMA_VERSION - 1)
    _create_previous_version(db_url)
    with Daybook(db_url, read_only=True) as book:
        assert book.runs() == []
    proc = cli_in_process("runs", db=db_url)
    assert proc.returncode == 0 and "no runs" in proc.stdout
    assert _sql(db_url, "SELECT value FROM daybook_meta WHERE key = 'schema_version'") == [(previous,)]
    upgraded = cli_in_process("migrate", db=db_url)
    assert upgraded.returncode == 0, upgraded.stderr
    assert _sql(db_url, "SELECT value FROM daybook_meta WHERE key = 'schema_version'") == [
        (str(daybook.SCHEMA_VERSION),)
    ]


@pytest.mark.slow
def test_a_store_too_old_to_read_as_it_is_says_to_migrate_it(db_url: str) -> None:
    with Daybook(db_url) as book:
        _fill(book)
    _sql(db_url, "UPDATE daybook_meta SET value = '5' WHERE key = 'schema_version'")
    with pytest.raises(SchemaVersionError, match="daybook migrate"):
        Daybook(db_url, read_only=True)
    proc = cli_in_process("runs", db=db_url)
    assert proc.returncode == 1 and "daybook migrate" in proc.stderr and "Traceback" not in proc.stderr
    assert cli_in_process("migrate", db=db_url).returncode == 0
    assert "r1" in cli_in_process("runs", db=db_url).stdout


# -- a writer's lock ------------------------------------------------------------------------------


@pytest.fixture
def locked_store(tmp_path: Path) -> Iterator[str]:
    """A store with run r1, and another process holding its write lock (BEGIN IMMEDIATE and an
    uncommitted write) until the test ends."""
    path = tmp_path / "locked.db"
    with Daybook(f"sqlite:///{path}") as book:
        _fill(book)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys; db = sqlite3.connect(sys.argv[1], isolation_level=None); "
            "db.execute('BEGIN IMMEDIATE'); db.execute('UPDATE daybook_runs SET updated_at = 0'); "
            "print('held', flush=True); sys.stdin.read()",
            str(path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    try:
        yield f"sqlite:///{path}"
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)


@pytest.mark.slow
def test_a_held_write_lock_does_not_block_reading(locked_store: str) -> None:
    for args in (["runs"], ["show", "r1"], ["export", "r1"], ["check"], ["unknowns"]):
        proc = _read(args, locked_store)
        assert proc.returncode == 0, (args, proc.stderr)
    assert "r1" in cli("runs", db=locked_store).stdout
    # Opening a current store for writing takes no lock either; only a write waits for it.
    with Daybook(f"{locked_store}?timeout=0.2") as book:
        assert book.get_run("r1").result == "x:r1/3"


def test_a_write_under_a_held_lock_is_a_clear_error_not_a_traceback(locked_store: str) -> None:
    url = f"{locked_store}?timeout=0.2"
    proc = cli("signal", "r1", "go", db=url)
    assert proc.returncode == 1
    assert "locked by another process" in proc.stderr and "Traceback" not in proc.stderr
    with Daybook(url) as book, pytest.raises(StoreUnavailable, match="try again"):
        book.signal("r1", "go")  # (approvers are written to the approvers file, not the store)


def test_a_write_that_waits_longer_than_the_store_timeout_option_allows_is_refused() -> None:
    for bad in ("nan", "-1", "inf", "99999", "soon"):
        with pytest.raises(ConfigError, match="timeout"):
            Daybook(f"sqlite:///{tempfile.gettempdir()}/never-made.db?timeout={bad}")


# -- a read-only file in a read-only directory --------------------------------------------------


def _as_nobody(fn: object) -> dict[str, object]:
    """Run `fn()` (returning JSON) in a forked child that has dropped root for `nobody`, so file
    modes bind as they would for any operator; without root, just call it."""
    assert callable(fn)
    if os.geteuid() != 0:
        return fn()  # type: ignore[no-any-return]
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(read)
        try:
            os.setgid(65534)
            os.setuid(65534)
            out = {"ok": fn()}
        except BaseException as exc:
            out = {"error": f"{type(exc).__name__}: {exc}"}
        os.write(write, json.dumps(out).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        text = pipe.read()
    os.waitpid(pid, 0)
    found: dict[str, object] = json.loads(text)
    assert "error" not in found, found["error"]
    return found["ok"]  # type: ignore[return-value]


def test_a_read_only_file_in_a_read_only_directory_can_be_read() -> None:
    folder = Path(tempfile.mkdtemp(prefix="daybook-ro-"))
    path = folder / "backup.db"
    url = f"sqlite:///{path}"
    try:
        with Daybook(url) as book:
            _fill(book)
        before = _fingerprint(path), sorted(os.listdir(folder))
        path.chmod(0o444)
        folder.chmod(0o555)
        runner = CliRunner()

        def read() -> dict[str, object]:
            with Daybook(url, read_only=True) as book:
                runs = [r.run_id for r in book.runs()]
                kinds = [e.kind for e in book.journal("r1")]
            show = runner.invoke(main, ["show", "r1", "--db", url])
            check = runner.invoke(main, ["check", "--db", url])
            return {"runs": runs, "kinds": kinds, "show": [show.exit_code, show.output],
                    "check": check.exit_code}  # fmt: skip

        found = _as_nobody(read)
        assert found["runs"] == ["r1"]
        assert found["kinds"] == [
            "run_started", "decision", "obligation", "intent", "outcome", "run_completed"
        ]  # fmt: skip
        assert found["show"][0] == 0 and "post" in found["show"][1]  # type: ignore[index]
        assert found["check"] == 0
        assert (_fingerprint(path), sorted(os.listdir(folder))) == before
    finally:
        folder.chmod(0o755)
        shutil.rmtree(folder)
