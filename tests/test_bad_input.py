"""Bad input gives a clear error that says what to do, and leaves the journal as it was."""

from __future__ import annotations

import os
import pathlib
import sqlite3
import subprocess
import sys

import psycopg
import pytest

import daybook
from daybook import (
    CorruptJournal,
    Daybook,
    NonDeterminismError,
    NotSerializable,
    RunNotFound,
    SchemaVersionError,
)


class Crash(BaseException):
    """Leaves a run mid-way as a crash would (not journaled, lease released)."""


def _stopped_run(book: Daybook, name: str, steps: list[str]) -> daybook.Workflow[object]:
    """Register workflow `name` doing `steps` ('a', 'b', ...) as decisions, crash after them."""

    @daybook.workflow(name=name)
    def wf(ctx: daybook.Context) -> list[object]:
        for s in steps:
            ctx.decide(s, lambda s=s: s.upper())
        raise Crash()

    with pytest.raises(Crash):
        book.run(wf, run_id=name)
    return wf  # type: ignore[no-any-return]


def test_swapped_steps_raise_non_determinism_naming_position_and_both_steps(
    book: Daybook,
) -> None:
    _stopped_run(book, "swap", ["a", "b"])
    before = book.journal("swap")

    @daybook.workflow(name="swap")
    def changed(ctx: daybook.Context) -> object:
        ctx.decide("b", lambda: "B")
        ctx.decide("a", lambda: "A")
        return None

    with pytest.raises(NonDeterminismError) as err:
        book.resume("swap")
    assert "step 1" in str(err.value) and "'a'" in str(err.value) and "'b'" in str(err.value)
    assert book.journal("swap") == before
    assert book.get_run("swap").status == "needs_attention"


def test_changed_arguments_and_removed_steps_are_caught(book: Daybook) -> None:
    _stopped_run(book, "args", ["a", "b"])
    before = book.journal("args")

    @daybook.workflow(name="args")
    def changed_args(ctx: daybook.Context) -> object:
        return ctx.decide("a", lambda x: x, 42).value

    with pytest.raises(NonDeterminismError, match="arguments differ"):
        book.resume("args")

    @daybook.workflow(name="args")
    def fewer(ctx: daybook.Context) -> object:
        return ctx.decide("a", lambda: "A").value

    with pytest.raises(NonDeterminismError, match="journal holds step 2"):
        book.resume("args")
    assert book.journal("args") == before


def test_a_non_serialisable_decision_value_names_the_step_and_writes_nothing(
    book: Daybook,
) -> None:
    @daybook.workflow
    def bad_value(ctx: daybook.Context) -> object:
        ctx.decide("ok", lambda: 1)
        return ctx.decide("when", lambda: object()).value

    with pytest.raises(NotSerializable, match="step 2 decision 'when'"):
        book.run(bad_value, run_id="bad-value")
    assert [e.kind for e in book.journal("bad-value")] == ["run_started", "decision"]


def test_tuples_and_sets_are_refused_rather_than_silently_changed(book: Daybook) -> None:
    @daybook.workflow
    def tuple_value(ctx: daybook.Context) -> object:
        return ctx.decide("pair", lambda: (1, 2)).value

    with pytest.raises(NotSerializable, match="round trip"):
        book.run(tuple_value, run_id="tuple")
    with pytest.raises(NotSerializable, match="non-string key 1"):
        book.run(tuple_value, {1: "a"}, run_id="int-key")
    with pytest.raises(NotSerializable, match="input"):
        book.run(tuple_value, {1, 2}, run_id="set-input")


def test_unknown_run_id_says_how_to_list_runs(book: Daybook) -> None:
    with pytest.raises(RunNotFound, match="daybook runs"):
        book.resume("no-such-run")
    with pytest.raises(RunNotFound):
        book.export("no-such-run")


def _sql(db_url: str, sql: str, params: tuple[object, ...] = ()) -> None:
    if db_url.startswith("sqlite"):
        conn = sqlite3.connect(db_url.removeprefix("sqlite:///"))
        conn.execute(sql.replace("%s", "?"), params)
        conn.commit()
        conn.close()
        return
    base, schema = db_url.split("?schema=")
    with psycopg.connect(base, autocommit=True) as pg:
        pg.execute(f'SET search_path TO "{schema}"')
        pg.execute(sql, params)  # type: ignore[arg-type]


