"""The SQL adapter against real databases: a user's SQLite file and a PostgreSQL schema, each with
the daybook store on SQLite and on PostgreSQL. The user's tables are the judge: a batch lands all
together or not at all, once, and compensation undoes it once, across SIGKILLs at every point."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sql_child
from conftest import PG_URL, _pg_available, killed

import daybook
from daybook import Daybook, Kind, RunStatus
from daybook.adapters import sql
from daybook.adapters.sql import Database

HERE = Path(__file__).parent
AMOUNT = 30


@pytest.fixture(params=["sqlite", "postgres"])
def user_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The user's own database (not the store): accounts a=100, b=0 and an empty ledger. The
    ledger has no key, so a batch applied twice would show as two rows."""
    ddl = [
        "CREATE TABLE accounts (id TEXT PRIMARY KEY, balance INTEGER NOT NULL CHECK (balance >= 0))",
        "CREATE TABLE ledger (ref TEXT NOT NULL, amount INTEGER NOT NULL)",
        "INSERT INTO accounts VALUES ('a', 100), ('b', 0)",
    ]
    if request.param == "sqlite":
        path = tmp_path / "user.db"
        with sqlite3.connect(path) as conn:
            for stmt in ddl:
                conn.execute(stmt)
        yield f"sqlite:///{path}"
        return
    if not _pg_available():
        pytest.skip(f"PostgreSQL at {PG_URL} is not reachable")
    schema = f"u_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'SET search_path TO "{schema}"')
        for stmt in ddl:
            conn.execute(stmt)
    sep = "&" if "?" in PG_URL else "?"
    yield f"{PG_URL}{sep}schema={schema}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _state(url: str) -> dict[str, Any]:
    """What the user's database holds, read with the driver directly (not through the adapter)."""
    queries = {
        "balances": "SELECT id, balance FROM accounts ORDER BY id",
        "ledger": "SELECT ref, amount FROM ledger ORDER BY ref",
    }
    if url.startswith("sqlite:"):
        conn: Any = sqlite3.connect(url.removeprefix("sqlite:///"))
        has_markers = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'daybook_applied'").fetchone()
    else:
        base, schema = url.split("?schema=")
        conn = psycopg.connect(base, options=f"-csearch_path={schema}")
        has_markers = conn.execute("SELECT to_regclass('daybook_applied')").fetchone()[0]
    try:
        out: dict[str, Any] = {k: [list(r) for r in conn.execute(q).fetchall()] for k, q in queries.items()}
        out["balances"] = dict(out["balances"])
        out["markers"] = (
            sorted(r[0] for r in conn.execute("SELECT key FROM daybook_applied").fetchall())
            if has_markers
            else []
        )
    finally:
        conn.close()
    return out


UNTOUCHED = {"a": 100, "b": 0}
MOVED = {"a": 100 - AMOUNT, "b": AMOUNT}


def _child(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(HERE / "sql_child.py"), *args], capture_output=True, text=True, timeout=300
    )


# -- behaviour ----------------------------------------------------------------------------------


@daybook.workflow
def sql_peek_between_execute_and_commit(ctx: daybook.Context, url: str) -> Any:
    db = Database(url)
    sql_child._transfer(ctx, db, AMOUNT, "peek")
    buffered = len(db.pending(ctx))
    seen = db.query(ctx, "SELECT id, balance FROM accounts ORDER BY id")
    return {"buffered": buffered, "seen": seen, "commit": db.commit(ctx), "after": len(db.pending(ctx))}


def test_statements_reach_the_database_only_at_commit_all_in_one_transaction(
    db_url: str, user_db: str
) -> None:
    with Daybook(db_url) as book:
        out = book.run(sql_peek_between_execute_and_commit, user_db, run_id="peek")
        # Attaching again (and replaying) answers from the journal: nothing is applied twice.
        assert book.run(sql_peek_between_execute_and_commit, user_db, run_id="peek") == out
        assert book.replay("peek") == out
        effects = [e for e in book.journal("peek") if e.kind == Kind.INTENT]
    assert out["buffered"] == 3 and out["after"] == 0
    assert out["seen"] == [["a", 100], ["b", 0]]  # buffered statements were not visible
    assert out["commit"] == {"key": "peek/2", "rowcounts": [1, 1, 1]}
    assert [(e.name, len(e.data["args"]["statements"])) for e in effects] == [("sql.commit", 3)]
    assert _state(user_db) == {"balances": MOVED, "ledger": [["peek", AMOUNT]], "markers": ["peek/2"]}


