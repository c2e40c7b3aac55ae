"""The store protocol in parts, each the surface one concern of daybook uses; `Store` is their
union. A part that writes extends its read part (`Journal(JournalReads)`, ...), and `ReadStore`
is the union of the read parts: what a read-only handle (`read_only.ReadOnlyStore`) implements,
and the type of `open_store(url, read_only=True)`. Every method is one durable step: when it
returns, what it wrote survives a crash of this process (and, with the default durability, a
power cut). A method added to a write part is refused by a read-only handle with no list to
keep (`WRITES` is derived here); one added to a read part must be implemented there (mypy)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from ..records import Event, RunInfo
from .chunks import Chunk
from .tx_rows import TxRow
from .tx_signal import TxSignal


class JournalReads(Protocol):
    """A run's header and journal, read."""

    def get_run(self, run_id: str) -> RunInfo | None: ...

    def list_runs(self, status: str | None = None, limit: int = 100) -> list[RunInfo]:
        """Run headers, newest first; a header that does not decode is skipped (in `damage`)."""

    def runs_page(self, filters: dict[str, Any], limit: int, offset: int = 0) -> list[RunInfo]:
        """One page of the runs list: headers matching `filters` (`run_page.FILTERS`), newest
        first, `limit` of them from the `offset`-th; one that does not decode is skipped."""

    def run_counts(self, filters: dict[str, Any]) -> dict[str, int]:
        """How many runs match `filters` (as `runs_page`), by status; {} filters: every run."""

    def load(self, run_id: str, after: int = 0, until: int | None = None) -> list[Event]:
        """The run's journal in seq order, in one query: the whole of it, or only the rows
        after seq `after` (what a follower has not seen yet) up to seq `until`."""

    def open_effects(self, skip_damaged: bool = False) -> list[Event]:
        """The latest row of every effect whose outcome is not settled: in flight, unknown, or
        failed with a retry to come. A row that does not decode raises CorruptJournal, or with
        `skip_damaged` (a listing, not a decision) is left out and its run put in `damage`."""

    def load_named(self, run_id: str, kinds: tuple[str, ...], prefixes: tuple[str, ...]) -> list[Event]:
        """The run's journal rows of one of `kinds` or whose name starts with one of `prefixes`
        (letters, digits, `-` and `:` only), in seq order: what a listing across runs needs of
        each (e.g. its gates) without decoding all of its rows. A row of the run that would not
        decode, read or not, raises CorruptJournal as `load` would."""

    def events_of_kind(self, kind: str) -> list[Event]:
        """Every journal row of one kind across all runs, in (run, seq) order (e.g. obligations);
        a row that does not decode is left out and its run put in `damage`."""

    def find_intent(self, key: str) -> Event | None:
        """The intent row that issued idempotency key `key` (one at most: keys are unique)."""


class Journal(JournalReads, Protocol):
    """Runs and their append-only journal: a header created with its first row, rows appended,
    the run ended or moved by an operator, each together with its row."""

    def create_run(self, info: RunInfo, first: Event, more: Sequence[Event] = ()) -> bool:
        """Insert the header and the first journal row together (and the rows `more` after it, in
        the same transaction: a run created with its first act); False if the run id exists."""

    def append(self, event: Event) -> None:
        """Commit one journal row durably; raises LeaseLost if the seq is taken, DuplicateKey."""

    def append_batch(self, events: list[Event]) -> None:
        """Commit consecutive journal rows of one run in one transaction, all or none (a held
        outcome with the run's next row: one durable commit); raises as `append` does."""

    def finish(
        self,
        run_id: str,
        owner: str,
        status: str,
        result: object,
        error: object,
        event: Event | None,
        now: float,
        held: Sequence[Event] = (),
    ) -> None:
        """Set the header's status (and release the lease) together with an optional journal row,
        and the rows `held` before it (outcomes held for the run's next row), all in one commit."""

    def transition(
        self, run_id: str, allowed: tuple[str, ...], status: str, error: object, event: Event, now: float
    ) -> bool:
        """An operator's change of a run's status (retry, cancel), whoever holds its lease: if the
        status is one of `allowed`, set it (and `error`), drop the lease, and append `event` in
        the same transaction; False (nothing written) otherwise. `pending` makes it due now.
        Raises LeaseLost if `event`'s seq was taken meanwhile (read the journal again)."""


