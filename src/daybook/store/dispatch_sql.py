"""The SQL of queues, schedules and run search (`daybook.dispatch`), shared by every backend.

Each statement is written once with named parameters; `Marks` writes them (`%(name)s`, which
the dialect renders for its driver, see `dialect`). The claim of a queued run is one UPDATE whose
subquery checks every limit of the queue against the runs table as it is: on SQLite the write
lock serialises it across processes, on PostgreSQL the caller holds the queue's row lock first.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..errors import SchemaVersionError
from ..records import TERMINAL
from .rows import RUN_ALL

Marks = Callable[[str], str]

POSTGRES: Marks = lambda name: f"%({name})s"  # noqa: E731

_FINISHED = ", ".join(f"'{s.value}'" for s in sorted(TERMINAL))
QUEUE_COLUMNS = "name, concurrency, per_worker, rate_limit, rate_period, updated_at"
SCHEDULE_COLUMNS = (
    "name, workflow, ref, cron, input, queue, catchup, grace, paused, last_fired, created_at, updated_at"
)


def current(run_cols: str, url: str) -> None:
    """Refuse a read of queues, schedules or search on a store from before them (a read-only
    handle reads an older store as it is, and these tables are not there yet)."""
    if run_cols != RUN_ALL:
        raise SchemaVersionError(
            f"store {url} is from before queues, schedules and run search: upgrade it with "
            "`daybook migrate` (reading never upgrades a store), then search it"
        )


def attr_text(value: Any) -> str:
    """How a search attribute's value is indexed and matched: its compact JSON text."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def claim_queued(p: Marks, lock: str = "") -> str:
    """Lease the first runnable run of queue `queue` (by priority, then age) that every limit of
    the queue allows now; `lock` is PostgreSQL's row lock clause for the candidate."""
    now = p("now")
    runnable = (
        f"((r.status IN ('pending', 'running') AND (r.lease_owner IS NULL OR r.lease_expires < {now}) "
        f"AND (r.wake_at IS NULL OR r.wake_at <= {now})) OR (r.status = 'suspended' AND "
        f"r.wake_at <= {now} AND (r.lease_owner IS NULL OR r.lease_expires < {now})))"
    )
    # A run occupies a slot while a live lease holds it (it executes now); one per worker counts
    # the leases of this worker's process (the owner id up to its last field).
    # Uncorrelated with the candidate (the queue is a parameter): each count is computed once.
    live = f"a.queue = {p('queue')} AND a.lease_owner IS NOT NULL AND a.lease_expires >= {now}"
    worker, version = f"CAST({p('worker')} AS TEXT)", f"CAST({p('version')} AS TEXT)"
    mine = f"substr(a.lease_owner, 1, length({worker})) = {worker}"
    return (
        f"UPDATE daybook_runs SET lease_owner = {p('owner')}, lease_expires = {p('until')}, "
        f"wake_at = NULL, status = 'running', dequeued_at = COALESCE(dequeued_at, {now}) "
        "WHERE run_id = (SELECT r.run_id FROM daybook_runs r JOIN daybook_queues q ON q.name = r.queue "
        f"WHERE r.queue = {p('queue')} AND r.status IN ('pending', 'running', 'suspended') AND {runnable} "
        f"AND ({version} IS NULL OR r.code_version = {version}) "
        f"AND (q.concurrency IS NULL OR (SELECT COUNT(*) FROM daybook_runs a WHERE {live}) < q.concurrency) "
        f"AND (q.per_worker IS NULL OR "
        f"(SELECT COUNT(*) FROM daybook_runs a WHERE {live} AND {mine}) < q.per_worker) "
        # The rate counts first takes: a run already taken once (woken, taken over) is no new start.
        "AND (r.dequeued_at IS NOT NULL OR q.rate_limit IS NULL OR (SELECT COUNT(*) FROM daybook_runs s "
        f"WHERE s.queue = {p('queue')} AND s.dequeued_at > {now} - q.rate_period) < q.rate_limit) "
        # A partition key is held from a run's first take until it finishes.
        "AND (r.partition_key IS NULL OR NOT EXISTS (SELECT 1 FROM daybook_runs o WHERE "
        f"o.queue = {p('queue')} AND o.partition_key = r.partition_key AND o.run_id <> r.run_id AND "
        f"o.dequeued_at IS NOT NULL AND o.status NOT IN ({_FINISHED}))) "
        f"ORDER BY r.priority, r.created_at, r.run_id LIMIT 1{lock}) RETURNING run_id"
    )


