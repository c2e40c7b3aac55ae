"""PostgreSQL: each journal write is one round trip to the server (and so one commit).

A write whose statements depend on one another (insert the journal row only if the header
moved) is sent as one statement (`Dialect.chain`); were it sent statement by statement in a
transaction it would cost BEGIN, each statement and COMMIT, a round trip each. The count is read
from libpq's own protocol trace of the store's connection: a round trip is a run of messages the
client sends before it reads the server's answer."""

from __future__ import annotations

import contextlib
import tempfile
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from conftest import PG_URL, _pg_available
from store.contract import NOW, header, row, started

from daybook.records import Event
from daybook.store import open_store
from daybook.store.postgres import PostgresStore


@pytest.fixture
def pg() -> Iterator[PostgresStore]:
    if not _pg_available():
        pytest.skip(f"PostgreSQL at {PG_URL} is not reachable")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    sep = "&" if "?" in PG_URL else "?"
    store = open_store(f"{PG_URL}{sep}schema={schema}")
    assert isinstance(store, PostgresStore)
    yield store
    store.close()
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@contextlib.contextmanager
def _traced(store: PostgresStore) -> Iterator[list[int]]:
    """Count the round trips the store's connection makes inside the block (into the list)."""
    pgconn = store.dialect.link.conn.pgconn
    counted: list[int] = []
    with tempfile.TemporaryFile("w+") as trace:
        pgconn.trace(trace.fileno())
        pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
        try:
            yield counted
        finally:
            pgconn.untrace()
        trace.seek(0)
        senders = [line.split("\t", 1)[0] for line in trace if line.strip()]
    # Each run of client messages ("F") followed by the server's answer ("B") is one round trip.
    starts = [i for i, who in enumerate(senders) if who == "F" and (i == 0 or senders[i - 1] != "F")]
    counted.append(len(starts))


def trips(store: PostgresStore, write: Callable[[], Any]) -> int:
    with _traced(store) as counted:
        write()
    return counted[0]


def test_each_journal_write_is_one_round_trip(pg: PostgresStore) -> None:
    run = "rt-1"
    assert trips(pg, lambda: pg.create_run(header(run, "running", lease_owner="me"), started(run))) == 1
    assert trips(pg, lambda: pg.append(row(run, 2))) == 1
    assert trips(pg, lambda: pg.set_attributes(row(run, 3), {"a": 1, "b": "x"})) == 1
    assert pg.attributes(run) == {"a": 1, "b": "x"}
    assert trips(pg, lambda: pg.signal(run, "go", '{"n": 1}', "tester", NOW)) == 1
    assert trips(pg, lambda: pg.signal("no-such-run", "go", "1", "tester", NOW)) == 1

    begin = row(run, 4, data={"value": {"tx_id": "tx-1"}})
    epoch: list[int] = []
    assert trips(pg, lambda: epoch.append(pg.tx_begin("tx-1", run, '["a:b"]', 1, 0, begin, NOW))) == 1
    assert begin.data["epoch"] == epoch[0]
    assert pg.load(run)[-1].data == {"value": {"tx_id": "tx-1"}, "epoch": epoch[0]}
    assert trips(pg, lambda: pg.tx_mark("tx-1", "committing", row(run, 5), NOW)) == 1
    assert trips(pg, lambda: pg.tx_mark("tx-1", "committed", row(run, 6), NOW)) == 1
    pg.tx_begin("tx-2", run, '["a:b"]', 1, 0, row(run, 7, data={}), NOW)
    # A commit with nothing to flush: its commit and end rows, with the header, in one write.
    assert trips(pg, lambda: pg.tx_mark("tx-2", "committed", row(run, 9), NOW, row(run, 8))) == 1
    assert pg.tx_rows(run_id=run)[0][4] == "committed"

    assert trips(pg, lambda: pg.entity_claim("ent", "me", 10.0, NOW)) == 1
    assert trips(pg, lambda: pg.entity_record("ent", "me", "note", '{"x": 1}', NOW + 1)) == 1
    assert trips(pg, lambda: pg.entity_release("ent", "me", NOW + 2)) == 1

    ended = Event(run_id=run, seq=10, kind="run_failed", step=None, name="wf", data={}, at=NOW)
    assert trips(pg, lambda: pg.transition(run, ("running",), "failed", None, ended, NOW)) == 1
    run2 = "rt-2"
    pg.create_run(header(run2, "running", lease_owner="me"), started(run2))
    done = Event(run_id=run2, seq=2, kind="run_completed", step=None, name="wf", data={}, at=NOW)
    assert trips(pg, lambda: pg.finish(run2, "me", "completed", 1, None, done, NOW)) == 1


def test_a_refused_write_is_one_round_trip_and_writes_nothing(pg: PostgresStore) -> None:
    run = "rt-3"
    pg.create_run(header(run, "completed"), started(run))
    assert trips(pg, lambda: pg.create_run(header(run, "running"), started(run))) == 1
    ended = Event(run_id=run, seq=2, kind="run_failed", step=None, name="wf", data={}, at=NOW)
    assert trips(pg, lambda: pg.transition(run, ("running",), "failed", None, ended, NOW)) == 1
    assert [e.seq for e in pg.load(run)] == [1]
    assert trips(pg, lambda: pg.tx_mark("no-such-tx", "committed", row(run, 2), NOW)) == 1
    assert trips(pg, lambda: pg.entity_record("nobody", "me", "note", "1", NOW)) == 1