class Leases(Protocol):
    """Who executes a run: leases taken, renewed, given back, and a run parked or deferred."""

    def claim(self, run_id: str, owner: str, ttl: float, now: float, expect: str | None) -> bool:
        """Take the lease if it is free, expired, already ours, or held by `expect`."""

    def claim_next(self, owner: str, ttl: float, now: float, version: str | None = None) -> str | None:
        """Lease the oldest runnable run (pending; running with a lapsed lease and not deferred
        past now; suspended and due)."""

    def hold(
        self, run_id: str, owner: str, ttl: float, now: float, expect: str | None, allowed: tuple[str, ...]
    ) -> bool:
        """Take the lease as `claim` does, but only while the run's status is one of `allowed`,
        and without changing it: an operator's action on a stopped run (a recovery) that no
        other process may run at the same time, and no worker may mistake for a run to execute."""

    def renew(self, run_id: str, owner: str, ttl: float, now: float) -> bool: ...

    def release(self, run_id: str, owner: str) -> None: ...

    def defer(self, run_id: str, owner: str, wake_at: float, error: str, now: float) -> None:
        """Give a running run back after a store failure, not to be taken again before
        `wake_at` (a backoff); `error` (JSON text) says why, and counts the failures."""

    def suspend(self, run_id: str, owner: str, wake_at: float | None, now: float) -> None:
        """Park the run (status `suspended`, lease released) until `wake_at` or a signal."""


class InboxReads(Protocol):
    """A run's signals and the approvers, read."""

    def inbox(self, run_id: str) -> list[tuple[int, str, str, str, float]]:
        """The run's signals in arrival order: (id, name, payload JSON text, sender, at)."""

    def approvers(self) -> dict[str, str]:
        """Approver name -> hash of its token."""


class Inbox(InboxReads, Protocol):
    """Signals to runs (and the approvers whose tokens verdicts carry)."""

    def signal(
        self,
        run_id: str,
        name: str,
        payload: str,
        sender: str,
        now: float,
        any_status: bool = False,
        wake: bool = True,
    ) -> int | None:
        """Append a signal to the run's inbox and (unless not `wake`) wake it; None if the run is
        missing, or over (unless `any_status`: a late verdict is still recorded against a
        finished run). A refused verdict is recorded without waking the run."""

    def set_approver(self, name: str, token_hash: str, now: float) -> None:
        """Add an approver, or replace its token (the old token stops working)."""


class CommitsReads(Protocol):
    """Committed records, the audit log and what is staged, read."""

    def staging(self) -> list[tuple[str, str, str, float]]:
        """Staged records of open or abandoned transactions: (txid, collection, record_id, at)."""

    def get_record(self, collection: str, record_id: str) -> tuple[str, str] | None:
        """A committed record's JSON and the commit that wrote it."""

    def commits(self) -> list[tuple[str, str | None, str, str, float, str]]:
        """The audit log: (commit_id, key, message, author, at, records JSON), oldest first."""


class Commits(CommitsReads, Protocol):
    """Records staged by an open transaction, made visible by one commit (`book.transaction`)."""

    def stage(self, txid: str, collection: str, record_id: str, data: str, now: float) -> None:
        """Write one record of an open transaction durably, invisible until `commit_tx`."""

    def commit_tx(
        self, txid: str, commit_id: str, key: str | None, message: str, author: str, now: float
    ) -> tuple[str, list[list[str]]]:
        """Make a transaction's staged records visible with one audit row, atomically; with a
        `key` already committed, return that commit instead. Returns (commit id, records)."""

    def abandon_tx(self, txid: str) -> None:
        """Drop a transaction's staged records (nothing of it ever became visible)."""


