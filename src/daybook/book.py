"""`Daybook`: the public entry point, a thin facade over the packages that own each noun.

Every method delegates in a line or two: running to `daybook.runtime`, the ledgers (the cost
ledger too) to `daybook.books`, approvals to `daybook.gates`, queues, schedules and run search to
`daybook.dispatch` (a mixin), budgets and entities to `daybook.coordination`, atomic commits to
`daybook.tx`, updates to `daybook.steering`. It gives the runtime the factory for a run's `ctx`.
"""

from __future__ import annotations

import contextlib
import functools
import getpass
import time
from collections.abc import Callable, Sequence
from typing import Any

from .books import cost as ledger
from .books.methods import LedgerMethods
from .books.reconcile import reconcile as reconcile_runs
from .checks import checked
from .context import Context
from .coordination.budget import summary as budget_summary
from .coordination.entity import Entity, Lease, list_leases
from .coordination.methods import StreamMethods
from .coordination.pool import BudgetPool
from .dispatch.methods import DispatchMethods
from .errors import ConfigError, DaybookError
from .gates import roster
from .gates.delivery import background as outbox_deliverer
from .gates.methods import GateMethods
from .hints import name_the_store
from .journal import price
from .journal import strict as strict_mode
from .records import JSON, MAX_SECONDS, SCHEMA_VERSION, Event, RunInfo, RunStatus, bounded
from .recovery.compensation import Compensation, unwind
from .recovery.methods import RecoveryMethods
from .runtime import operator
from .runtime.inbox import ENDED, notify
from .runtime.replay import replay as replay_run
from .runtime.replay import replay_check as replay_runs
from .runtime.runner import Runner
from .runtime.versions import versions as code_versions
from .runtime.workflow import Apps, Workflow, load
from .steering.checkpoint import checkpoint as checkpoint_of
from .steering.expiry import expire as expire_runs
from .steering.methods import MessageMethods
from .steering.revision import binding as revision_binding
from .steering.revision import steer as steer_run
from .store import Store, integrity, open_store, resolve_url, retention
from .store.codec import PayloadCodec
from .store.codec import from_env as codec_from_env
from .store.guarded import guard
from .store.keys import bind_key, key_for
from .store.secrets import concealer_for
from .telemetry.switch import span_watcher
from .tx import audit
from .tx.commit import Transaction, TxResult, run_transaction
from .tx.facet import release_policy
from .tx.methods import TxMethods
from .workspace.methods import WorkspaceMethods

# A handle's numbers are finite, its waits at most a day (records.MAX_SECONDS: longer is a
# mistake; NaN or infinity stalls runs).
MAX_LIMIT = 1_000_000
MAX_SWEEP = 10 * 365 * 86_400.0


def lease_ttl_of(value: object) -> float:
    return bounded(value, "lease_ttl (seconds)", low=0.0, high=MAX_SECONDS, above=True)


def inline_wait_of(value: object) -> float:
    return bounded(value, "inline_wait (seconds)", low=0.0, high=MAX_SECONDS)


