"""Journal rows written together (`append_batch`: held rows with the run's next row, a
transaction's staged calls): one commit, all of them or none, however many, on both stores. On
PostgreSQL past a few rows they go as the one-row INSERT for each in one pipelined transaction,
and the journal's inserts reuse a cursor kept per connection: both must outlive a connection
the server dropped, and a process killed with the rows sent but not committed leaves none."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import psycopg
import pytest
from conftest import PG_URL, killed

from daybook import Daybook, DuplicateKey
from daybook.records import Event

ROWS = 8  # 96 parameters: past what psycopg parses once and prepares (50)


def _rows(run_id: str, first: int, count: int, keys: str = "k") -> list[Event]:
    return [
        Event(
            run_id,
            seq,
            "intent",
            step=seq,
            name="noop",
            key=f"{run_id}/{keys}{seq}",
            attempt=1,
            fp="f" * 16,
            data={"args": {"i": seq, "text": "é\n\"'%s"}, "decision": None},
            at=time.time() + seq / 7,
        )
        for seq in range(first, first + count)
    ]


def _seen(book: Daybook, run_id: str) -> list[tuple[Any, ...]]:
    return [(e.seq, e.kind, e.key, e.data, e.at) for e in book.store.load(run_id)]


def test_many_rows_written_together_read_back_exactly_or_not_at_all(db_url: str) -> None:
    with Daybook(db_url) as book:
        rows = _rows("r1", 1, ROWS)
        book.store.append_batch(rows)
        assert _seen(book, "r1") == [(e.seq, e.kind, e.key, e.data, e.at) for e in rows]
        # The last row takes an intent's key already journaled: the rows before it are not
        # written either (one commit), and the refusal names the key.
        clash = _rows("r1", ROWS + 1, ROWS, keys="other")
        clash[-1].key = rows[0].key
        with pytest.raises(DuplicateKey):
            book.store.append_batch(clash)
        assert [s[0] for s in _seen(book, "r1")] == list(range(1, ROWS + 1))
        book.store.append_batch(_rows("r1", ROWS + 1, ROWS, keys="again"))  # the connection goes on
        assert len(_seen(book, "r1")) == 2 * ROWS


def _backend_pids(book: Daybook) -> list[int]:
    links = book.store.inner.dialect.links  # type: ignore[attr-defined]
    return [link.conn.info.backend_pid for link in links._all]


def test_a_postgresql_handle_whose_connection_was_dropped_writes_one_row_and_many_once(
    db_url: str,
) -> None:
    if db_url.startswith("sqlite"):
        pytest.skip("a PostgreSQL connection's own trouble")
    with Daybook(db_url) as book:
        book.store.append_batch(_rows("r1", 1, 2))  # one INSERT on the kept cursor
        book.store.append_batch(_rows("r1", 3, ROWS))  # the many-row transaction
        for pid in _backend_pids(book):  # as an idle timeout or a server restart would
            with psycopg.connect(PG_URL, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        time.sleep(0.2)
        book.store.append(_rows("r1", ROWS + 3, 1)[0])
        for pid in _backend_pids(book):
            with psycopg.connect(PG_URL, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        time.sleep(0.2)
        book.store.append_batch(_rows("r1", ROWS + 4, ROWS))
        assert [s[0] for s in _seen(book, "r1")] == list(range(1, 2 * ROWS + 4))


# The child sends a many-row commit and dies once the server has run every row's INSERT (a
# nested pipeline block syncs on exit), before its COMMIT is sent.
_CHILD = """
import os, signal, sys, time
import psycopg
from daybook import Daybook
sys.path.insert(0, sys.argv[2])
from test_journal_batch import _rows

real = psycopg.Cursor.executemany
def executemany(self, query, rows, **kwargs):
    real(self, query, rows, **kwargs)
    with self.connection.pipeline():
        pass
    print("sent", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
psycopg.Cursor.executemany = executemany
book = Daybook(sys.argv[1])
book.store.append_batch(_rows("r1", 1, 2))
book.store.append_batch(_rows("r1", 3, int(sys.argv[3])))
"""


def test_a_process_killed_inside_a_many_row_commit_leaves_none_of_its_rows(db_url: str) -> None:
    if db_url.startswith("sqlite"):
        pytest.skip("SQLite writes the rows in one statement, which a kill cannot cut")
    here = str(__import__("pathlib").Path(__file__).parent)
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, db_url, here, str(ROWS)], capture_output=True, text=True, timeout=120
    )
    assert killed(child), child.stdout + child.stderr
    assert child.stdout.strip() == "sent"  # the rows reached the server before the kill
    with Daybook(db_url) as book:
        assert [s[0] for s in _seen(book, "r1")] == [1, 2]
        book.store.append_batch(_rows("r1", 3, ROWS))  # the seqs are free: nothing half-written
        assert len(_seen(book, "r1")) == ROWS + 2
