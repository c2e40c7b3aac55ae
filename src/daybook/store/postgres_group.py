"""Group commit for PostgreSQL: statements that threads of one process send at once share one
transaction, one round trip and one WAL flush.

Leader/follower, as SQLite's `group` (each waiter sleeps on a lock of its own): a thread with a
statement joins the queue; if no batch is in flight it leads, takes everything queued and sends
it as one pipelined transaction (`Link.batch`); the others wait until the commit holding theirs
is durable, so no write returns before it would alone. A lone statement is sent alone, in
autocommit, as without the group. If a batch fails (a unique violation, a deadlock with another
process), nothing of it was written and each statement is sent again alone, so the failure stays
with the statement that caused it; if its connection was lost, each statement's fate is unknown
(`StoreUnavailable`), unless it is safe to send again.

It matters most for the transactions' epochs: a `tx_begin` holds the epoch lock until its commit
is durable (so epochs become visible in order), which one commit per begin would serialize at
one WAL flush each; a batch draws every queued epoch under one hold and one flush.

A batch takes its locks in one order: the statements that take an advisory lock (the epoch
lock) are sent first, the others after them in the order they came. Two processes' batches
could otherwise deadlock: one holding rows its first statements wrote while it waits for the
epoch lock, the other holding the epoch lock while it waits for one of those rows. PostgreSQL
breaks such a cycle only after its deadlock timeout (1 s), and then each statement is resent
alone. With the lock first, a batch that waits for it holds nothing yet.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Any

from ..errors import StoreUnavailable
from . import handoff
from .postgres_link import Links

# What a statement that takes an advisory lock (`PostgresDialect.epoch_sql`) contains.
ADVISORY_LOCK = "pg_advisory_xact_lock("


def in_lock_order(batch: Sequence[_Job]) -> list[_Job]:
    """`batch` with the statements that take an advisory lock first, the rest in their order.
    Each statement is another thread's (a thread waits for its own), so none depends on the
    order of the others: only the locks do."""
    return sorted(batch, key=lambda job: ADVISORY_LOCK not in job.sql)


class _Job:
    __slots__ = ("done", "error", "params", "read", "read_params", "result", "retry", "sql", "wake")

    def __init__(
        self,
        sql: str,
        params: Sequence[Any],
        retry: bool,
        read: str | None = None,
        read_params: Sequence[Any] = (),
    ) -> None:
        self.sql, self.params, self.retry, self.read, self.read_params = sql, params, retry, read, read_params
        self.done = False
        self.result: Any = None
        self.error: BaseException | None = None
        self.wake = threading.Lock()  # held until this job's thread must wake
        self.wake.acquire()


class StatementGroup:
    """The group commit of one handle's statements over its `links`."""

    def __init__(self, links: Links) -> None:
        self._links = links
        self._lock = threading.Lock()
        self._queue: list[_Job] = []
        self._leading = False
        self.commits = 0
        self.writes = 0
        self.batches: dict[int, int] = {}  # commits by batch size (what the benchmarks report)
        self.resent = 0  # batches that failed and were resent a statement at a time

    def run(
        self,
        sql: str,
        params: Sequence[Any],
        retry: bool = False,
        read: str | None = None,
        read_params: Sequence[Any] = (),
    ) -> Any:
        """Send `sql` as one durable commit, in a batch with others' if they are queued; its
        first row (None if none). `retry`: safe to send again if the connection dropped.
        `read`: a query (its parameters `read_params`) sent right after `sql`, in its transaction
        (and so in its round trip; never sent again): then (sql's first row, read's rows)."""
        job = _Job(sql, params, retry and read is None, read, read_params)
        with self._lock:
            self._queue.append(job)
            follow = self._leading
            self._leading = True
        if handoff.users:
            handoff.queued()  # in line: commits follow the line's order (a speculation's rows)
        if follow:
            job.wake.acquire()
        if not job.done:
            try:
                if handoff.users:
                    handoff.gathered()  # a speculation's writes that come together: one commit
            finally:
                self._lead()  # whatever happened, the line goes on
        if job.error is not None:
            raise job.error
        return job.result

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
            for job in batch:
                job.wake.release()  # the leader's own: an unwaited lock, harmless
            if nxt is not None:
                nxt.wake.release()  # leadership passes on

    def _commit(self, batch: list[_Job]) -> None:
        self.commits += 1
        self.writes += len(batch)
        self.batches[len(batch)] = self.batches.get(len(batch), 0) + 1
        if len(batch) == 1:
            self._alone(batch[0])
            return
        alone = batch = in_lock_order(batch)
        try:
            with self._links.take() as link:
                answers = iter(link.batch(_statements(batch)))
            for job in batch:
                job.result = _answer(job, answers)
            return
        except StoreUnavailable as exc:
            for job in batch:
                if not job.retry:
                    job.error = exc
            alone = [job for job in batch if job.retry]
        except Exception:
            pass  # nothing of the batch was written: each on its own says whose fault it was
        self.resent += 1
        for job in alone:
            self._alone(job)

    def _alone(self, job: _Job) -> None:
        try:
            with self._links.take() as link:
                if job.read is None:
                    job.result = link.execute(job.sql, job.params, retry=job.retry).fetchone()
                else:
                    job.result = _answer(job, iter(link.batch(_statements([job]))))
        except BaseException as exc:
            job.error = exc


def _statements(batch: Sequence[_Job]) -> list[tuple[str, Sequence[Any]]]:
    """The batch's statements in order, each job's `read` right after its own statement."""
    out: list[tuple[str, Sequence[Any]]] = []
    for job in batch:
        out.append((job.sql, job.params))
        if job.read is not None:
            out.append((job.read, job.read_params))
    return out


def _answer(job: _Job, answers: Iterator[list[Any] | None]) -> Any:
    """A job's result from the batch's answers (each statement's rows), taken in order."""
    rows = next(answers)
    first = rows[0] if rows else None
    if job.read is None:
        return first
    return first, next(answers) or []
