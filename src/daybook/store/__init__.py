"""The store protocol and `open_store(url)`: the one small surface every backend implements.

Each method is one durable step: when it returns, what it wrote survives a crash of this process
(and, with the default durability, a power cut). Journal rows are append-only; only the run
header (status, lease) changes in place. Backends: `sqlite` (with `group` commit) and `postgres`
(with `postgres_link`, a connection re-established when the server drops it), each with its
schema and migrations (`sqlite_schema`, `postgres_schema`); `rows` maps rows to
records.

May import: `daybook.errors`, `daybook.records`. The two backends never import each other.
"""

from __future__ import annotations

import os
from typing import Protocol

from ..errors import ConfigError
from ..records import Event, RunInfo

DEFAULT_URL = "sqlite:///daybook.db"


class Store(Protocol):
    url: str

    def create_run(self, info: RunInfo, first: Event) -> bool:
        """Insert the header and the first journal row together; False if the run id exists."""

    def get_run(self, run_id: str) -> RunInfo | None: ...

    def list_runs(self, status: str | None = None, limit: int = 100) -> list[RunInfo]: ...

    def claim(self, run_id: str, owner: str, ttl: float, now: float, expect: str | None) -> bool:
        """Take the lease if it is free, expired, already ours, or held by `expect`."""

    def claim_next(self, owner: str, ttl: float, now: float, version: str | None = None) -> str | None:
        """Lease the oldest runnable run (pending; running with a lapsed lease and not deferred
        past now; suspended and due)."""

    def renew(self, run_id: str, owner: str, ttl: float, now: float) -> bool: ...

    def release(self, run_id: str, owner: str) -> None: ...

    def append(self, event: Event) -> None:
        """Commit one journal row durably; raises LeaseLost if the seq is taken, DuplicateKey."""

    def finish(
        self,
        run_id: str,
        owner: str,
        status: str,
        result: object,
        error: object,
        event: Event | None,
        now: float,
    ) -> None:
        """Set the header's status (and release the lease) together with an optional journal row."""

    def defer(self, run_id: str, owner: str, wake_at: float, error: str, now: float) -> None:
        """Give a running run back after a store failure, not to be taken again before
        `wake_at` (a backoff); `error` (JSON text) says why, and counts the failures."""

    def suspend(self, run_id: str, owner: str, wake_at: float | None, now: float) -> None:
        """Park the run (status `suspended`, lease released) until `wake_at` or a signal."""

    def signal(
        self, run_id: str, name: str, payload: str, sender: str, now: float, any_status: bool = False
    ) -> int | None:
        """Append a signal to the run's inbox and wake it; None if the run is missing, or over
        (unless `any_status`: a late verdict is still recorded against a finished run)."""

    def inbox(self, run_id: str) -> list[tuple[int, str, str, str, float]]:
        """The run's signals in arrival order: (id, name, payload JSON text, sender, at)."""

    def set_approver(self, name: str, token_hash: str, now: float) -> None:
        """Add an approver, or replace its token (the old token stops working)."""

    def approvers(self) -> dict[str, str]:
        """Approver name -> hash of its token."""

    def load(self, run_id: str) -> list[Event]:
        """The run's whole journal in seq order, in one query."""

    def open_effects(self) -> list[Event]:
        """The latest row of every effect whose outcome is not settled: in flight, unknown, or
        failed with a retry to come."""

    def stage(self, txid: str, collection: str, record_id: str, data: str, now: float) -> None:
        """Write one record of an open transaction durably, invisible until `commit_tx`."""

    def commit_tx(
        self, txid: str, commit_id: str, key: str | None, message: str, author: str, now: float
    ) -> tuple[str, list[list[str]]]:
        """Make a transaction's staged records visible with one audit row, atomically; with a
        `key` already committed, return that commit instead. Returns (commit id, records)."""

    def abandon_tx(self, txid: str) -> None:
        """Drop a transaction's staged records (nothing of it ever became visible)."""

    def staging(self) -> list[tuple[str, str, str, float]]:
        """Staged records of open or abandoned transactions: (txid, collection, record_id, at)."""

    def get_record(self, collection: str, record_id: str) -> tuple[str, str] | None:
        """A committed record's JSON and the commit that wrote it."""

    def commits(self) -> list[tuple[str, str | None, str, str, float, str]]:
        """The audit log: (commit_id, key, message, author, at, records JSON), oldest first."""

    def events_of_kind(self, kind: str) -> list[Event]:
        """Every journal row of one kind across all runs, in (run, seq) order (e.g. obligations)."""

    def find_intent(self, key: str) -> Event | None:
        """The intent row that issued idempotency key `key` (one at most: keys are unique)."""

    def close(self) -> None: ...

    # -- coordination entities (daybook.entity) ----------------------------------------------

    def entity_claim(self, name: str, agent: str, ttl: float, now: float) -> bool:
        """Compare-and-set the entity's lease to (agent, now + ttl) if it is free, expired
        (deadline < now) or already `agent`'s (a renewal), logging a `claim` entry in the same
        transaction; creates the entity on its first claim. True if `agent` won.

        Each entity write takes effect at max(now, the time of the entity's last entry), so a
        call that waited behind a later one never logs a time before it."""

    def entity_release(self, name: str, agent: str, now: float) -> bool:
        """Free the lease if `agent` holds it live at `now`, logging a `release` entry with it."""

    def entity_record(self, name: str, agent: str, action: str, data_json: str, now: float) -> bool:
        """Append (now, agent, action, data) to the entity's log, only if `agent` holds a live
        lease at `now` (checked and written atomically); False, writing nothing, otherwise."""

    def entity_view(
        self, name: str
    ) -> tuple[str | None, float | None, list[tuple[int, float, str, str, str]]] | None:
        """The entity's (holder, deadline, log) from one consistent read, the log as
        (id, at, agent, action, data JSON text) rows in order; None if it was never claimed."""

    def entity_list(self) -> list[tuple[str, str | None, float | None]]:
        """Every entity as (name, holder, deadline), by name."""


def resolve_url(url: str | None) -> str:
    """The URL a bare `Daybook()` or CLI without --db uses: $DAYBOOK_DB, else ./daybook.db."""
    return url or os.environ.get("DAYBOOK_DB") or DEFAULT_URL


def open_store(url: str | None = None) -> Store:
    url = resolve_url(url)
    if url.startswith(("postgresql://", "postgres://")):
        from .postgres import PostgresStore

        return PostgresStore(url)
    if url.startswith("sqlite:") or "://" not in url:
        from .sqlite import SQLiteStore

        return SQLiteStore(url)
    raise ConfigError(
        f"unsupported store URL {url!r}: use sqlite:///path/to/file.db (or a plain path) "
        "or postgresql://user@host:port/dbname"
    )
