"""Group commit keeps each write's own fate: a failing write in a shared batch fails alone."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from daybook.store.group import GroupCommit, _Job


def _conn(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE t (k TEXT PRIMARY KEY)")
    return conn


def test_one_failing_write_in_a_shared_batch_fails_alone(tmp_path: Path) -> None:
    conn = _conn(tmp_path / "g.db")
    conn.execute("INSERT INTO t VALUES ('taken')")
    group = GroupCommit(conn)
    batch = [
        _Job(lambda db, k=k: db.execute("INSERT INTO t VALUES (?)", (k,)), False) for k in ("a", "taken", "b")
    ]
    group._commit(batch)
    assert batch[0].error is None and batch[2].error is None
    assert isinstance(batch[1].error, sqlite3.IntegrityError)
    assert sorted(r[0] for r in conn.execute("SELECT k FROM t")) == ["a", "b", "taken"]


def test_many_threads_writing_each_see_their_own_result(tmp_path: Path) -> None:
    conn = _conn(tmp_path / "h.db")
    group = GroupCommit(conn)
    errors: list[str] = []

    def writer(i: int) -> None:
        for j in range(50):
            key = f"{i}-{j}" if j != 25 else "dup"  # every thread collides once on "dup"
            try:
                group.write(lambda db, key=key: db.execute("INSERT INTO t VALUES (?)", (key,)))
            except sqlite3.IntegrityError:
                errors.append(key)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rows = conn.execute("SELECT count(*) FROM t").fetchone()[0]
    assert rows == 16 * 49 + 1  # every unique key once, "dup" once
    assert errors == ["dup"] * 15
    assert group.writes == 16 * 50


def test_a_write_that_raises_does_not_leave_the_group_stuck(tmp_path: Path) -> None:
    group = GroupCommit(_conn(tmp_path / "i.db"))
    with pytest.raises(ZeroDivisionError):
        group.write(lambda db: 1 / 0)
    assert group.write(lambda db: db.execute("INSERT INTO t VALUES ('ok')").rowcount) == 1