def test_a_corrupt_row_is_reported_with_its_position(db_url: str, book: Daybook) -> None:
    _stopped_run(book, "corrupt", ["a"])
    _sql(
        db_url,
        "INSERT INTO daybook_events (run_id, seq, step, kind, name, attempt, data, at) "
        "VALUES (%s, 3, 2, 'teleport', 'x', 0, '{}', 0)",
        ("corrupt",),
    )
    with pytest.raises(CorruptJournal, match="seq 3: unknown record kind 'teleport'"):
        book.resume("corrupt")
    assert book.get_run("corrupt").lease_owner is None  # the failed resume let go of the run


def test_invalid_json_in_a_sqlite_row_is_corrupt_not_a_crash(tmp_path) -> None:  # type: ignore[no-untyped-def]
    url = f"sqlite:///{tmp_path / 'j.db'}"
    with Daybook(url) as book:
        _stopped_run(book, "badjson", ["a"])
    _sql(
        url,
        "INSERT INTO daybook_events (run_id, seq, step, kind, name, attempt, data, at) "
        "VALUES ('badjson', 3, 2, 'decision', 'b', 0, '{not json', 0)",
    )
    with Daybook(url) as book, pytest.raises(CorruptJournal, match="not valid JSON"):
        book.journal("badjson")


def test_a_store_from_a_newer_daybook_is_refused_with_a_version_error(db_url: str) -> None:
    with Daybook(db_url) as book:
        book.runs()
    _sql(db_url, "UPDATE daybook_meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(SchemaVersionError, match=r"schema v99.*upgrade daybook"):
        Daybook(db_url)


def test_bad_store_urls_and_options_are_explained() -> None:
    with pytest.raises(daybook.ConfigError, match="unsupported store URL"):
        Daybook("mysql://localhost/x")
    with pytest.raises(daybook.ConfigError, match="synchronous"):
        Daybook("sqlite:///x.db?synchronous=sometimes")
    with pytest.raises(daybook.ConfigError, match="does not exist"):
        Daybook("sqlite:////no/such/dir/x.db")
    with pytest.raises(daybook.ConfigError, match="max_attempts"):
        daybook.Retry(max_attempts=0)


def test_a_tool_without_an_idempotency_key_parameter_is_refused() -> None:
    with pytest.raises(daybook.ConfigError, match="idempotency_key"):

        @daybook.tool
        def keyless(amount: int) -> None:
            return None


def test_two_effects_with_one_key_are_refused(book: Daybook) -> None:
    @daybook.tool
    def t(*, idempotency_key: str) -> int:
        return 1

    @daybook.workflow
    def dup(ctx: daybook.Context) -> None:
        ctx.effect(t, key="same")
        ctx.effect(t, key="same")

    with pytest.raises(daybook.DuplicateKey, match="steps 1 and 2"):
        book.run(dup, run_id="dup")

    @daybook.workflow
    def dup_other_run(ctx: daybook.Context) -> None:
        ctx.effect(t, key="same")

    with pytest.raises(daybook.DuplicateKey, match="already used by another effect"):
        book.run(dup_other_run, run_id="dup2")


def test_an_empty_daybook_db_is_an_error_never_a_new_daybook_db(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {**os.environ, "DAYBOOK_DB": ""}
    for command in (["migrate"], ["runs"], ["worker", "--until-idle"]):
        argv = [sys.executable, "-m", "daybook", *command]
        done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        assert "empty" in done.stderr and "DAYBOOK_DB" in done.stderr and "Traceback" not in done.stderr
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAYBOOK_DB", " ")
    with pytest.raises(daybook.ConfigError, match=r"\$DAYBOOK_DB is set but empty"):
        Daybook()
    monkeypatch.delenv("DAYBOOK_DB")
    with pytest.raises(daybook.ConfigError, match="store URL"):
        Daybook("")
    assert not (tmp_path / "daybook.db").exists()