@daybook.workflow
def sql_overdraw(ctx: daybook.Context, url: str) -> Any:
    db = Database(url)
    sql_child._transfer(ctx, db, 500, "overdraw")  # the debit breaks the CHECK on a's balance
    try:
        db.commit(ctx)
    except daybook.EffectFailed as exc:
        return {"refused": exc.error["type"], "left": len(db.pending(ctx))}
    return "committed"


def test_a_refused_statement_rolls_back_the_whole_batch(db_url: str, user_db: str) -> None:
    with Daybook(db_url) as book:
        out = book.run(sql_overdraw, user_db, run_id="overdraw")
    assert out["refused"].endswith(("IntegrityError", "CheckViolation")) and out["left"] == 0
    # The credit to b ran before the failing debit; it was rolled back with it.
    assert _state(user_db) == {"balances": UNTOUCHED, "ledger": [], "markers": []}


def test_a_resend_under_an_applied_key_changes_nothing_and_returns_the_first_result(user_db: str) -> None:
    db = Database(user_db)
    p = db.placeholder
    args: dict[str, Any] = {
        "url": user_db,
        "marker_table": "daybook_applied",
        "statements": [{"sql": f"INSERT INTO ledger VALUES ({p}, {p})", "params": ["k", 1], "inverse": None}],
    }
    assert sql.commit.status is not None
    assert sql.commit.status("k1", args) == daybook.Absent()
    first = sql.commit.fn(**args, idempotency_key="k1")
    assert sql.commit.fn(**args, idempotency_key="k1") == first  # idempotent=True is honest
    assert sql.commit.status("k1", args) == daybook.Confirmed(first, ref="k1")
    # The same key with other statements is another run's act (a second store reusing run ids):
    # refused, never mistaken for this batch already done.
    other = {**args, "statements": [{**args["statements"][0], "params": ["k", 2]}]}
    with pytest.raises(daybook.ConfigError, match="different batch"):
        sql.commit.fn(**other, idempotency_key="k1")
    with pytest.raises(daybook.ConfigError, match="different batch"):
        sql.commit.status("k1", other)
    assert _state(user_db)["ledger"] == [["k", 1]]


@daybook.workflow
def sql_undo_all(ctx: daybook.Context, url: str) -> Any:
    db = Database(url)
    sql_child._transfer(ctx, db, AMOUNT, "first")
    db.commit(ctx)
    sql_child._transfer(ctx, db, AMOUNT, "second")
    db.commit(ctx)
    return ctx.compensate().compensated


def test_compensation_runs_each_batchs_inverses_newest_first_once(db_url: str, user_db: str) -> None:
    with Daybook(db_url) as book:
        assert book.run(sql_undo_all, user_db, run_id="undo") == ["undo/2", "undo/1"]
        undos = [e for e in book.journal("undo") if e.kind == Kind.OUTCOME and e.name == "sql.undo"]
        assert book.run(sql_undo_all, user_db, run_id="undo") == ["undo/2", "undo/1"]
    assert [e.data["result"]["rowcounts"] for e in undos] == [[1, 1, 1], [1, 1, 1]]
    assert _state(user_db) == {
        "balances": UNTOUCHED,
        "ledger": [],
        "markers": ["comp/undo/1", "comp/undo/2", "undo/1", "undo/2"],
    }


@daybook.workflow
def sql_undo_without_inverse(ctx: daybook.Context, url: str) -> Any:
    db = Database(url)
    sql_child._transfer(ctx, db, AMOUNT, "kept")
    db.execute(ctx, "DELETE FROM ledger WHERE amount < 0")  # no inverse given
    db.commit(ctx)
    return ctx.compensate().compensated


def test_a_batch_with_a_statement_without_inverse_is_reported_not_half_undone(
    db_url: str, user_db: str
) -> None:
    with Daybook(db_url) as book:
        with pytest.raises(daybook.RunStuck, match="no inverse for \\['stuck/1'\\]"):
            book.run(sql_undo_without_inverse, user_db, run_id="stuck")
        assert book.get_run("stuck").status == RunStatus.STUCK
        names = [e.name for e in book.journal("stuck") if e.kind == Kind.INTENT]
    assert names == ["sql.commit_irreversible"]
    assert sql.commit_irreversible.effect_class == "irreversible"
    assert sql.commit.effect_class == "compensable" and sql.commit.bufferable
    assert _state(user_db) == {"balances": MOVED, "ledger": [["kept", AMOUNT]], "markers": ["stuck/1"]}


