"""Append-only holds on every path an auditor would try: SQLite `REPLACE`, PostgreSQL `TRUNCATE`,
and DELETE of inbox and commit rows, on a new store and on one upgraded from the previous schema
version; and the least-privilege PostgreSQL role the README documents works as written."""

from __future__ import annotations

import contextlib
import re
import sqlite3
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from conftest import PG_URL, cli, cli_in_process

import daybook
from daybook import Daybook
from daybook.store import postgres_schema, sqlite_schema
from daybook.store.sqlite_schema import statements as _statements

ROOT = Path(__file__).resolve().parents[1]
APPEND_ONLY = ("daybook_events", "daybook_inbox", "daybook_entity_log", "daybook_commits")
# Snapshotted around each bypass; SQLite's REPLACE is tried on every one of them.
REPLACEABLE = (*APPEND_ONLY, "daybook_chunks")
DB_ERRORS = (sqlite3.DatabaseError, psycopg.Error)


@daybook.tool(idempotent=True)
def stamp(*, label: str, idempotency_key: str) -> str:
    return f"{label}:{idempotency_key}"


@daybook.workflow
def audited(ctx: daybook.Context) -> str:
    ctx.decide("value", lambda: 0)
    ctx.wait_for("go", timeout=0)
    value = str(ctx.effect(stamp, label="x"))
    ctx.stream("log").write({"line": 1})
    return value


def _fill(book: Daybook) -> None:
    """One row in each append-only table: a journal, a signal, an entity log entry, a commit."""
    book.run(audited, run_id="r1")
    book.store.signal("r1", "go", '{"n": 1}', "alice", 1.0, any_status=True)
    book.entity("desk").claim("agent-a", 60)
    book.transaction("one record", lambda tx: tx.put("c", "1", {"v": 1}), author="bob", key="tx-1")


def _sql(db_url: str, sql: str) -> list[tuple[object, ...]]:
    if db_url.startswith("sqlite"):
        conn = sqlite3.connect(db_url.removeprefix("sqlite:///"), isolation_level=None)
        try:
            return conn.execute(sql).fetchall()
        finally:
            conn.close()
    base, schema = db_url.split("?schema=")
    with psycopg.connect(base, autocommit=True) as pg:
        pg.execute(f'SET search_path TO "{schema}"')
        cur = pg.execute(sql)  # type: ignore[arg-type]
        return cur.fetchall() if cur.description else []


def _snapshot(db_url: str) -> dict[str, list[tuple[object, ...]]]:
    return {t: _sql(db_url, f"SELECT * FROM {t} ORDER BY 1, 2") for t in REPLACEABLE}


def _replace_statements() -> list[str]:
    # The audit's reproduction: re-insert an existing row with a forged payload.
    return [
        "REPLACE INTO daybook_events SELECT run_id, seq, step, kind, name, key, status, attempt, "
        "fp, '{\"value\":999}', at, parent FROM daybook_events WHERE run_id = 'r1' AND seq = 1",
        "INSERT OR REPLACE INTO daybook_inbox SELECT id, run_id, name, '{\"n\":999}', 'mallory', at "
        "FROM daybook_inbox",
        "REPLACE INTO daybook_entity_log SELECT id, name, at, 'mallory', action, data "
        "FROM daybook_entity_log",
        "REPLACE INTO daybook_commits SELECT commit_id, key, 'forged', 'mallory', at, records "
        "FROM daybook_commits",
        # A new commit row that takes an existing commit's key replaces that row too.
        "REPLACE INTO daybook_commits SELECT 'forged', key, 'forged', 'mallory', at, records "
        "FROM daybook_commits",
        # So does an intent at a new seq that takes an existing intent's idempotency key, and a
        # chunk at a new position that takes an existing chunk's (stream, act, n) key.
        "REPLACE INTO daybook_events SELECT run_id, 999, step, kind, name, key, status, attempt, "
        'fp, \'{"args":{"label":"forged"}}\', at, parent FROM daybook_events '
        "WHERE kind = 'intent'",
        "REPLACE INTO daybook_chunks SELECT run_id, 999, stream, act, n, divergent, "
        "'{\"line\":999}', at FROM daybook_chunks",
    ]


