"""Workers: processes that take runnable runs from the store and execute them.

A runnable run is `pending` (submitted, never started) or `running` with a lapsed lease (its
process died, or its host is gone). A worker leases one at a time per thread with an atomic
compare-and-set (`FOR UPDATE SKIP LOCKED` on PostgreSQL, so workers never wait on each other),
resumes it from its journal, and heartbeats the lease while it runs. Kill a worker with SIGKILL
and another takes its runs over once their leases expire.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .book import Daybook, lease_ttl_of
from .errors import DaybookError, LeaseLost, NeedsAttention, StoreUnavailable, Suspended
from .records import bounded, whole
from .runtime.lease import is_dead_here
from .runtime.workflow import load_app

# Threads per worker process (each a store connection on PostgreSQL), and the longest idle poll.
MAX_CONCURRENCY = 256
MAX_POLL = 3600.0


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
    ) -> None:
        concurrency = whole(concurrency, "concurrency", low=1, high=MAX_CONCURRENCY)
        poll = bounded(poll, "poll (seconds)", low=0.0, high=MAX_POLL, above=True)
        lease_ttl = lease_ttl_of(lease_ttl)
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
        self.stop = threading.Event()

    def run(self, until_idle: bool = False) -> WorkerStats:
        """Work until `stop` is set; with `until_idle`, until no run is pending or running
        (runs leased by other live workers count: this worker waits to take them over if those
        workers die)."""
        shared = Daybook(self.url, lease_ttl=self.lease_ttl)
        # SQLite: one handle, so parallel runs share group commits. PostgreSQL: a connection
        # per thread, so they do not queue behind one socket.
        per_thread = not shared.url.startswith("sqlite") and "://" in shared.url
        idle = [False] * self.concurrency

        def loop(i: int) -> None:
            book = Daybook(self.url, lease_ttl=self.lease_ttl) if per_thread else shared
            try:
                while not self.stop.is_set():
                    try:
                        run_id = self._next(book, self.version)
                    except Exception as exc:  # the store is down: keep trying, do not die
                        self.stats.add("errors")
                        self.echo(f"worker: cannot reach the store ({type(exc).__name__}: {exc})")
                        self.stop.wait(max(self.poll, 1.0))
                        continue
                    if run_id is None:
                        idle[i] = True
                        if until_idle and all(idle) and not _unfinished(book, self.version):
                            return
                        self.stop.wait(self.poll)
                        continue
                    idle[i] = False
                    self._execute(book, run_id)
            finally:
                if per_thread:
                    book.close()

        threads = [
            threading.Thread(target=loop, args=(i,), name=f"daybook-worker-{i}", daemon=True)
            for i in range(self.concurrency)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        shared.close()
        return self.stats

    @staticmethod
    def _next(book: Daybook, version: str | None) -> str | None:
        run_id = book.store.claim_next(book.owner, book.lease_ttl, time.time(), version)
        if run_id is not None:
            return run_id
        # Runs whose owner died on this machine need not wait for their leases to lapse.
        for info in book.runs("running", 50):
            holder = info.lease_owner
            if (
                (version is None or info.code_version == version)
                and holder
                and holder != book.owner
                and is_dead_here(holder)
                and book.store.claim(info.run_id, book.owner, book.lease_ttl, time.time(), holder)
            ):
                return info.run_id
        return None

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
            self.stats.add("failed")
            self.echo(f"run {run_id}: {exc}")
        except Exception:
            self.stats.add("errors")
            self.echo(f"run {run_id}: worker error\n{traceback.format_exc()}")
        else:
            self.stats.add("completed")
            self.echo(f"run {run_id} completed in {time.monotonic() - start:.3f}s")


def _unfinished(book: Daybook, version: str | None) -> bool:
    return any(
        version is None or info.code_version == version
        for status in ("pending", "running")
        for info in book.runs(status, 1000)
    )