def test_input_the_adapter_cannot_use_is_refused_before_anything_is_buffered(tmp_path: Path) -> None:
    with pytest.raises(daybook.ConfigError, match="unsupported database URL"):
        Database("mysql://localhost/x")
    with pytest.raises(daybook.ConfigError, match="not a plain SQL identifier"):
        Database(f"sqlite:///{tmp_path / 'x.db'}", marker_table="x; DROP TABLE y")
    db = Database(f"sqlite:///{tmp_path / 'x.db'}")

    @daybook.workflow(name="sql_bad_input")
    def bad_input(ctx: daybook.Context) -> Any:
        refused = []
        for bad in (
            lambda: db.execute(ctx, "commit"),
            lambda: db.execute(ctx, "INSERT INTO t VALUES (?)", [object()]),  # type: ignore[list-item]
            lambda: db.execute(ctx, "INSERT INTO t VALUES (1)", inverse=["DELETE FROM t"]),  # type: ignore[arg-type]
        ):
            try:
                bad()
            except daybook.ConfigError as exc:
                refused.append(str(exc))
        return {"refused": refused, "pending": db.pending(ctx)}

    with Daybook(f"sqlite:///{tmp_path / 'journal.db'}") as book:
        out = book.run(bad_input, run_id="bad-input")
    assert len(out["refused"]) == 3
    for message, complaint in zip(
        out["refused"],
        ["COMMIT is not allowed", "not str, int, float, bool or None", "inverse must be SQL"],
        strict=True,
    ):
        assert complaint in message
    assert out["pending"] == []


# -- crashes ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "point",
    ["after_intent_before_transaction", "mid_transaction", "after_db_commit_before_outcome"],
)
def test_a_commit_killed_at_any_point_is_applied_exactly_once_on_resume(
    db_url: str, user_db: str, point: str
) -> None:
    kill = {
        "after_intent_before_transaction": ["--kill-after", "intent:1"],
        "mid_transaction": ["--kill-at-statement", "2"],  # 2 of 3 statements ran, uncommitted
        "after_db_commit_before_outcome": ["--kill-before", "outcome:1"],
    }[point]
    run_id = f"crash-{point}"
    proc = _child(db_url, "start", run_id, "transfer", json.dumps([user_db, AMOUNT]), *kill)
    assert killed(proc), proc.stdout + proc.stderr

    landed = point == "after_db_commit_before_outcome"
    assert _state(user_db) == (
        {"balances": MOVED, "ledger": [[f"{run_id}/t", AMOUNT]], "markers": [f"{run_id}/1"]}
        if landed
        else {"balances": UNTOUCHED, "ledger": [], "markers": []}  # all or nothing
    )

    resumed = _child(db_url, "resume", run_id)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert json.loads(resumed.stdout)["result"] == {"key": f"{run_id}/1", "rowcounts": [1, 1, 1]}
    assert _state(user_db) == {
        "balances": MOVED,
        "ledger": [[f"{run_id}/t", AMOUNT]],
        "markers": [f"{run_id}/1"],
    }
    with Daybook(db_url) as book:
        events = book.journal(run_id)
    assert [e.status for e in events if e.kind == Kind.OUTCOME] == ["unknown", "confirmed"]
    # The unknown is settled by the marker table: confirmed as it stands if the batch landed,
    # else sent again under the same key.
    confirmed = [e for e in events if e.kind == Kind.OUTCOME][-1]
    assert bool(confirmed.data.get("resolved_by")) is landed
    assert len([e for e in events if e.kind == Kind.ATTEMPT]) == (0 if landed else 1)


@pytest.mark.parametrize(
    "point",
    ["after_undo_intent", "mid_undo_transaction", "after_undo_commit_before_outcome"],
)
def test_a_compensation_killed_at_any_point_undoes_the_batch_exactly_once(
    db_url: str, user_db: str, point: str
) -> None:
    kill = {
        "after_undo_intent": ["--kill-after", "intent:2"],
        "mid_undo_transaction": ["--kill-at-statement", "5"],  # 3 forward, then 2 of 3 inverses
        "after_undo_commit_before_outcome": ["--kill-before", "outcome:2"],
    }[point]
    run_id = f"comp-{point}"
    proc = _child(db_url, "start", run_id, "transfer_then_undo", json.dumps([user_db, AMOUNT]), *kill)
    assert killed(proc), proc.stdout + proc.stderr
    before = _state(user_db)
    if point == "after_undo_commit_before_outcome":
        assert before["balances"] == UNTOUCHED and before["ledger"] == []
    else:
        assert before["balances"] == MOVED and before["markers"] == [f"{run_id}/1"]

    resumed = _child(db_url, "resume", run_id)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert json.loads(resumed.stdout)["result"]["compensated"] == [f"{run_id}/1"]
    assert _state(user_db) == {
        "balances": UNTOUCHED,
        "ledger": [],
        "markers": sorted([f"comp/{run_id}/1", f"{run_id}/1"]),
    }