def test_sqlite_replace_cannot_rewrite_journal_inbox_entity_or_commit_rows(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    with Daybook(url) as book:
        _fill(book)
    before = _snapshot(url)
    assert all(before.values())
    for sql in _replace_statements():
        with pytest.raises(sqlite3.IntegrityError, match="append-only: rows are never replaced"):
            _sql(url, sql)
    assert _snapshot(url) == before
    with Daybook(url) as book:
        assert book.replay("r1") == "x:r1/3"


def test_inbox_and_commit_rows_cannot_be_deleted(db_url: str) -> None:
    with Daybook(db_url) as book:
        _fill(book)
    before = _snapshot(db_url)
    for table in ("daybook_inbox", "daybook_commits"):
        with pytest.raises(DB_ERRORS, match="append-only: rows are never deleted"):
            _sql(db_url, f"DELETE FROM {table}")
    assert _snapshot(db_url) == before


def test_postgres_truncate_cannot_empty_an_append_only_table(db_url: str) -> None:
    if db_url.startswith("sqlite"):
        pytest.skip("TRUNCATE is PostgreSQL's (SQLite's DELETE without WHERE is refused by trigger)")
    with Daybook(db_url) as book:
        _fill(book)
    before = _snapshot(db_url)
    for table in APPEND_ONLY:
        with pytest.raises(psycopg.Error, match="append-only: rows are never truncated"):
            _sql(db_url, f"TRUNCATE {table}")
    with pytest.raises(psycopg.Error, match="daybook journal is append-only: rows are never truncated"):
        _sql(db_url, "TRUNCATE daybook_runs, daybook_events")
    assert _snapshot(db_url) == before


def test_postgres_refusals_read_as_sentences(db_url: str) -> None:
    if db_url.startswith("sqlite"):
        pytest.skip("PostgreSQL's trigger messages")
    with Daybook(db_url) as book:
        _fill(book)
    expected = {
        "UPDATE daybook_events SET name = 'x'": "daybook journal is append-only: rows are never updated",
        "DELETE FROM daybook_events": "daybook journal is append-only: rows are never deleted",
        "UPDATE daybook_inbox SET sender = 'x'": "daybook inbox is append-only: rows are never updated",
        "DELETE FROM daybook_entity_log": "daybook entity log is append-only: rows are never deleted",
        "UPDATE daybook_commits SET author = 'x'": (
            "daybook commit log is append-only: rows are never updated"
        ),
    }
    for sql, message in expected.items():
        with pytest.raises(psycopg.Error, match=message):
            _sql(db_url, sql)


def _create_previous_version(db_url: str, previous: int | None = None) -> None:
    """A store exactly as an earlier daybook created it: schema v1 and every migration up to
    `previous` (default SCHEMA_VERSION - 1), stamped with that version."""
    previous = daybook.SCHEMA_VERSION - 1 if previous is None else previous
    if db_url.startswith("sqlite"):
        script = [sqlite_schema.SCHEMA_V1, *sqlite_schema.MIGRATIONS[: previous - 1]]
        statements = [s for part in script for s in _statements(part)]
    else:
        statements = [*postgres_schema.SCHEMA_V1]
        for migration in postgres_schema.MIGRATIONS[: previous - 1]:
            statements.extend(migration)
        base, schema = db_url.split("?schema=")
        with psycopg.connect(base, autocommit=True) as pg:
            pg.execute(f'CREATE SCHEMA "{schema}"')  # type: ignore[arg-type]
    statements += [
        "CREATE TABLE daybook_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        f"INSERT INTO daybook_meta (key, value) VALUES ('schema_version', '{previous}')",
    ]
    for stmt in statements:
        _sql(db_url, stmt)


def test_a_store_of_the_previous_version_is_upgraded_on_open_and_then_refuses_the_bypasses(
    db_url: str,
) -> None:
    _create_previous_version(db_url)
    with Daybook(db_url) as book:
        _fill(book)
        assert book.get_run("r1").status == "completed"
    assert _sql(db_url, "SELECT value FROM daybook_meta WHERE key = 'schema_version'") == [
        (str(daybook.SCHEMA_VERSION),)
    ]
    before = _snapshot(db_url)
    for table in ("daybook_inbox", "daybook_commits"):
        with pytest.raises(DB_ERRORS, match="append-only"):
            _sql(db_url, f"DELETE FROM {table}")
    if db_url.startswith("sqlite"):
        for sql in _replace_statements():
            with pytest.raises(sqlite3.IntegrityError, match="append-only"):
                _sql(db_url, sql)
    else:
        for table in APPEND_ONLY:
            with pytest.raises(psycopg.Error, match="append-only"):
                _sql(db_url, f"TRUNCATE {table}")
    assert _snapshot(db_url) == before
    # A second open finds the store current and changes nothing.
    with Daybook(db_url) as book:
        assert book.get_run("r1").result == "x:r1/3"


def test_staging_is_not_append_only_so_orphans_can_still_be_swept(db_url: str) -> None:
    with Daybook(db_url) as book:
        _fill(book)
        # What a transaction whose process died left behind: staged, never committed.
        book.store.stage("tx-dead", "c", "2", '{"v": 2}', time.time() - 60)
        assert len(book.orphans()) == 1
        assert book.sweep_orphans(older_than=30) == 1
        assert book.orphans() == []
        assert book.record("c", "1") == {"v": 1}


# -- the README's least-privilege role ------------------------------------------------------------


def _recipe() -> str:
    readme = (ROOT / "README.md").read_text()
    found = re.search(r"least-privilege.*?```sql\n(.*?)```", readme, re.S | re.I)
    assert found is not None, "the README documents a least-privilege role recipe in a sql block"
    return found.group(1)


@contextlib.contextmanager
def readme_roles() -> Iterator[tuple[str, str]]:
    """The README's least-privilege recipe, run as written on a fresh schema with roles made for
    this test (dropped afterwards): yields (owner URL, agents' URL), the store migrated."""
    try:
        psycopg.connect(PG_URL, connect_timeout=3).close()
    except psycopg.OperationalError:
        pytest.skip("PostgreSQL is not reachable")
    tag = uuid.uuid4().hex[:8]
    owner, app, schema = f"daybook_owner_{tag}", f"daybook_app_{tag}", f"daybook_{tag}"
    recipe = re.sub(r"\bdaybook_owner\b", owner, _recipe())
    recipe = re.sub(r"\bdaybook_app\b", app, recipe)
    recipe = recipe.replace("SCHEMA daybook", f"SCHEMA {schema}").replace("daybook.", f"{schema}.")
    base = PG_URL.split("?")[0]
    host = base.split("://", 1)[1]
    owner_url = f"postgresql://{owner}@{host}?schema={schema}"
    app_url = f"postgresql://{app}@{host}?schema={schema}"
    lines = recipe.splitlines()
    marker = next(i for i, line in enumerate(lines) if "-- then, as the owner role" in line)
    setup, grants = "\n".join(lines[:marker]), "\n".join(lines[marker + 1 :])
    try:
        with psycopg.connect(base, autocommit=True) as pg:
            for stmt in _split_sql(setup):
                pg.execute(stmt)  # type: ignore[arg-type]
        created = cli("migrate", db=owner_url)
        assert created.returncode == 0, created.stderr
        with psycopg.connect(owner_url.split("?")[0], autocommit=True) as pg:
            for stmt in _split_sql(grants):
                pg.execute(stmt)  # type: ignore[arg-type]
        yield owner_url, app_url
    finally:
        with psycopg.connect(base, autocommit=True) as pg:
            pg.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')  # type: ignore[arg-type]
            for role in (app, owner):
                exists = pg.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
                if exists:
                    pg.execute(f'DROP OWNED BY "{role}"')  # type: ignore[arg-type]
                    pg.execute(f'DROP ROLE "{role}"')  # type: ignore[arg-type]


def test_the_readme_least_privilege_role_runs_daybook_and_cannot_erase_the_journal(tmp_path: Path) -> None:
    with readme_roles() as (_, app_url):
        schema = app_url.rsplit("=", 1)[1]
        with Daybook(app_url, approvers_file=str(tmp_path / "approvers.json")) as book:
            _fill(book)
            book.entity("desk").release("agent-a")
            book.add_approver("carol")  # the approvers file, not the database
            book.store.stage("tx-dead", "c", "3", '{"v": 3}', time.time() - 60)
            assert book.sweep_orphans(older_than=30) == 1
            assert book.get_run("r1").status == "completed"
        with psycopg.connect(app_url.split("?")[0], autocommit=True) as pg:
            pg.execute(f'SET search_path TO "{schema}"')  # type: ignore[arg-type]
            for sql in (
                [f"TRUNCATE {t}" for t in APPEND_ONLY]
                + [f"DELETE FROM {t}" for t in APPEND_ONLY]
                + [
                    "UPDATE daybook_events SET name = 'x'",
                    "DROP TABLE daybook_events",
                    "ALTER TABLE daybook_events DISABLE TRIGGER ALL",
                    "UPDATE daybook_approvers SET token_hash = 'x'",
                    "INSERT INTO daybook_approvers (name, token_hash, created_at) VALUES ('m', 'x', 0)",
                ]
            ):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    pg.execute(sql)  # type: ignore[arg-type]


def _split_sql(script: str) -> list[str]:
    body = "\n".join(line for line in script.splitlines() if not line.strip().startswith("--"))
    return [s.strip() for s in body.split(";") if s.strip()]


def test_a_schema_stamp_that_is_not_a_number_is_refused_with_a_version_error(db_url: str) -> None:
    with Daybook(db_url):
        pass
    _sql(db_url, "UPDATE daybook_meta SET value = 'abc' WHERE key = 'schema_version'")
    for read_only in (False, True):
        with pytest.raises(daybook.SchemaVersionError, match="'abc', which is not a version number"):
            Daybook(db_url, read_only=read_only)
    proc = cli_in_process("runs", db=db_url)
    assert proc.returncode == 1 and "not a version number" in proc.stderr and "Traceback" not in proc.stderr
