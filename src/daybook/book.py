"""`Daybook`: the public entry point, a thin facade over the packages that own each noun.

Every method delegates in a line or two: running to `daybook.runtime`, the ledgers to
`daybook.books`, approvals to `daybook.gates`, budgets and entities to `daybook.coordination`,
atomic commits to `daybook.tx`, updates to `daybook.steering`. It is also where the runtime is
given the factory for a run's `ctx` (`daybook.context.Context`).
"""

from __future__ import annotations

import getpass
from collections.abc import Callable, Sequence
from typing import Any

from .books.effects import effects as effect_rows
from .books.effects import find_effect
from .books.obligation import obligations as obligation_rows
from .books.reconcile import reconcile as reconcile_runs
from .books.resolve import MISSING
from .books.resolve import resolve as resolve_effect
from .books.unknowns import unknowns as open_effects
from .books.why import why as why_of
from .context import Context
from .coordination.budget import summary as budget_summary
from .coordination.entity import Entity, Lease, list_leases
from .coordination.pool import BudgetPool
from .errors import ConfigError
from .gates import approval
from .journal import strict as strict_mode
from .records import JSON, SCHEMA_VERSION, Event, RunInfo, RunStatus, bounded, whole
from .runtime import inbox
from .runtime.replay import replay as replay_run
from .runtime.replay import replay_check as replay_runs
from .runtime.runner import Runner
from .runtime.versions import versions as code_versions
from .runtime.workflow import Workflow, load
from .steering.update import update as send_update
from .store import Store, integrity, open_store
from .tx import audit
from .tx import frontier as tx_frontier
from .tx.commit import Transaction, TxResult, run_transaction

# Bounds on the numbers a handle takes: finite, and no larger than a day (a lease or an inline
# wait longer than that is a mistake, and NaN or infinity would stall runs for good).
MAX_SECONDS = 86_400.0
MAX_LIMIT = 1_000_000
MAX_SWEEP = 10 * 365 * 86_400.0


def lease_ttl_of(value: object) -> float:
    return bounded(value, "lease_ttl (seconds)", low=0.0, high=MAX_SECONDS, above=True)


def inline_wait_of(value: object) -> float:
    return bounded(value, "inline_wait (seconds)", low=0.0, high=MAX_SECONDS)


