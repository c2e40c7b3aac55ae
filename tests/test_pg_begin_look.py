"""PostgreSQL: a transaction's begin takes its first look at the earlier open headers after it
holds the epoch lock, in its own transaction, so it sees a smaller epoch that another process
committed while this begin waited for the lock, whatever the server's default isolation level
(the look is a statement of its own, in a Read Committed transaction). A look that missed it
would let the transaction run beside an earlier one on the same scope."""

from __future__ import annotations

import threading
import time
import uuid

import psycopg
import pytest
from conftest import PG_URL, _pg_available
from store.contract import NOW, header, row, started

from daybook.store import open_store

_DRAW = (
    "SELECT nextval('daybook_epoch_seq') FROM "
    "(SELECT pg_advisory_xact_lock(hashtext(current_schema())) OFFSET 0) AS l"
)
_OPEN = (
    "INSERT INTO daybook_transactions (tx_id, run_id, epoch, scopes, status, attempt, retries, "
    "created_at, updated_at) VALUES ('t0', %s, %s, '[\"a/**\"]', 'open', 1, 0, 0, 0)"
)


@pytest.mark.parametrize("isolation", ["", "repeatable\\ read"])
def test_a_begin_sees_a_smaller_epoch_committed_while_it_waited_for_the_lock(
    isolation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not _pg_available():
        pytest.skip(f"PostgreSQL at {PG_URL} is not reachable")
    if isolation:
        monkeypatch.setenv("PGOPTIONS", f"-c default_transaction_isolation={isolation}")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    sep = "&" if "?" in PG_URL else "?"
    store = open_store(f"{PG_URL}{sep}schema={schema}")
    try:
        store.create_run(header("r1", "running"), started("r1"))
        drawn: list[int] = []
        with psycopg.connect(PG_URL) as other:  # another process's begin, holding the epoch lock
            other.execute(f'SET search_path TO "{schema}"')
            (smaller,) = other.execute(_DRAW).fetchone() or (0,)
            other.execute(_OPEN, ("r1", smaller))
            begin = row("r1", 2, name="tx:begin", data={"value": {"tx_id": "t1"}})
            thread = threading.Thread(
                target=lambda: drawn.append(store.tx_begin("t1", "r1", '["a/**"]', 1, 0, begin, NOW))
            )
            thread.start()
            time.sleep(0.3)  # t1's begin is sent and waits for the lock
            other.commit()
            thread.join(timeout=10)
        assert drawn and drawn[0] > smaller
        seen = store.tx_seen("t1")
        assert seen is not None and [r[0] for r in seen] == ["t0"]
    finally:
        store.close()
        with psycopg.connect(PG_URL, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