class EntitiesReads(Protocol):
    """Coordination entities, read."""

    def entity_view(
        self, name: str
    ) -> tuple[str | None, float | None, list[tuple[int, float, str, str, str]]] | None:
        """The entity's (holder, deadline, log) from one consistent read, the log as
        (id, at, agent, action, data JSON text) rows in order; None if it was never claimed."""

    def entity_list(self) -> list[tuple[str, str | None, float | None]]:
        """Every entity as (name, holder, deadline), by name."""


class Entities(EntitiesReads, Protocol):
    """Coordination entities (`daybook.entity`): leases with a log."""

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


class EpochsReads(Protocol):
    """Atomix transaction headers, read, and the wake-up of frontier waiters."""

    def tx_rows(
        self, run_id: str | None = None, open_only: bool = False, before: int | None = None
    ) -> list[TxRow]:
        """Transaction headers by epoch (tx_id, run_id, epoch, scopes JSON, status, attempt,
        retries, created_at, updated_at): all, one run's, the open ones, below an epoch."""

    def tx_signal(self) -> TxSignal:
        """What a frontier waiter sleeps on: moves when a transaction header may have ended
        (this handle's own ends; on PostgreSQL any process's, by LISTEN/NOTIFY)."""


class Epochs(EpochsReads, Protocol):
    """Atomix transactions (`daybook.tx`): epochs allocated and headers moved, each with its
    journal row."""

    def tx_begin(
        self,
        tx_id: str,
        run_id: str,
        scopes: str,
        attempt: int,
        retries: int,
        event: Event,
        now: float,
        siblings: str = "",
    ) -> int:
        """Allocate the next epoch (totally ordered, visible in order), insert the transaction's
        header as open and its journal row `event` (given `data["epoch"]`) atomically.
        `siblings`: the id prefix of transactions that never block this one (a speculation's
        branches), left out of what `tx_seen` returns."""

    def tx_mark(self, tx_id: str, status: str, event: Event, now: float, before: Event | None = None) -> bool:
        """Set a transaction's status with its journal row atomically; False if it had ended.
        `before`: a row journaled just before `event` (the status the header passed through on
        its way), written in the same database transaction."""

    def tx_seen(self, tx_id: str) -> list[TxRow] | None:
        """The open headers with an epoch below `tx_id`'s that its `tx_begin` read in the database
        transaction that drew the epoch (its `siblings` left out), once; None if the backend does
        not read them there."""


class DispatchReads(Protocol):
    """Queues, schedules and run search (`daybook.dispatch`), read."""

    def queue_rows(self, now: float) -> list[tuple[Any, ...]]:
        """Every queue: (name, concurrency, per_worker, rate_limit, rate_period, pending, active)."""

    def queue_names(self) -> list[str]:
        """The names of every queue, sorted."""

    def search_runs(
        self, filters: dict[str, Any], limit: int, after: tuple[float, str] | None = None
    ) -> list[RunInfo]:
        """Run headers matching `filters` (workflow, status, since, until, parent, queue,
        attributes), newest first, strictly after the position `after` (created_at, run_id)."""

    def attributes(self, run_id: str) -> dict[str, Any]:
        """The run's search attributes (latest value of each)."""

    def schedule_rows(self) -> list[dict[str, Any]]:
        """Every schedule as a dict of its columns, by name."""


class Dispatch(DispatchReads, Protocol):
    """Queues, schedules and run search written (the SQL in `dispatch_sql`)."""

    def ensure_queue(self, name: str, now: float) -> None:
        """Create queue `name` with no limits if it does not exist yet."""

    def declare_queue(
        self,
        name: str,
        concurrency: int | None,
        per_worker: int | None,
        rate_limit: int | None,
        rate_period: float | None,
        now: float,
    ) -> None:
        """Set queue `name`'s limits (None: no such limit), creating it if needed."""

    def claim_queued(
        self, queue: str, owner: str, ttl: float, now: float, version: str | None = None
    ) -> str | None:
        """Lease the first runnable run of `queue` (lowest priority number, then oldest) that
        the queue's limits allow now (concurrency, per worker, rate, partition key), checked and
        taken atomically across processes; None if there is none."""

    def set_attributes(self, event: Event, attributes: dict[str, Any]) -> None:
        """Append `event` and index the run's search `attributes` in the same transaction."""

    def put_schedule(self, row: dict[str, Any]) -> None:
        """Add or redefine a schedule (a redefined one keeps its pause and last firing)."""

    def drop_schedule(self, name: str) -> bool:
        """Delete a schedule; False if there was none."""

    def pause_schedule(self, name: str, paused: bool, now: float) -> bool:
        """Pause a schedule, or resume it from `now`; False if there is none."""

    def advance_schedule(self, name: str, fired: float) -> None:
        """Record that the schedule's firings up to `fired` are handled (never moves back)."""