class Daybook:
    """A handle on one store. `Daybook()` opens ./daybook.db (or $DAYBOOK_DB).

    `lease_ttl` is how long a run stays owned by this process without a heartbeat; a process that
    dies on this machine releases its runs at once, one on another host after `lease_ttl`.
    `read_only=True` opens an existing store for reading only: nothing is created, upgraded or
    written (SQLite: a `mode=ro` connection, so a read-only file works and a writer's lock does
    not block it), and every method that writes raises ConfigError.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        lease_ttl: float = 15.0,
        inline_wait: float = 2.0,
        strict: bool = False,
        read_only: bool = False,
    ) -> None:
        lease_ttl = lease_ttl_of(lease_ttl)
        inline_wait = inline_wait_of(inline_wait)
        if strict:
            strict_mode.install()
        self._store: Store = open_store(url, read_only=read_only)
        self._runner = Runner(
            self._store, lease_ttl=lease_ttl, inline_wait=inline_wait, strict=strict, context=Context
        )

    # Settings live in the runner, which reads them on every use: changing one on the handle
    # (say `book.inline_wait = 0` in a test) takes effect for the next run it executes.

    @property
    def store(self) -> Store:
        return self._store

    @property
    def url(self) -> str:
        return self._store.url

    @property
    def owner(self) -> str:
        """The lease owner id of this handle."""
        return self._runner.owner

    @property
    def lease_ttl(self) -> float:
        return self._runner.lease_ttl

    @lease_ttl.setter
    def lease_ttl(self, value: float) -> None:
        self._runner.lease_ttl = self._runner.claims.lease_ttl = lease_ttl_of(value)

    @property
    def inline_wait(self) -> float:
        return self._runner.inline_wait

    @inline_wait.setter
    def inline_wait(self, value: float) -> None:
        self._runner.inline_wait = inline_wait_of(value)

    @property
    def read_only(self) -> bool:
        return self._store.read_only

    @property
    def strict(self) -> bool:
        return self._runner.strict

    @strict.setter
    def strict(self, value: bool) -> None:
        if value:
            strict_mode.install()
        self._runner.strict = value

    def close(self) -> None:
        self.store.close()
        self._runner.close()

    def __enter__(self) -> Daybook:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- running ------------------------------------------------------------------------------

    def run(self, workflow: Any, *args: JSON, run_id: str | None = None, **kwargs: JSON) -> Any:
        """Start a run (or attach to run `run_id` if it exists) and return its result."""
        return self._runner.run(workflow, args, kwargs, run_id)

    async def run_async(self, workflow: Any, *args: JSON, run_id: str | None = None, **kwargs: JSON) -> Any:
        """`run` for `async def` workflows (store writes are short and made inline)."""
        return await self._runner.run_async(workflow, args, kwargs, run_id)

    def submit(self, workflow: Any, *args: JSON, run_id: str | None = None, **kwargs: JSON) -> str:
        """Record a run as `pending` for a worker (`daybook worker`) to execute; returns its id.

        Submitting an id that exists with the same input is a no-op (it returns the id)."""
        return self._runner.submit(workflow, args, kwargs, run_id)

    def resume(self, run_id: str, *, wait: float = 0.0, app: str | None = None) -> Any:
        """Continue a stopped run from its journal, in this process. Completed runs just return.

        `wait` seconds: how long to wait for another owner's lease to expire. `app`: the module or
        script defining the workflow, when it is not importable from the stored reference.
        """
        return self._runner.resume(run_id, _wait_of(wait), app)

    async def resume_async(self, run_id: str, *, wait: float = 0.0, app: str | None = None) -> Any:
        """`resume` for `async def` workflows."""
        return await self._runner.resume_async(run_id, _wait_of(wait), app)

    def execute_claimed(self, run_id: str, app: str | None = None) -> Any:
        """Execute a run whose lease this handle already holds (how a worker runs what it took)."""
        return self._runner.execute_claimed(run_id, app)

    def load_workflow(self, run_id: str, app: str | None = None) -> Workflow[Any]:
        """The workflow a stored run names, imported if needed (ConfigError if it cannot be)."""
        info = self.get_run(run_id)
        return load(info.workflow, info.ref, app)

    def park(self, run_id: str, message: str) -> None:
        """Set a run this handle holds aside as `needs_attention`, releasing its lease."""
        self._runner.park(run_id, message)

    def replay(self, run_id: str, *, app: str | None = None) -> Any:
        """Re-run a run's workflow purely from its journal: no tool or model is called, nothing
        is written, no lease is taken. Returns what the workflow returns; raises
        `NonDeterminismError` if the code asks for anything the journal does not hold."""
        return replay_run(self.store, Context, run_id, app)

    def replay_check(self, run_ids: list[str] | None = None, app: str | None = None) -> list[dict[str, JSON]]:
        """Replay stored histories (default: every completed run) against the code now loaded and
        report each: `ok`, or `diverged` with the error, or `changed` when the result differs."""
        return replay_runs(self.store, Context, run_ids, app)

    def versions(self) -> list[dict[str, JSON]]:
        """In-flight runs by workflow and code version, and how many unfinished runs lack each
        patch marker (at 0 the marker can be deleted)."""
        return code_versions(self.store)

    # -- reading ------------------------------------------------------------------------------

    def get_run(self, run_id: str) -> RunInfo:
        """The run's header (`RunNotFound` if there is none)."""
        return self._runner.claims.get_run(run_id)

    def runs(self, status: str | None = None, limit: int = 100) -> list[RunInfo]:
        """Runs, newest first, optionally of one status (at most `limit`, 1 to 1,000,000). A run
        whose header does not decode is skipped and listed in `damaged()`."""
        if status is not None and status not in {s.value for s in RunStatus}:
            raise ConfigError(
                f"unknown status {status!r}; use one of {', '.join(s.value for s in RunStatus)}"
            )
        return self.store.list_runs(status, whole(limit, "limit", low=1, high=MAX_LIMIT))

    def journal(self, run_id: str) -> list[Event]:
        """The run's journal in order. A read: it never writes (safe on a live run)."""
        self.get_run(run_id)
        return self.store.load(run_id)

    def export(self, run_id: str, *, raw: bool = False) -> dict[str, JSON]:
        """The run and its whole journal as one JSON document. `raw=True` salvages a damaged
        run: every row that decodes as usual, each one that does not as stored (`raw`, the
        payload's text) with an `error`; a damaged header as stored, with `run_error`."""
        if raw:
            return integrity.salvage(self.store, run_id)
        info = self.get_run(run_id)
        return {
            "format": "daybook.export",
            "schema_version": SCHEMA_VERSION,
            "run": info.as_dict(),
            "events": [e.as_dict() for e in self.store.load(run_id)],
        }

    def check(self) -> list[dict[str, JSON]]:
        """Audit the store (`daybook check`): the database's own check (SQLite `quick_check`),
        then every row: headers and journal rows decode, each run's seq runs 1, 2, 3, ... without
        a gap, every attempt and outcome has its intent, side tables hold JSON. One finding per
        problem, as {"run_id", "seq", "problem"}; [] when the store is sound."""
        return integrity.check(self.store)

    def damaged(self) -> dict[str, str]:
        """Runs that listings on this handle skipped because a row of theirs does not decode:
        run id -> what is wrong. `daybook check` finds every such row; `export(run_id,
        raw=True)` salvages what is readable."""
        return dict(self.store.damage)

    # -- the books ----------------------------------------------------------------------------

    def obligations(self, status: str | None = None) -> list[dict[str, JSON]]:
        """Every obligation across runs with its state: open, fulfilled, cancelled, or breached
        (open past its due time). `status` filters on that state."""
        return obligation_rows(self.store, status)

    def effects(
        self, run_id: str | None = None, *, status: str | None = None, tool: str | None = None
    ) -> list[dict[str, JSON]]:
        """The effect ledger: every effect (of one run, or all) with its request, response, key,
        the counterparty's reference, the decision it came from, its compensation handle and its
        status history (one entry per journal row: intent, attempts, each outcome). `status`
        filters on the current status (confirmed, failed, unknown, in flight)."""
        if run_id is not None:
            self.get_run(run_id)
        return effect_rows(self.store, run_id, status=status, tool=tool)

    def find_effect(self, effect: str, step: int | None = None) -> tuple[str, int]:
        """(run id, step) of an effect named by its idempotency key, or by run id and step."""
        return find_effect(self.store, effect, step)

    def why(self, effect: str, step: int | None = None) -> dict[str, JSON]:
        """The decision behind an effect (named by its key, or by run id and step): the effect,
        the recorded decision its intent links to with the decision ledger's reasons, and the
        run's mandate (workflow and input)."""
        run_id, step = self.find_effect(effect, step)
        return why_of(self.get_run(run_id), self.journal(run_id), step)

    def unknowns(self) -> list[dict[str, JSON]]:
        """Effects whose outcome is not settled: unknown, in flight, or waiting to retry."""
        return open_effects(self.store, self.get_run)

    def reconcile(self, run_id: str | None = None, day: str | None = None) -> list[dict[str, JSON]]:
        """Compare the journal with the counterparties' own records (for one run, one day
        (YYYY-MM-DD, local time), or everything) and list the mismatches: `absent_there` and
        `never_issued`. The tools must be imported in this process (`--app` on the CLI)."""
        ids = [run_id] if run_id else [r.run_id for r in self.runs(None, MAX_LIMIT)]
        return reconcile_runs(self.store, ids, day)

    def resolve(
        self,
        run_id: str,
        step: int | None = None,
        *,
        ref: JSON = None,
        confirmed: JSON = MISSING,
        failed: str | None = None,
        absent: bool = False,
        by: str | None = None,
        evidence: str = "",
    ) -> Event:
        """Record, with evidence and who did it, what happened to an effect whose outcome is unknown.

        The effect is named by run id and step, or by its idempotency key alone (`step=None`).
        `confirmed=RESULT`: it happened (RESULT is what the tool would have returned; `ref`, or
        RESULT itself when it is a string, is kept as the counterparty's reference);
        `failed=MESSAGE`: it did not and will not; `absent=True`: the counterparty never received
        it, so resuming sends it again under the same key.
        """
        return resolve_effect(
            self._runner.claims,
            run_id,
            step,
            ref=ref,
            confirmed=confirmed,
            failed=failed,
            absent=absent,
            by=by,
            evidence=evidence,
        )

    # -- atomic commits -----------------------------------------------------------------------

    def transaction(
        self,
        message: str,
        fn: Callable[[Transaction], Any],
        *,
        author: str | None = None,
        key: str | None = None,
        invariants: Sequence[Callable[[dict[tuple[str, str], JSON]], None]] = (),
    ) -> TxResult:
        """Several record writes as one change with one audit entry: `fn(tx)` stages records
        with `tx.put(collection, id, data)`; if it returns and every invariant holds, all of
        them become visible at once, else none. With `key` (e.g. a tool's idempotency key) a
        second call returns the first commit instead of committing again."""
        author = author or getpass.getuser()
        return run_transaction(self.store, message, fn, author=author, key=key, invariants=invariants)

    def record(self, collection: str, record_id: str) -> JSON:
        """A committed record (None if there is none)."""
        return audit.record(self.store, collection, record_id)

    def commits(self) -> list[dict[str, JSON]]:
        """The audit log of transactions, oldest first."""
        return audit.commits(self.store)

    def orphans(self, older_than: float = 0.0) -> list[dict[str, JSON]]:
        """Staged records of transactions that never committed (their process died), older
        than `older_than` seconds."""
        return audit.orphans(self.store, older_than)

    def sweep_orphans(self, older_than: float = 3600.0) -> int:
        """Delete orphaned staging areas older than `older_than` seconds; returns how many
        transactions were swept. (An open transaction younger than that is left alone.)"""
        older_than = bounded(older_than, "older_than (seconds)", low=0.0, high=MAX_SWEEP)
        return audit.sweep_orphans(self.store, older_than)

    # -- Atomix transactions (ctx.transaction) ------------------------------------------------

    def transactions(self, run_id: str | None = None) -> list[dict[str, JSON]]:
        """Transaction attempts by epoch (all, or one run's): tx_id, run_id, epoch, scopes,
        status (open, committing, aborting, committed, aborted, stuck), attempt, retries, times."""
        return tx_frontier.listing(self.store, run_id)

    def frontiers(self) -> list[dict[str, JSON]]:
        """Each scope an open transaction holds: its frontier (the smallest open epoch on an
        overlapping scope), the transaction holding it, and the later ones waiting on it."""
        return tx_frontier.frontiers(self.store)

    # -- operator actions ---------------------------------------------------------------------

    def signal(self, run_id: str, name: str, payload: JSON = None, *, sender: str | None = None) -> int:
        """Send signal `name` to a run: it is kept in the run's inbox (durable, in order) until a
        `ctx.wait_for(name)` consumes it, and wakes the run if it is suspended. Returns its id."""
        return inbox.send(self._runner.claims, run_id, name, payload, sender)

    def update(
        self,
        run_id: str,
        name: str,
        args: JSON = None,
        *,
        timeout: float = 30.0,
        sender: str | None = None,
    ) -> JSON:
        """Send update `name` to a run and wait for its answer (the run serves it with
        `ctx.handle_update`). The request is durable and applied once; if no answer comes within
        `timeout` seconds, `UpdateTimeout` is raised and the request stays queued for the run."""
        return send_update(self._runner.claims, run_id, name, args, timeout=timeout, sender=sender)

    def add_approver(self, name: str) -> str:
        """Register approver `name` (or give it a new token) and return its secret token.

        Only the token's hash is stored; show the token to the approver once."""
        return approval.add_approver(self.store, name)

    def approvals(self) -> list[dict[str, JSON]]:
        """Gates waiting for a verdict, across unfinished runs."""
        return approval.approvals(self.store)

    def verdicts(self, run_id: str | None = None) -> list[dict[str, JSON]]:
        """Every verdict attempt (of one run, or all): `delivered`, `late`, `refused` (with who
        claimed to decide and why) and gates that `timed_out`."""
        if run_id is not None:
            self.get_run(run_id)
        return approval.verdicts(self.store, run_id)

    def approve(
        self,
        run_id: str,
        gate_id: str,
        *,
        approver: str,
        token: str,
        reason: str = "",
        approve: bool = True,
    ) -> str:
        """Deliver a verdict for one gate of a run, as an authenticated approver.

        Returns "delivered", or "late" when the gate already timed out or has a verdict: a late
        verdict is recorded (in the run's inbox, with who and when) and does nothing."""
        return approval.approve(
            self.store, run_id, gate_id, approver=approver, token=token, reason=reason, approve=approve
        )

    # -- budgets and coordination -------------------------------------------------------------

    def budget(self, run_id: str) -> dict[str, dict[str, float]]:
        """A run's budget from its journal: caps (with raises taken so far) and spent totals."""
        self.get_run(run_id)
        return budget_summary(self.store.load(run_id))

    def raise_budget(self, run_id: str, *, by: str | None = None, **amounts: float) -> int:
        """Raise caps of a run (e.g. `usd=10`): a journaled act, applied when the run next needs
        it; returns the signal id."""
        if not amounts or any(v <= 0 for v in amounts.values()):
            raise ConfigError("raise_budget needs positive amounts, e.g. usd=10")
        return inbox.send(self._runner.claims, run_id, "budget:raise", dict(amounts), by, internal=True)

    def budget_pool(self, name: str) -> BudgetPool:
        """The shared budget pool `name`: `.set_cap(usd=...)`, `.totals()`, `.draw(agent, ...)`."""
        return BudgetPool(self.store, name)

    def entity(self, name: str) -> Entity:
        """The coordination entity `name`: a lease (`claim`, `release`) and an append-only log
        (`record`, `view`) shared by every process on this store. It exists once first claimed."""
        return Entity(self.store, name)

    def leases(self) -> list[Lease]:
        """Every coordination entity with its holder, deadline and lease state (a read)."""
        return list_leases(self.store)


def _wait_of(value: object) -> float:
    return bounded(value, "wait (seconds)", low=0.0, high=MAX_SECONDS)
