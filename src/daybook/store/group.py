"""Group commit for SQLite: runs executing in parallel threads share one durable commit.

Leader/follower: a thread with a write and no commit in progress commits it at once, itself (a
lone writer: no queue, no lock to wake on, no added statements). A thread that finds a commit in
progress joins the queue; when that commit ends, the queue's head leads: it takes everything
queued and commits it as one transaction (one fsync); the others wait until the commit that
holds their write is durable, so no write returns before it is on disk, exactly as with a
commit of its own.
A batch commits in one transaction; if one write in it fails (a duplicate key, a lost lease),
the batch is rolled back and each write retried alone, so only that write fails.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Sequence
from typing import Any

from . import handoff
from .rows import unencodable

Write = Callable[[sqlite3.Connection], Any]
# The connection's own `execute`, past a subclass's rendering override (`sqlite._Connection`):
# what `GroupCommit.execute` runs is rendered already.
_execute = sqlite3.Connection.execute


class _Solo:
    """A lone writer's job (`GroupCommit._solo`): nothing waits on it, so it has no lock."""

    __slots__ = ("atomic", "error", "fn", "result")

    def __init__(self, fn: Write, atomic: bool) -> None:
        self.fn = fn
        self.atomic = atomic
        self.result: Any = None
        self.error: BaseException | None = None


class _Job(_Solo):
    """A write queued behind a commit in progress."""

    __slots__ = ("done", "wake")

    def __init__(self, fn: Write, atomic: bool) -> None:
        super().__init__(fn, atomic)
        self.done = False
        # Held until this job's thread must wake: its write is durable, or it is to lead next.
        self.wake = threading.Lock()
        self.wake.acquire()


class GroupCommit:
    def __init__(self, conn: sqlite3.Connection, guard: Callable[[], None] | None = None) -> None:
        self._conn = conn
        # The lone writer's journal INSERTs (`execute`) run on one cursor kept for them: the
        # connection's `execute` makes (and registers, and drops) a cursor for every statement.
        # Only the thread leading uses it; an INSERT leaves it with no statement in progress.
        self._cursor = conn.cursor()
        # Asked before each commit; raising refuses the whole batch (see `sqlite.WalWatch`).
        self._guard = guard
        self._lock = threading.Lock()
        self._queue: list[_Job] = []
        self._leading = False
        self.commits = 0
        self.writes = 0
        # Commits by batch size, for the batches `_commit` makes (a lone writer's commit in
        # `_solo` is counted in `commits` only): what benchmarks/concurrency.py reports.
        self.batches: dict[int, int] = {}

    def write(self, fn: Write, atomic: bool = False) -> Any:
        """Run `fn(conn)` in a durable commit. `atomic`: fn issues several statements that must
        commit together (a single statement is atomic on its own)."""
        gathers = handoff.users > 0 and handoff.gathers()  # waits for others to share its commit
        with self._lock:
            alone = not self._leading  # then the queue is empty too: a leader empties it
            self._leading = True
            if not alone or gathers:
                job = _Job(fn, atomic)
                self._queue.append(job)
        if handoff.users:
            handoff.queued()  # in line: commits follow the line's order (a speculation's rows)
        if alone and not gathers:
            return self._solo(fn, atomic)
        # Each waiter sleeps on its own lock, so a commit wakes exactly the threads whose
        # writes it holds, plus the one that leads next: no thundering herd.
        if not alone:
            job.wake.acquire()
        if not job.done:
            try:
                if handoff.users:
                    handoff.gathered()  # a speculation's writes that come together: one commit
            finally:
                self._lead()  # whatever happened, the line goes on
        if isinstance(job.error, UnicodeEncodeError):
            raise unencodable(job.error, "SQLite") from job.error
        if job.error is not None:
            raise job.error
        return job.result

    def execute(self, sql: str, params: Sequence[Any]) -> None:
        """`write` of one statement already rendered for SQLite (a journal row: the hot path).
        A lone writer runs it on the connection's own `execute`, past the rendering override,
        with no write function and no job; any other (a commit in progress, a gathering) is a
        write like any."""
        with self._lock:
            alone = not self._leading and not (handoff.users and handoff.gathers())
            if alone:
                self._leading = True
        if not alone:
            self.write(lambda conn: _execute(conn, sql, params))
            return
        if handoff.users:
            handoff.queued()  # it leads the line (see `write`)
        try:
            self.commits += 1
            self.writes += 1
            if self._guard is not None:
                self._guard()  # raising refuses the write, as it refuses a batch
            self._cursor.execute(sql, params)
        except UnicodeEncodeError as exc:
            raise unencodable(exc, "SQLite") from exc
        finally:
            self._pass_lead()

    def _solo(self, fn: Write, atomic: bool) -> Any:
        """A write with nobody committing and nobody waiting (one run writing alone): it is
        committed at once by its own thread, as a batch of one would be, without the job, the
        queue and the wake-up lock a batch needs. Writers that queued meanwhile lead next."""
        try:
            if atomic:
                job = _Solo(fn, atomic)
                self._commit([job])
                if job.error is not None:
                    raise job.error
                return job.result
            self.commits += 1
            self.writes += 1
            if self._guard is not None:
                self._guard()  # raising refuses the write, as it refuses a batch
            return fn(self._conn)  # one statement: a transaction of its own
        except UnicodeEncodeError as exc:
            raise unencodable(exc, "SQLite") from exc
        finally:
            self._pass_lead()

    def _pass_lead(self) -> None:
        """A lone writer's commit is done: the first writer that queued meanwhile leads next."""
        with self._lock:
            nxt = self._queue[0] if self._queue else None
            if nxt is None:
                self._leading = False
        if nxt is not None:
            nxt.wake.release()  # leadership passes on; `_leading` stays set

    def _lead(self) -> None:
        with self._lock:
            batch, self._queue = self._queue, []
        try:
            self._commit(batch)
        finally:
            for job in batch:
                job.done = True
            with self._lock:
                nxt = self._queue[0] if self._queue else None
                if nxt is None:
                    self._leading = False
            # batch[0] is the leader's own job (a leader always heads the queue it takes);
            # releasing its unwaited lock is harmless.
            for job in batch:
                job.wake.release()
            if nxt is not None:
                nxt.wake.release()  # leadership passes on; `_leading` stays set

    def _commit(self, batch: Sequence[_Solo]) -> None:
        self.commits += 1
        self.writes += len(batch)
        self.batches[len(batch)] = self.batches.get(len(batch), 0) + 1
        if self._guard is not None:
            try:
                self._guard()
            except BaseException as exc:
                for job in batch:
                    job.error = exc
                return
        if len(batch) == 1 and not batch[0].atomic:
            job = batch[0]
            try:
                job.result = job.fn(self._conn)
            except BaseException as exc:
                job.error = exc
            return
        # Optimistic: the whole batch in one transaction. If one write fails (a duplicate key, a
        # lost lease: rare), roll back and give every write a transaction of its own, so the
        # failure stays with the write that caused it.
        if not self._transaction(batch, isolate=False) and len(batch) > 1:
            for job in batch:
                job.error = None
                self._transaction([job], isolate=True)

    def _transaction(self, batch: Sequence[_Solo], isolate: bool) -> bool:
        conn = self._conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            for job in batch:
                job.result = job.fn(conn)
            conn.execute("COMMIT")
            return True
        except BaseException as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if not isinstance(exc, Exception) or isolate or len(batch) == 1:
                for job in batch:
                    job.error = exc
                return True
            return False
