"""Named queues: runs submitted to one wait there until its limits let a worker take them.

A queue's settings are declared in code (`book.queue("payments", concurrency=1, rate=(5, 1.0))`)
and kept in the store, so every process and host agrees on them. The store checks them in the
same atomic step that leases a run (`Store.claim_queued`):
- `concurrency`: at most this many of the queue's runs execute at once, across every worker;
- `per_worker`: at most this many in one worker process;
- `rate=(n, period)`: at most n runs taken from the queue in any `period` seconds (a run woken
  or taken over after a crash is not a new start);
- `priority` (per run): lower numbers are taken first, then the oldest;
- `partition` (per run): runs with the same key run one after another: none starts while
  another run of its key has started and not finished.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from ..records import JSON, Event, RunInfo, bounded, check_text, whole
from ..runtime.runner import Runner
from ..runtime.start import check_same, new_run
from ..runtime.workflow import as_workflow
from ..store import Store

MAX_SLOTS = 1_000_000
MAX_PRIORITY = 1_000_000
MAX_PERIOD = 86_400.0


@dataclass(frozen=True)
class Queue:
    """A queue's settings (None: no such limit) and, when listed, its runs waiting and running."""

    name: str
    concurrency: int | None = None
    per_worker: int | None = None
    rate: tuple[int, float] | None = None
    pending: int = 0
    active: int = 0

    def as_dict(self) -> dict[str, JSON]:
        return {
            "name": self.name,
            "concurrency": self.concurrency,
            "per_worker": self.per_worker,
            "rate": list(self.rate) if self.rate else None,
            "pending": self.pending,
            "active": self.active,
        }


def queue_name(name: object) -> str:
    if not isinstance(name, str) or not name or len(name) > 200:
        raise ConfigError(f"a queue name is a non-empty string of at most 200 characters, got {name!r}")
    check_text(name, "the queue name")
    return name


def declare(
    store: Store,
    name: str,
    concurrency: int | None = None,
    per_worker: int | None = None,
    rate: tuple[int, float] | None = None,
) -> Queue:
    """Set queue `name`'s limits in the store (replacing what was declared before)."""
    name = queue_name(name)
    if concurrency is not None:
        concurrency = whole(concurrency, "concurrency", low=1, high=MAX_SLOTS)
    if per_worker is not None:
        per_worker = whole(per_worker, "per_worker", low=1, high=MAX_SLOTS)
    limit = period = None
    if rate is not None:
        if not isinstance(rate, tuple | list) or len(rate) != 2:
            raise ConfigError(f"rate must be (runs, seconds), e.g. rate=(5, 1.0), got {rate!r}")
        limit = whole(rate[0], "rate runs", low=1, high=MAX_SLOTS)
        period = bounded(rate[1], "rate period (seconds)", low=0.0, high=MAX_PERIOD, above=True)
    store.declare_queue(name, concurrency, per_worker, limit, period, time.time())
    return Queue(name, concurrency, per_worker, None if limit is None else (limit, float(period or 0)))


def listing(store: Store) -> list[Queue]:
    """Every queue with its settings and its pending and executing runs."""
    return [
        Queue(
            name=str(r[0]),
            concurrency=r[1],
            per_worker=r[2],
            rate=None if r[3] is None else (int(r[3]), float(r[4])),
            pending=int(r[5]),
            active=int(r[6]),
        )
        for r in store.queue_rows(time.time())
    ]


def submit(
    runner: Runner,
    workflow: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    run_id: str | None,
    queue: str,
    priority: int = 0,
    partition: str | None = None,
) -> str:
    """Record a run as `pending` in `queue` for a worker to take under the queue's limits."""
    queue = queue_name(queue)
    priority = whole(priority, "priority", low=-MAX_PRIORITY, high=MAX_PRIORITY)
    if partition is not None:
        if not isinstance(partition, str) or not partition or len(partition) > 200:
            raise ConfigError(
                f"partition must be a non-empty string of at most 200 characters, got {partition!r}"
            )
        check_text(partition, "the partition key")
    wf = as_workflow(workflow)
    info, first = new_run(
        wf, run_id, args, kwargs, owner=runner.owner, lease_ttl=runner.lease_ttl, pending=True
    )
    info = dataclasses.replace(info, queue=queue, priority=priority, partition=partition)
    if not start_pending(runner.store, info, first):
        check_same(runner.claims.get_run(info.run_id), wf, info.input)
    return info.run_id


def start_pending(store: Store, info: RunInfo, first: Event) -> bool:
    """Create a pending run (in its queue, if any); False if its id exists already."""
    if info.queue is not None:
        # The queue's row must exist before its first run: a claim locks it (PostgreSQL).
        store.ensure_queue(info.queue, info.created_at)
    return store.create_run(info, first)
