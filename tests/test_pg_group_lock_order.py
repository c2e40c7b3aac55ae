"""A PostgreSQL group batch takes the epoch lock before anything else, so another process that
holds the lock and then needs a row the batch writes does not deadlock with it (PostgreSQL would
break the cycle only after its 1 s deadlock timeout, and the batch would be resent alone)."""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Iterator

import psycopg
import pytest

from daybook.store.postgres_group import StatementGroup, _Job
from daybook.store.postgres_link import Links

PG_URL = os.environ.get("DAYBOOK_TEST_PG", "postgresql://127.0.0.1:5432/test")
LOCK = "SELECT pg_advisory_xact_lock(hashtext(current_schema()))"


@pytest.fixture
def schema() -> Iterator[str]:
    try:
        conn = psycopg.connect(PG_URL, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError:
        if os.environ.get("DAYBOOK_REQUIRE_PG"):
            pytest.fail(f"PostgreSQL at {PG_URL} is required (DAYBOOK_REQUIRE_PG) but unreachable")
        pytest.skip(f"PostgreSQL at {PG_URL} is not reachable")
    name = f"t_{uuid.uuid4().hex[:12]}"
    with conn:
        conn.execute(f'CREATE SCHEMA "{name}"')
        conn.execute(f'CREATE TABLE "{name}".t (k INT PRIMARY KEY, v INT NOT NULL)')
        conn.execute(f'INSERT INTO "{name}".t VALUES (1, 0)')
        yield name
        conn.execute(f'DROP SCHEMA "{name}" CASCADE')


def test_a_batch_waiting_for_the_epoch_lock_holds_no_row_another_lock_holder_needs(schema: str) -> None:
    group = StatementGroup(Links(PG_URL, schema))
    # Queued in the order that deadlocks if sent as is: a row written, then the epoch lock.
    batch = [_Job("UPDATE t SET v = v + 1 WHERE k = 1", (), False), _Job(LOCK, (), False)]
    with psycopg.connect(PG_URL) as other:
        other.execute(f'SET search_path TO "{schema}"')
        other.execute(LOCK)  # another process's tx_begin, holding the epoch lock
        sender = threading.Thread(target=group._commit, args=(batch,))
        sender.start()
        time.sleep(0.3)  # the batch is sent and waits for the lock
        other.execute("UPDATE t SET v = v + 10 WHERE k = 1")  # the lock holder needs the row
        other.commit()
        sender.join(timeout=10)
    assert not sender.is_alive()
    assert [job.error for job in batch] == [None, None]
    assert group.resent == 0, "the batch failed (a deadlock) and was resent a statement at a time"
    with psycopg.connect(PG_URL) as check:
        assert check.execute(f'SELECT v FROM "{schema}".t').fetchone() == (11,)