def ensure_queue(p: Marks) -> str:
    return (
        f"INSERT INTO daybook_queues ({QUEUE_COLUMNS}) VALUES "
        f"({p('name')}, NULL, NULL, NULL, NULL, {p('now')}) ON CONFLICT (name) DO NOTHING"
    )


def declare_queue(p: Marks) -> str:
    return (
        f"INSERT INTO daybook_queues ({QUEUE_COLUMNS}) VALUES ({p('name')}, {p('concurrency')}, "
        f"{p('per_worker')}, {p('rate_limit')}, {p('rate_period')}, {p('now')}) "
        "ON CONFLICT (name) DO UPDATE SET concurrency = excluded.concurrency, "
        "per_worker = excluded.per_worker, rate_limit = excluded.rate_limit, "
        "rate_period = excluded.rate_period, updated_at = excluded.updated_at"
    )


def queue_rows(p: Marks) -> str:
    """Every queue with its settings and how many of its runs wait and run now."""
    return (
        f"SELECT q.name, q.concurrency, q.per_worker, q.rate_limit, q.rate_period, "
        "(SELECT COUNT(*) FROM daybook_runs r WHERE r.queue = q.name AND r.status = 'pending'), "
        "(SELECT COUNT(*) FROM daybook_runs r WHERE r.queue = q.name AND r.lease_owner IS NOT NULL "
        f"AND r.lease_expires >= {p('now')}) FROM daybook_queues q ORDER BY q.name"
    )


def search(p: Marks, filters: dict[str, Any], after: tuple[float, str] | None) -> tuple[str, dict[str, Any]]:
    """Run headers matching `filters` (workflow, status, since, until, parent, queue,
    attributes), newest first, after the cursor position `after` (created_at, run_id)."""
    where: list[str] = []
    params: dict[str, Any] = {}
    for column, key in (("workflow", "workflow"), ("status", "status"), ("queue", "queue")):
        if filters.get(key) is not None:
            where.append(f"r.{column} = {p(key)}")
            params[key] = filters[key]
    if filters.get("parent") is not None:
        where.append(f"r.parent_run = {p('parent')}")
        params["parent"] = filters["parent"]
    if filters.get("since") is not None:
        where.append(f"r.created_at >= {p('since')}")
        params["since"] = filters["since"]
    if filters.get("until") is not None:
        where.append(f"r.created_at < {p('until')}")
        params["until"] = filters["until"]
    for i, (name, value) in enumerate(sorted((filters.get("attributes") or {}).items())):
        where.append(
            "EXISTS (SELECT 1 FROM daybook_attributes t WHERE t.run_id = r.run_id AND "
            f"t.name = {p(f'an{i}')} AND t.value = {p(f'av{i}')})"
        )
        params[f"an{i}"], params[f"av{i}"] = name, attr_text(value)
    if after is not None:
        where.append(f"(r.created_at < {p('at')} OR (r.created_at = {p('at')} AND r.run_id > {p('rid')}))")
        params["at"], params["rid"] = after
    columns = ", ".join(f"r.{c.strip()}" for c in RUN_ALL.split(","))
    sql = f"SELECT {columns} FROM daybook_runs r"
    if where:
        sql += " WHERE " + " AND ".join(where)
    return sql + f" ORDER BY r.created_at DESC, r.run_id LIMIT {p('limit')}", params


def put_schedule(p: Marks) -> str:
    """Add a schedule or change its definition; a changed one keeps when it last fired."""
    values = ", ".join(p(c.strip()) for c in SCHEDULE_COLUMNS.split(","))
    return (
        f"INSERT INTO daybook_schedules ({SCHEDULE_COLUMNS}) VALUES ({values}) "
        "ON CONFLICT (name) DO UPDATE SET workflow = excluded.workflow, ref = excluded.ref, "
        "cron = excluded.cron, input = excluded.input, queue = excluded.queue, "
        "catchup = excluded.catchup, grace = excluded.grace, updated_at = excluded.updated_at"
    )


def advance_schedule(p: Marks) -> str:
    """Move a schedule's last firing forward (never back: two workers may both advance it)."""
    return (
        f"UPDATE daybook_schedules SET last_fired = {p('fired')} "
        f"WHERE name = {p('name')} AND last_fired < {p('fired')}"
    )


def pause_schedule(p: Marks) -> str:
    """Pause, or resume from now: firings missed while paused are not caught up."""
    return (
        f"UPDATE daybook_schedules SET paused = {p('paused')}, updated_at = {p('now')}, "
        f"last_fired = CASE WHEN {p('paused')} = 0 AND last_fired < {p('now')} THEN {p('now')} "
        f"ELSE last_fired END WHERE name = {p('name')}"
    )
