"""Wake-ups for transactions waiting on a frontier: a generation counter per store handle that
moves whenever a transaction header may have ended, so a waiter sleeps until something changed
instead of polling the headers on a timer.

A waiter reads `generation()`, checks the headers, and if it must wait calls
`wait(since, timeout)`, which returns at once if the generation moved after its read (no lost
wake-up between the check and the wait), else when it moves or after `timeout`.

What moves it:
- this handle ending a header (`bump`, called by the store's `tx_mark`): in-process waiters
  (speculation branches, threads sharing the handle) wake at once, on both stores;
- on PostgreSQL, a NOTIFY on channel `daybook_tx` that a trigger sends from the very database
  transaction that ends a header (schema v12), from any process or host, received by one
  LISTEN connection per handle on a daemon thread (`PgTxSignal`). A notification can be missed
  (the listener's connection dropped); after reconnecting it bumps once, and waiters keep a
  slow poll (`poll`) as the safety net;
- on SQLite there is no cross-process notification: waiters poll, backing off to `poll`
  (0.1 s), which bounds how late another process's commit is seen.
"""

from __future__ import annotations

import threading
from typing import Any


class TxSignal:
    """The in-process generation counter (SQLite; the base of the PostgreSQL listener)."""

    # The longest a waiter sleeps between two looks at the headers with no wake-up.
    poll = 0.1

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._gen = 0

    def bump(self) -> None:
        with self._cond:
            self._gen += 1
            self._cond.notify_all()

    def generation(self) -> int:
        with self._cond:
            return self._gen

    def wait(self, since: int, timeout: float) -> int:
        """Block until the generation differs from `since` or `timeout` seconds pass."""
        with self._cond:
            self._cond.wait_for(lambda: self._gen != since, timeout=max(0.0, timeout))
            return self._gen

    def close(self) -> None:
        return None


class PgTxSignal(TxSignal):
    """LISTEN daybook_tx on a connection of its own, started by the first waiter."""

    poll = 1.0  # only the safety net: a header that ends is normally heard at once

    def __init__(self, conninfo: str, schema: str | None) -> None:
        super().__init__()
        self._conninfo = conninfo
        self._schema = schema
        self._stop = threading.Event()
        self._started = threading.Lock()
        self._thread: threading.Thread | None = None
        self.listening = threading.Event()

    def wait(self, since: int, timeout: float) -> int:
        self._start()
        return super().wait(since, timeout)

    def _start(self) -> None:
        with self._started:
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(target=self._listen, name="daybook-tx-listen", daemon=True)
                self._thread.start()

    def _listen(self) -> None:
        import psycopg

        while not self._stop.is_set():
            try:
                with psycopg.connect(self._conninfo, autocommit=True) as conn:
                    conn.execute("LISTEN daybook_tx")
                    self.listening.set()
                    self.bump()  # anything that ended while not listening is looked at again
                    while not self._stop.is_set():
                        self._drain(conn)
            except Exception:
                # The server went away: waiters fall back on their poll until it is back.
                self.listening.clear()
                self._stop.wait(1.0)

    def _drain(self, conn: Any) -> None:
        for note in conn.notifies(timeout=0.5):
            if self._schema is None or note.payload == self._schema:
                self.bump()

    def close(self) -> None:
        # Not joined: the daemon thread sees the flag within one drain (0.5 s) and closes its
        # connection; a handle's close must not wait for it.
        self._stop.set()