class StreamsReads(Protocol):
    """Durable streams' chunks (`ctx.stream`), read."""

    def chunks(
        self,
        run_id: str,
        after: int = 0,
        stream: str | None = None,
        limit: int = 1000,
        act: str | None = None,
        divergent: bool = False,
    ) -> list[Chunk]:
        """The run's chunks after cursor `after`, in cursor order, at most `limit`: of one
        stream or every one, of one act or every one; divergent re-sends only if asked for."""


class Streams(StreamsReads, Protocol):
    """Durable streams' chunks written (`journal.stream`)."""

    def write_chunks(self, run_id: str, chunks: list[Chunk]) -> list[Chunk]:
        """Commit chunks of one run in one transaction, all or none, each at the next cursor
        (their `cursor` field is ignored); returns them with their cursors. A key taken by
        another writer meanwhile raises LeaseLost."""


class Admin(Protocol):
    """The handle itself and the whole store: settings, integrity (`daybook check`, `export
    --raw`), retention (`gc`: a dry run only reads), closing."""

    url: str
    read_only: bool
    # Runs that reads across the store skipped because a row of theirs does not decode:
    # run id -> what is wrong (see `load_listed`). Listings go on without them and flag them.
    damage: dict[str, str]

    def meta_value(self, key: str, default: str) -> str:
        """The store-wide setting `key` (e.g. the default secret key), set to `default` first
        if it has none; a read-only handle only reads (`default` when unset)."""

    def meta_items(self, prefix: str) -> dict[str, str]:
        """Every store-wide setting whose key starts with `prefix` (read only, never sets)."""

    def current_role(self) -> str | None:
        """The database role this handle connects as, journaled beside a name an actor claims;
        None for SQLite, whose only access control is the file's."""

    def raw_rows(self, table: str, run_id: str | None = None) -> list[tuple[Any, ...]]:
        """Rows exactly as stored, JSON as text, nothing decoded: `table` is a key of RAW_TABLES
        (columns as listed there), optionally only one run's, in key order."""

    def journal_run_ids(self) -> list[str]:
        """Every run id that has journal rows (with or without a header)."""

    def quick_check(self) -> list[str]:
        """What the database engine's own consistency check finds ([] when sound)."""

    def gc(
        self, cutoff: float, now: float, who: str, gc_id: str, key: bytes, dry_run: bool
    ) -> dict[str, Any]:
        """Erase the payloads of finished runs last updated before `cutoff`, keeping the audit
        spine, logged in the append-only gc log (see `retention`); `dry_run` only counts."""

    def gc_log(self) -> list[dict[str, Any]]:
        """Every gc pass, oldest first: gc_id, who, at, cutoff, runs, rows."""

    def close(self) -> None: ...


class ReadStore(
    JournalReads,
    InboxReads,
    CommitsReads,
    EntitiesReads,
    EpochsReads,
    DispatchReads,
    StreamsReads,
    Admin,
    Protocol,
):
    """Every read part: what a read-only handle offers."""


class Store(Journal, Leases, Inbox, Commits, Entities, Epochs, Dispatch, Streams, Admin, Protocol):
    """The whole store: every part (what `open_store` returns and `guarded` wraps)."""


def methods(part: type[Any]) -> set[str]:
    """The method names of a protocol part, its bases' included."""
    return {
        name
        for cls in part.__mro__
        if cls.__module__ == __name__
        for name, value in vars(cls).items()
        if callable(value) and not name.startswith("_")
    }


# Store methods that write: a read-only handle refuses them before they reach the database.
WRITES = tuple(sorted(methods(Store) - methods(ReadStore)))
