"""Workers: processes that take runnable runs from the store and execute them.

A runnable run is `pending` (submitted, never started) or `running` with a lapsed lease (its
process died, or its host is gone). A worker leases one at a time per thread with an atomic
compare-and-set (`FOR UPDATE SKIP LOCKED` on PostgreSQL, so workers never wait on each other),
resumes it from its journal, and heartbeats the lease while it runs. Kill a worker with SIGKILL
and another takes its runs over once their leases expire.

Runs in a queue are taken under the queue's limits (`daybook.dispatch.queues`); a worker given
`queues` takes only runs of those queues, one given none takes any run, looking at the queues in
turn. Each worker also starts the runs of schedule firings that have come
(`daybook.dispatch.schedules`), unless told not to, and, given `notify` sinks, delivers the
approval outbox to them on a thread of its own (`daybook.gates.delivery`).
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .book import Daybook, lease_ttl_of
from .dispatch import schedules as schedule_firing
from .dispatch.queues import queue_name
from .errors import ConfigError, DaybookError, LeaseLost, NeedsAttention, StoreUnavailable, Suspended
from .gates.delivery import background as outbox_deliverer
from .gates.sink import sinks_of
from .records import RunStatus, bounded, whole
from .runtime.lease import is_dead_here
from .runtime.workflow import load_app
from .steering.expiry import expire as expire_runs

# Threads per worker process (each a store connection on PostgreSQL), and the longest idle poll.
MAX_CONCURRENCY = 256
MAX_POLL = 3600.0
# Seconds a work thread waits before trying again to open its store connection: the first
# wait, doubled after each refusal up to the second.
OPEN_RETRY = (0.5, 30.0)
# Once asked to stop, how long a worker lets the runs it executes reach a stopping point
# (finish, suspend: a frontier wait suspends within `inline_wait`) before it exits anyway.
DEFAULT_GRACE = 30.0
# The seed's retention window (30 days: most resumes come within 48 h), and the longest time
# between two retention passes of a worker.
DEFAULT_RETENTION = 30 * 86_400.0
MAX_RETENTION = 100 * 365 * 86_400.0
RETENTION_PASS = 60.0


@dataclass
class WorkerStats:
    completed: int = 0
    failed: int = 0
    attention: int = 0
    suspended: int = 0
    errors: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, what: str) -> None:
        with self.lock:
            setattr(self, what, getattr(self, what) + 1)


class Worker:
    def __init__(
        self,
        url: str | None = None,
        *,
        apps: Sequence[str] | str = (),
        concurrency: int = 1,
        poll: float = 0.5,
        lease_ttl: float = 15.0,
        echo: Callable[[str], None] | None = None,
        version: str | None = None,
        queues: Sequence[str] = (),
        schedules: bool = True,
        warn: Callable[[str], None] | None = None,
        grace: float = DEFAULT_GRACE,
        otel: Any = False,
        notify: Sequence[Any] = (),
        retention: float | None = DEFAULT_RETENTION,
        triggers: Sequence[tuple[str, Any, Any]] = (),
    ) -> None:
        concurrency = whole(concurrency, "concurrency", low=1, high=MAX_CONCURRENCY)
        poll = bounded(poll, "poll (seconds)", low=0.0, high=MAX_POLL, above=True)
        lease_ttl = lease_ttl_of(lease_ttl)
        self.grace = bounded(grace, "grace (seconds)", low=0.0, high=MAX_POLL)
        # The only code this worker imports (with $DAYBOOK_APP): a run's stored reference never.
        apps = [apps] if isinstance(apps, str) else list(apps)
        for app in apps:
            load_app(app)
        self.url = url
        self.apps = list(apps)
        self.concurrency = concurrency
        self.poll = poll
        self.lease_ttl = lease_ttl
        self.echo = echo or (lambda _line: None)
        self.stats = WorkerStats()
        # Pinning: take only runs that started on this code version (None: any).
        self.version = version
        # Only runs of these queues (empty: any run, queued or not).
        self.queues = [queue_name(q) for q in ([queues] if isinstance(queues, str) else queues)]
        self.schedules = schedules
        self._turn = 0
        self.stop = threading.Event()
        # Lost and regained capacity (a thread that cannot open its connection): said on stderr
        # whatever `echo` does, since the worker runs on with fewer threads meanwhile.
        self.warn = warn or _to_stderr
        # OpenTelemetry spans of the runs this worker executes: True for the SDK's standard
        # settings (`OTEL_*`), or the tracer provider to export with (`daybook.telemetry`).
        self.otel = otel
        self._spans: Any = None
        # Sinks the approval outbox is delivered to, by a thread of this worker (`gates.delivery`).
        self.notify = sinks_of(list(notify))
        # Reactive triggers this worker follows, each `(name, read, workflow)`: a pass of each
        # every poll (`book.follow_changes`, `dispatch/triggers.py`), one follower at a time.
        self.triggers = [_trigger(t) for t in triggers]
        # The retention window (seconds) this worker enforces on its schedule: runs paused, or
        # finished with an environment, longer than that are expired and their environment
        # destroyed (`steering.expiry`), whether or not anyone runs `gc`. None: never.
        self.retention = _retention_of(retention)

    def run(self, until_idle: bool = False) -> WorkerStats:
        """Work until `stop` is set; with `until_idle`, until no run is pending or running
        (runs leased by other live workers count: this worker waits to take them over if those
        workers die)."""
        shared = _handle(self.url, self.lease_ttl)
        # SQLite: one handle, so parallel runs share group commits. PostgreSQL: a connection
        # per work thread, so they do not queue behind one socket; the schedule thread uses
        # the shared handle (concurrency + 1 connections in all).
        per_thread = not shared.url.startswith("sqlite") and "://" in shared.url
        crew = _Crew(shared, per_thread, until_idle, [False] * self.concurrency, self.concurrency, self.warn)
        threads = [
            threading.Thread(target=self._loop, args=(i, crew), name=f"daybook-worker-{i}", daemon=True)
            for i in range(self.concurrency)
        ]
        self._spans = _follower(shared, self.otel)
        deliverer = outbox_deliverer(shared.store, self.notify)
        self._join(threads, shared)
        if deliverer is not None:
            deliverer.stop()
        if self._spans is not None:
            self._spans.stop()
            self._spans.poll_once()  # what the last runs settled goes out before the worker ends
            _flush(self._spans.provider)
        shared.close()
        return self.stats

    def _loop(self, i: int, crew: _Crew) -> None:
        """One work thread: its own store handle (opened, and opened again, until it is), then
        take a run, execute it, repeat."""
        book = self._own_book(i, crew) if crew.per_thread else crew.shared
        if book is None:
            return  # stopped (or the work ran out) before a connection could be had
        try:
            while not (self.stop.is_set() or crew.drained.is_set()):
                try:
                    run_id = self._next(book, self.version)
                except Exception as exc:  # the store is down: keep trying, do not die
                    self.stats.add("errors")
                    self.echo(f"worker: cannot reach the store ({type(exc).__name__}: {exc})")
                    self.stop.wait(max(self.poll, 1.0))
                    continue
                if run_id is None:
                    crew.idle[i] = True
                    if (
                        crew.until_idle
                        and all(crew.idle)
                        and not _unfinished(book, self.version, self.queues)
                    ):
                        crew.drained.set()
                        return
                    self.stop.wait(self.poll)
                    continue
                crew.idle[i] = False
                self._traced(book, run_id)
        finally:
            if crew.per_thread:
                book.close()

    def _own_book(self, i: int, crew: _Crew) -> Daybook | None:
        """A work thread's own handle (PostgreSQL). A refused connection (`too many clients`,
        a failover) is tried again with backoff, saying on stderr how many threads work
        meanwhile; the thread counts as idle until it has one. None once the worker stops."""
        delay, failed = OPEN_RETRY[0], False
        crew.idle[i] = True
        while not (self.stop.is_set() or crew.drained.is_set()):
            try:
                book = _handle(self.url, self.lease_ttl)
            except Exception as exc:  # reported, and tried again: the thread must not die
                self.stats.add("errors")
                crew.lost(i, exc, delay, failed)
                failed = True
                crew.pause(self.stop, delay)
                delay = min(delay * 2, OPEN_RETRY[1])
                continue
            crew.gained(i, failed)
            return book
        return None

    def _join(self, threads: list[threading.Thread], shared: Daybook) -> None:
        """Run the work threads (and the schedule thread) until the work threads end."""
        done = threading.Event()
        if self.schedules:
            threads.append(threading.Thread(target=self._fire, args=(shared, done), daemon=True))
        if self.retention is not None:
            threads.append(threading.Thread(target=self._expire, args=(shared, done), daemon=True))
        if self.triggers:
            threads.append(threading.Thread(target=self._follow, args=(shared, done), daemon=True))
        for t in threads:
            t.start()
        self._wait_for(threads[: self.concurrency])
        done.set()
        for t in threads[self.concurrency :]:
            t.join(max(1.0, self.grace))

    def _wait_for(self, threads: list[threading.Thread]) -> None:
        """Until the work threads end; once `stop` is set, `grace` seconds at most. A run still
        executing then is left as a crash would leave it (its lease lapses and a worker takes it
        over; nothing journaled is lost): the threads are daemons, the process exits."""
        while any(t.is_alive() for t in threads) and not self.stop.is_set():
            self.stop.wait(0.2)  # set by a signal (or `until_idle`: the threads end themselves)
        deadline = time.monotonic() + self.grace
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        busy = sum(t.is_alive() for t in threads)
        if busy:
            self.echo(
                f"worker: {busy} run(s) still executing {self.grace:g}s after the stop; exiting "
                "anyway: their leases lapse and another worker takes them over"
            )

    def _follow(self, book: Daybook, done: threading.Event) -> None:
        """A pass of each trigger every poll; a pass that fails (the store or the change log is
        down) is said and tried again, its offset where it was."""
        while not done.is_set():
            for name, read, workflow in self.triggers:
                try:
                    done_pass = book.follow_changes(name, read, workflow)
                    for change in done_pass["delivered"]:
                        self.echo(
                            f"worker: trigger {name} delivered {change['id']} as run {change['run_id']}"
                        )
                except Exception as exc:
                    self.echo(f"worker: trigger {name}: {type(exc).__name__}: {exc}")
            done.wait(self.poll)

    def _fire(self, book: Daybook, done: threading.Event) -> None:
        """Start the runs of schedule firings that have come, every poll (at most a second), on
        the worker's shared handle (the work threads of a PostgreSQL worker have their own)."""
        said: set[str] = set()

        def once(line: str) -> None:  # a schedule this worker cannot fire is said once, not per poll
            if line not in said:
                said.add(line)
                self.echo(line)

        while not done.is_set():
            try:
                schedule_firing.fire_due(book.store, book.owner, self.apps, echo=once)
            except Exception as exc:  # the store is down: keep trying, do not die
                self.echo(f"worker: cannot fire schedules ({type(exc).__name__}: {exc})")
            done.wait(min(self.poll, 1.0))

    def _expire(self, book: Daybook, done: threading.Event) -> None:
        """The retention window, enforced: a pass every quarter window (at most a minute), on
        the worker's shared handle; a pass that fails (the store is down) is tried again."""
        assert self.retention is not None
        every = min(max(self.retention / 4, 0.05), RETENTION_PASS)
        while not done.is_set():
            try:
                cutoff = time.time() - self.retention
                by = f"worker {book.owner}"
                for run in expire_runs(book.store, cutoff, by, False, self.apps, backoff=True):
                    if run.get("again"):
                        continue  # said already: awaiting its destroy hook, or a failed one's backoff
                    what = f"{run['from']} run {run['run_id']}"
                    self.echo(f"worker: expired {what} past the window{_fate(run)}")
            except Exception as exc:
                self.echo(f"worker: cannot enforce the retention window ({type(exc).__name__}: {exc})")
            done.wait(every)

    def _sources(self, book: Daybook) -> list[str | None]:
        """Where to look for a run, in turn (None: runs in no queue)."""
        sources: list[str | None] = list(self.queues)
        if not sources:
            sources = [None, *book.store.queue_names()]
        self._turn += 1
        k = self._turn % len(sources)
        return sources[k:] + sources[:k]

    def _next(self, book: Daybook, version: str | None) -> str | None:
        now = time.time()
        for queue in self._sources(book):
            if queue is None:
                run_id = book.store.claim_next(book.owner, book.lease_ttl, now, version)
            else:
                run_id = book.store.claim_queued(queue, book.owner, book.lease_ttl, now, version)
            if run_id is not None:
                return run_id
        # Runs whose owner died on this machine need not wait for their leases to lapse.
        for info in book.runs("running", 50):
            holder = info.lease_owner
            if (
                (version is None or info.code_version == version)
                and (not self.queues or info.queue in self.queues)
                and holder
                and holder != book.owner
                and is_dead_here(holder)
                and book.store.claim(info.run_id, book.owner, book.lease_ttl, time.time(), holder)
            ):
                return info.run_id
        return None

    def _traced(self, book: Daybook, run_id: str) -> None:
        """Execute `run_id`, its steps exported as spans while it runs here (with `otel`)."""
        if self._spans is None:
            self._execute(book, run_id)
            return
        self._spans.watch(run_id)
        try:
            self._execute(book, run_id)
        finally:
            self._spans.release(run_id)

    def _execute(self, book: Daybook, run_id: str) -> None:
        start = time.monotonic()
        try:
            try:
                book.load_workflow(run_id, self.apps)
            except DaybookError as exc:
                # Code this worker cannot load: park the run for a person instead of retrying
                # it every lease period.
                book.park(run_id, f"this worker cannot load the run's workflow: {exc}")
                self.stats.add("attention")
                self.echo(f"run {run_id} needs attention: {exc}")
                return
            book.execute_claimed(run_id)
        except Suspended as exc:
            self.stats.add("suspended")
            self.echo(f"run {run_id} suspended: {exc}")
        except NeedsAttention as exc:
            self.stats.add("attention")
            self.echo(f"run {run_id} needs attention: {exc}")
        except (StoreUnavailable, LeaseLost) as exc:
            # Not the run's failure: it is still running, resumable, and taken again later.
            self.stats.add("errors")
            self.echo(f"run {run_id} given back, to be taken again later: {exc}")
        except DaybookError as exc:
            # Counted by where the run is now: a value no store can hold (NotSerializable)
            # parks the run, it does not fail it.
            if self._status(book, run_id) == RunStatus.NEEDS_ATTENTION:
                self.stats.add("attention")
                self.echo(f"run {run_id} needs attention: {exc}")
            else:
                self.stats.add("failed")
                self.echo(f"run {run_id}: {exc}")
        except Exception:
            self.stats.add("errors")
            self.echo(f"run {run_id}: worker error\n{traceback.format_exc()}")
        else:
            self.stats.add("completed")
            self.echo(f"run {run_id} completed in {time.monotonic() - start:.3f}s")

    @staticmethod
    def _status(book: Daybook, run_id: str) -> str | None:
        try:
            return book.get_run(run_id).status
        except DaybookError:
            return None


