"""Group commit for SQLite: runs executing in parallel threads share one durable commit.

Leader/follower: a thread with a write joins the queue; if no commit is in progress it becomes
the leader, takes everything queued, and commits it as one transaction (one fsync); the others
wait until the commit that holds their write is durable, so no write returns before it is on
disk, exactly as with a commit of its own. A lone writer commits alone with no added statements.
Each write in a shared batch runs under its own savepoint, so one write's failure (a duplicate
key, a lost lease) fails only that write.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from typing import Any

Write = Callable[[sqlite3.Connection], Any]


class _Job:
    __slots__ = ("atomic", "done", "error", "fn", "result")

    def __init__(self, fn: Write, atomic: bool) -> None:
        self.fn = fn
        self.atomic = atomic
        self.done = False
        self.result: Any = None
        self.error: BaseException | None = None


class GroupCommit:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._cond = threading.Condition()
        self._queue: list[_Job] = []
        self._leading = False
        self._waiting = 0
        self.commits = 0
        self.writes = 0

    def write(self, fn: Write, atomic: bool = False) -> Any:
        """Run `fn(conn)` in a durable commit. `atomic`: fn issues several statements that must
        commit together (a single statement is atomic on its own)."""
        job = _Job(fn, atomic)
        with self._cond:
            self._queue.append(job)
            while self._leading and not job.done:
                self._waiting += 1
                self._cond.wait()
                self._waiting -= 1
            if not job.done:
                self._leading = True
                batch, self._queue = self._queue, []
        if not job.done:
            try:
                self._commit(batch)
            finally:
                with self._cond:
                    self._leading = False
                    if self._waiting:
                        self._cond.notify_all()
        if job.error is not None:
            raise job.error
        return job.result

    def _commit(self, batch: list[_Job]) -> None:
        conn = self._conn
        self.commits += 1
        self.writes += len(batch)
        if len(batch) == 1 and not batch[0].atomic:
            job = batch[0]
            try:
                job.result = job.fn(conn)
            except BaseException as exc:
                job.error = exc
            job.done = True
            return
        shared = len(batch) > 1
        try:
            conn.execute("BEGIN IMMEDIATE")
            for job in batch:
                if shared:
                    conn.execute("SAVEPOINT w")
                try:
                    job.result = job.fn(conn)
                except Exception as exc:
                    job.error = exc
                    if shared:
                        conn.execute("ROLLBACK TO w")
                    else:
                        conn.execute("ROLLBACK")
                        job.done = True
                        return
                if shared:
                    conn.execute("RELEASE w")
            conn.execute("COMMIT")
        except BaseException as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            for job in batch:
                if job.error is None:
                    job.error = exc
        finally:
            for job in batch:
                job.done = True