@functools.partial(checked, prefix="book")  # each method checks its arguments (checks.RULES)
@name_the_store(resolve_url)  # the `daybook CMD` an error suggests names this store (--db)
class Daybook(
    DispatchMethods,
    RecoveryMethods,
    TxMethods,
    GateMethods,
    LedgerMethods,
    MessageMethods,
    StreamMethods,
    WorkspaceMethods,
):
    """A handle on one store. `Daybook()` opens ./daybook.db (or $DAYBOOK_DB).

    `lease_ttl` is how long a run stays owned by this process without a heartbeat; a process that
    dies on this machine releases its runs at once, one on another host after `lease_ttl`.
    `read_only=True` opens an existing store for reading only: nothing is created, upgraded or
    written (SQLite: a `mode=ro` connection, so a read-only file works and a writer's lock does
    not block it), and every method that writes raises ConfigError.
    `on_error`: what an exception the workflow did not raise on purpose does to its run:
    `"park"` (default: `needs_attention`, journal kept, `retry` after a fix) or `"fail"`
    (terminal `failed`). Raised on purpose: `WorkflowFailed`, a certain `StepFailed`,
    `BudgetExceeded`, and what the workflow lists in `@workflow(fail_on=...)`.
    `secret_key`: the key of the digests secrets are journaled as (else `$DAYBOOK_SECRET_KEY`,
    else a key kept in the store; see docs/security.md). `codec`: a payload codec the
    store applies to every payload (`FernetCodec`, `RedactingCodec`; else `$DAYBOOK_CODEC_KEY`).
    `gate_irreversible`: True (any approver) or approvers' names puts every irreversible
    `ctx.effect` outside a transaction through an approval gate first (the one-effect
    transaction's release policy); False (default) runs it at once.
    `approvers_file`: the approvers file, outside the store, whose public keys verdicts and
    operators' acts are checked against (else `$DAYBOOK_APPROVERS_FILE`, else beside a SQLite
    store or under ~/.config/daybook/approvers for PostgreSQL; see `gates.roster`).
    `defer_outcomes`: True (default) commits the confirmed outcome of a tool whose unknown
    daybook settles by itself (`reconcile=`, or `idempotent=True`) with the run's next journal
    row: one commit (one fsync) per such effect step instead of two. A crash in between leaves
    the step's intent without its outcome, which its status query or same-key re-send settles
    on resume (docs/guarantees.md, "One fsync per effect step"). False: every outcome is
    committed on its own before the workflow goes on. `otel`: True (the program's tracer
    provider, else one from `OTEL_*`) or a tracer provider exports OpenTelemetry spans of the runs
    this handle executes, each step once overall (docs/observability.md; `daybook-runtime[otel]`);
    None (default): on if `$DAYBOOK_OTEL` is 1.
    `notify`: sinks (`Webhook(url, secret=Secret(...))`, `LogSink()`) this handle's thread
    delivers the approval outbox to, each request once (docs/notifications.md); None: none.
    `prices`: model prices over the shipped table (a mapping, a JSON file; docs/cost.md).
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        lease_ttl: float = 15.0,
        inline_wait: float = 2.0,
        strict: bool = False,
        read_only: bool = False,
        on_error: str = "park",
        secret_key: str | bytes | None = None,
        codec: PayloadCodec | None = None,
        gate_irreversible: bool | Sequence[str] = False,
        approvers_file: str | None = None,
        defer_outcomes: bool = True,
        otel: Any = None,
        notify: Sequence[Any] | None = None,
        prices: price.Source = None,
    ) -> None:
        lease_ttl = lease_ttl_of(lease_ttl)
        inline_wait = inline_wait_of(inline_wait)
        policy = release_policy(gate_irreversible, "Daybook(gate_irreversible=...)")
        if strict:
            strict_mode.install()
        # Every payload passes the guard: secrets become digests, the codec (if any) encodes.
        self._store: Store = guard(open_store(url, read_only=read_only), codec or codec_from_env())
        bind_key(self._store, secret_key)
        roster.bind(self._store, approvers_file)
        if on_error not in ("park", "fail"):
            raise ConfigError(f"on_error must be 'park' or 'fail', not {on_error!r}")
        self.prices = price.table(prices)  # the shipped defaults, `prices` over them
        self._runner = Runner(
            self._store,
            lease_ttl=lease_ttl,
            inline_wait=inline_wait,
            strict=strict,
            context=functools.partial(Context, prices=self.prices),
            park=on_error == "park",
            gate_irreversible=policy,
            defer_outcomes=bool(defer_outcomes),
        )
        self._runner.recover = self._auto_recover
        self._runner.claims.trusted = functools.partial(revision_binding, self._store)
        self._runner.watcher = self._spans = None if read_only else span_watcher(self._store, otel)
        # Approval requests from the outbox, sent by a thread of this handle to these sinks only
        # (sinks come from the process's configuration, never from the store).
        self._deliverer = outbox_deliverer(self._store, notify)

    # Settings live in the runner, which reads them on every use: changing one on the handle
    # (say `book.inline_wait = 0` in a test) takes effect for the next run it executes.

    @property
    def store(self) -> Store:
        return self._store

    @property
    def url(self) -> str:
        return self._store.url

    def conceal(self, value: JSON) -> JSON:
        """`value` as this store's journal would hold it: each `daybook.Secret` in it as its keyed
        digest (the same concealment as `ctx.effect`'s, and the secret's text is scrubbed from
        this handle's writes from now on). For a run's input that must not hold a secret in
        clear (the MCP proxy's calls): pass the result to `book.run`, the live value around it."""
        return concealer_for(self._store).conceal(value)[0]

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
    def frontier_spin(self) -> float | None:
        """How long a transaction waiting on a frontier stays in this process before its run
        suspends: None (a handle's default) waits here until the transaction's `wait=`; a
        number suspends past it, or at once when the holder's owner is dead (a worker's handles
        use `inline_wait`, so a blocked run frees its slot for the run it waits on)."""
        return self._runner.frontier_spin

    @frontier_spin.setter
    def frontier_spin(self, value: float | None) -> None:
        self._runner.frontier_spin = None if value is None else inline_wait_of(value)

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
        if self._spans is not None:  # what settled since its last poll goes out before the store closes
            self._spans.close()
        if self._deliverer is not None:
            self._deliverer.stop()
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

    def run_below(
        self, parent_run: str, workflow: Any, *args: JSON, run_id: str | None = None, **kwargs: JSON
    ) -> Any:
        """`run`, a new run created below `parent_run` (its child in the tree: its spend counts
        against that run's caps, `daybook cost PARENT --tree` sums it) with no step taken in the
        parent. For calls an integration keys as runs of their own (LangGraph's model calls
        under the run that drives the graph); a workflow starts its children with `ctx.child`."""
        return self._runner.run(workflow, args, kwargs, run_id, parent_run)

    async def run_async(self, workflow: Any, *args: JSON, run_id: str | None = None, **kwargs: JSON) -> Any:
        """`run` for `async def` workflows (store writes are short and made inline)."""
        return await self._runner.run_async(workflow, args, kwargs, run_id)

    def resume(self, run_id: str, *, wait: float = 0.0, app: Apps = None) -> Any:
        """Continue a stopped run from its journal, in this process. Completed runs just return.

        `wait` seconds: how long to wait for another owner's lease to expire. `app`: the module or script
        defining the workflow, when this process has not imported it (also read from `$DAYBOOK_APP`); the
        run's stored reference is never imported on its own."""
        return self._runner.resume(run_id, _wait_of(wait), app)

    async def resume_async(self, run_id: str, *, wait: float = 0.0, app: Apps = None) -> Any:
        """`resume` for `async def` workflows."""
        return await self._runner.resume_async(run_id, _wait_of(wait), app)

    def retry(
        self,
        run_id: str,
        *,
        by: str | None = None,
        app: Apps = None,
        submit: bool = False,
        token: str | None = None,
    ) -> Any:
        """After a code fix, continue a `failed`, parked (`needs_attention`) or `stuck` run from
        its journal: confirmed effects and recorded decisions are replayed, never repeated; the
        step that raised runs again. Journaled with who asked (`by`, default the OS user; a
        registered approver's name needs its `token`, see "Security model" in docs/security.md).

        Runs it here and returns its result (as `resume`), or with `submit=True` only marks it
        due for a worker (`daybook worker`) and returns None."""
        by, who = self._actor(by, token, "retry", run_id)
        operator.retry(self._store, run_id, by, {"identity": who})
        if submit:
            return None
        return self._runner.resume(run_id, 0.0, app)

    def steer(
        self,
        run_id: str,
        kind: str,
        text: str,
        *,
        author: str | None = None,
        target: str | None = None,
        wait: float = 10.0,
        token: str | None = None,
    ) -> dict[str, JSON]:
        """Steer a live run: `kind` "add", "revise" or "retract", from `author`, about `target` (optional).
        The run reads it at its next step boundary (`ctx.revisions()`), which journals the acknowledgement;
        waits up to `wait` seconds for it and returns {"id", "acked", "step", "conflicts", "authenticated"}
        (`steering/revision.py`). A registered approver's name as `author` needs its `token`; any other is
        journaled as unauthenticated."""
        return steer_run(
            self._runner.claims,
            run_id,
            kind,
            text,
            author=author,
            target=target,
            wait=_wait_of(wait),
            token=token,
        )

    def pause(self, run_id: str, *, by: str | None = None, token: str | None = None) -> str:
        """Pause a run, journaled with who asked: at once if no process executes it ("paused"),
        else at its next step boundary once its owner's heartbeat sees it ("requested");
        "already" if it is. Workers leave it; `resume` goes on, `cancel` ends it."""
        by, who = self._actor(by, token, "pause", run_id)
        return operator.pause(self._store, run_id, by, who)

    def cancel(
        self,
        run_id: str,
        compensate: bool = False,
        *,
        by: str | None = None,
        app: Apps = None,
        token: str | None = None,
    ) -> Compensation | None:
        """End a run for good (`cancelled`), journaled with who asked. A live owner stops at its
        next journal write; an act it has in flight then stays open in the effect ledger.

        With `compensate=True` the run's confirmed effects are then undone here, newest first,
        as `ctx.compensate` does (each tool's inverse, once, under `comp/<key>`); it returns
        the `Compensation` report and raises `RunStuck` if something could not be undone.
        Calling it again on a cancelled run finishes an unwind a crash interrupted. `app`
        names the module that registers the tools (when this process has not imported it)."""
        name, who = self._actor(by, token, "cancel", run_id)
        info = self.get_run(run_id)
        for kid in sorted(self._store.search_runs({"parent": run_id}, 10_000), key=lambda r: -r.created_at):
            if kid.status not in ENDED:  # its children first, newest first: the tree unwinds bottom up
                self.cancel(kid.run_id, compensate, by=by, app=app, token=token)
        if info.status != RunStatus.CANCELLED:
            operator.cancel(self._store, run_id, name, compensate, who)
            # A cancelled child wakes its parent now, as an ended one does (the parent reads
            # the outcome; otherwise it would only notice at its next recheck).
            with contextlib.suppress(DaybookError):
                notify(self._store, self.get_run(run_id))
        return unwind(self._store, self.get_run(run_id), self._runner.context, app) if compensate else None

    def execute_claimed(self, run_id: str, app: Apps = None) -> Any:
        """Execute a run whose lease this handle already holds (how a worker runs what it took)."""
        return self._runner.execute_claimed(run_id, app)

    def load_workflow(self, run_id: str, app: Apps = None) -> Workflow[Any]:
        """The workflow a stored run names: registered in this process, or in the code the
        operator names (`app`, `$DAYBOOK_APP`); never from the stored reference (ConfigError,
        naming it and the `--app` to pass)."""
        info = self.get_run(run_id)
        return load(info.workflow, info.ref, app)

    def park(self, run_id: str, message: str) -> None:
        """Set a run this handle holds aside as `needs_attention`, releasing its lease."""
        self._runner.park(run_id, message)

    def replay(self, run_id: str, *, app: Apps = None) -> Any:
        """Re-run a run's workflow purely from its journal: no tool or model is called, nothing
        is written, no lease is taken. Returns what the workflow returns; raises
        `NonDeterminismError` if the code asks for anything the journal does not hold."""
        return replay_run(self.store, Context, run_id, app)

    def replay_check(self, run_ids: list[str] | None = None, app: Apps = None) -> list[dict[str, JSON]]:
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

    def journal(self, run_id: str) -> list[Event]:
        """The run's journal in order. A read: it never writes (safe on a live run)."""
        return self.store.load(self.get_run(run_id).run_id)

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

    def checkpoint(self, run_id: str) -> dict[str, JSON]:
        """The run's checkpoint document: `executor`, `environment` and `progress` parts with
        `schema_version` and `saved_at` (`docs/checkpoint.schema.json`)."""
        return checkpoint_of(self.store, run_id, time.time())

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

    def reconcile(self, run_id: str | None = None, day: str | None = None) -> list[dict[str, JSON]]:
        """Compare the journal with the counterparties' own records (for one run, one day
        (YYYY-MM-DD, local time), or everything) and list the mismatches: `absent_there` and
        `never_issued`. The tools must be imported in this process (`--app` on the CLI)."""
        ids = [run_id] if run_id else [r.run_id for r in self.runs(None, MAX_LIMIT)]
        return reconcile_runs(self.store, ids, day)

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

    # -- budgets and coordination -------------------------------------------------------------

    def budget(self, run_id: str) -> dict[str, dict[str, float]]:
        """A run's budget from its journal: caps (with raises taken so far) and spent totals."""
        return budget_summary(self.store.load(self.get_run(run_id).run_id))

    def cost(self, run_id: str, tree: bool = False) -> ledger.Cost:
        """What run `run_id` (with `tree`, and every run below it) cost, saved and re-spent."""
        return ledger.cost(self.store, self.get_run(run_id).run_id, self.prices, tree)

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

    # -- retention (issue 11 part 2) --------------------------------------------------------

    def gc(
        self,
        older_than: float,
        *,
        dry_run: bool = False,
        by: str | None = None,
        token: str | None = None,
        app: str | Sequence[str] | None = None,
    ) -> dict[str, JSON]:
        """Erase the payloads of finished runs last updated over `older_than` seconds ago, keep
        the audit spine and a keyed digest per payload; logged (who: `by`, else the OS user;
        when; cutoff; counts). Runs paused, or finished with an environment, since before the
        cutoff are `expired` (`expired`; `steering/expiry.py`), and their environments destroyed
        by the workflow's `destroy` hook if this process has the workflow's code (`app`,
        `$DAYBOOK_APP`, or imported here), else listed `awaiting_destroy`. `dry_run` only counts."""
        who, done_by = self._actor(by, token, "gc", "*")
        done = retention.run(self.store, older_than, dry_run, who, key_for(self.store))
        done["expired"] = expire_runs(self.store, float(done["cutoff"]), who, dry_run, app)
        done["identity"] = done_by
        return done

    def gc_log(self) -> list[dict[str, JSON]]:
        """Every gc pass on this store, oldest first: gc_id, who, at, cutoff, runs, rows."""
        return self.store.gc_log()


_wait_of = functools.partial(bounded, what="wait (seconds)", low=0.0, high=MAX_SECONDS)
