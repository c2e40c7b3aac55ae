"""Releasing transaction attempts that no execution of their run will finish, so they stop
holding their scopes: the header becomes `aborted` and a `tx_released` journal row (no step:
tx_id, by, reason, the status it left) is written in the same database transaction.

Who releases: an operator (`daybook tx release`, `book.release_transaction`), and the run itself
when it ends (completed, failed, cancelled, expired: a run that ended never holds a scope); a
transaction waiting on a frontier also releases what a run that ended still holds (the end and
the release are two writes, so a crash between them is healed by the next waiter).

A released attempt's effects that ran now are not undone here (nothing but the run's own
execution knows its inverses): if the run executes again (a failed run retried, a parked one
resumed), that execution aborts the attempt where it finds it, running the inverses once, and
retries under a fresh epoch while its retries last (daybook.tx.atomix).
"""

from __future__ import annotations

import time

from ..errors import LeaseLost
from ..records import Event, Kind
from . import Store
from .tx_rows import OPEN, TxRow

RELEASE = "tx:release"
# A release races only with the run's own journal writes; a few tries settle it.
ATTEMPTS = 20


def release_row(store: Store, row: TxRow, by: str, reason: str) -> bool:
    """Release one attempt (a header row); False if it had already ended."""
    tx_id, run_id = row[0], row[1]
    for _ in range(ATTEMPTS):
        events = store.load(run_id)
        now = time.time()
        data = {"tx_id": tx_id, "by": by, "reason": reason, "from": row[4]}
        event = Event(
            run_id=run_id,
            seq=(events[-1].seq if events else 0) + 1,
            kind=Kind.TX_RELEASED.value,
            name=RELEASE,
            data=data,
            at=now,
        )
        try:
            return store.tx_mark(tx_id, "aborted", event, now)
        except LeaseLost:
            continue  # the run wrote a row meanwhile: take the next position
    return False


def release_run(store: Store, run_id: str, by: str, reason: str) -> list[str]:
    """Release every attempt of `run_id` still open; returns their ids."""
    done = []
    for row in store.tx_rows(run_id=run_id, open_only=True):
        if row[4] in OPEN and release_row(store, row, by, reason):
            done.append(row[0])
    return done