def _follower(book: Daybook, otel: Any) -> Any:
    """The span exporter of a worker with `otel` (None without): it follows the runs the worker
    executes, polling each second on a thread of its own."""
    if otel is False or otel is None:
        return None
    try:
        from .telemetry.otel import Follower, configured_provider
    except ImportError as exc:
        raise ConfigError(
            f"exporting spans needs the otel extra: pip install 'daybook-runtime[otel]' ({exc})"
        ) from None
    spans = Follower(book.store, configured_provider() if otel is True else otel, watched=True)
    spans.start()
    return spans


def _flush(provider: Any) -> None:
    flush = getattr(provider, "force_flush", None)
    if callable(flush):
        flush()


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@dataclass
class _Crew:
    """What a worker's threads share during one `Worker.run`: the shared handle, which threads
    are idle, whether the work ran out (`until_idle`), and how many threads hold a connection."""

    shared: Daybook
    per_thread: bool
    until_idle: bool
    idle: list[bool]
    total: int
    warn: Callable[[str], None]
    drained: threading.Event = field(default_factory=threading.Event)
    working: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def lost(self, i: int, exc: Exception, delay: float, again: bool) -> None:
        with self.lock:
            working = self.working
        said = "still cannot" if again else "cannot"
        self.warn(
            f"worker: thread {i} {said} open its store connection ({type(exc).__name__}: {exc}); "
            f"{working} of {self.total} threads working, trying again in {delay:g}s"
        )

    def gained(self, i: int, after_refusal: bool) -> None:
        with self.lock:
            self.working += 1
            working = self.working
        if after_refusal:
            self.warn(
                f"worker: thread {i} has its store connection; {working} of {self.total} threads working"
            )

    def pause(self, stop: threading.Event, seconds: float) -> None:
        """Wait `seconds`, or less if the worker stops or the work runs out."""
        end = time.monotonic() + seconds
        while not (stop.is_set() or self.drained.is_set()) and time.monotonic() < end:
            stop.wait(min(0.25, end - time.monotonic()))


def _unfinished(book: Daybook, version: str | None, queues: Sequence[str]) -> bool:
    return any(
        version is None or info.code_version == version
        for status in ("pending", "running")
        for queue in ([*queues] if queues else [None])
        for info in book.runs(status, 1000, queue=queue)
    )


def _trigger(given: Any) -> tuple[str, Any, Any]:
    if not isinstance(given, tuple | list) or len(given) != 3 or not callable(given[1]):
        raise ConfigError(
            f"a worker's trigger is (name, read, workflow), read the change log's read(after, limit); "
            f"got {given!r:.100}"
        )
    return (given[0], given[1], given[2])


def _handle(url: str | None, lease_ttl: float) -> Daybook:
    """A worker's handle: a transaction blocked on a frontier suspends its run past the short
    spin (or at once when the holder's owner is dead), so its slot serves the run it waits on."""
    # Its own spans exporter (`Worker(otel=)`) follows what it executes: not the handles'.
    book = Daybook(url, lease_ttl=lease_ttl, otel=False)
    book.frontier_spin = book.inline_wait
    return book


def _fate(run: dict[str, Any]) -> str:
    """What became of an expired run's environment, for the worker's output."""
    where = run["environment"]
    if run.get("error"):
        error = run["error"]
        return f"; its environment {where} kept: its destroy hook failed ({error}), tried again next pass"
    if run.get("awaiting_destroy"):
        return (
            f"; its environment {where} kept, awaiting destroy: the workflow's destroy hook "
            f"{run['destroy']!r} is not loaded in this worker (start a worker with --app)"
        )
    done = f"; its environment {where} destroyed" if run.get("destroyed") else ""
    return done + (f"; its workspace {where} removed" if run["removed"] else "")


def _retention_of(value: float | None) -> float | None:
    """A worker's retention window in seconds, checked (None: it expires nothing)."""
    if value is None:
        return None
    return bounded(value, "retention (seconds)", low=0.0, high=MAX_RETENTION, above=True)
