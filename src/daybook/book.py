"""`Daybook`: the public entry point. Starts, attaches to, resumes and inspects durable runs.

A run is owned by one process at a time through a lease on its header row; the owner loads the
whole journal in one query, replays the workflow from memory, and goes on live from the first
step the journal does not hold.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import hashlib
import hmac
import json
import logging
import secrets
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from . import strict as strict_mode
from .budget import summary as budget_summary
from .context import Context, ContinueAsNew, Execution, Stop, Suspend, error_info, next_segment
from .entity import Entity, Lease, list_leases
from .errors import (
    ConfigError,
    DaybookError,
    NeedsAttention,
    NonDeterminismError,
    NotAuthorized,
    RunConflict,
    RunFailed,
    RunLeased,
    RunNotFound,
    StepFailed,
    UpdateTimeout,
)
from .lease import Heartbeat, is_dead_here, new_owner
from .pool import BudgetPool
from .records import (
    JSON,
    SCHEMA_VERSION,
    TERMINAL,
    Event,
    Kind,
    RunInfo,
    RunStatus,
    Status,
    check_json,
    dumps,
    settles,
)
from .store import Store, open_store
from .tool import NotFound
from .tool import lookup as lookup_tool
from .transaction import Transaction, TxResult, run_transaction
from .workflow import Workflow, as_workflow, load

_MISSING: Any = object()
CONTINUED = "daybook.continued_as"  # the result of a run segment that continued as a new run
log = logging.getLogger("daybook")


@dataclass
class _Done:
    result: Any


@dataclass
class _Next:
    """A segment ended with continue_as_new; the chain goes on at `run_id`."""

    run_id: str


def _next_id(result: Any) -> str | None:
    if isinstance(result, _Next):
        return result.run_id
    if isinstance(result, dict) and set(result) == {CONTINUED}:
        return str(result[CONTINUED])
    return None


class Daybook:
    """A handle on one store. `Daybook()` opens ./daybook.db (or $DAYBOOK_DB).

    `lease_ttl` is how long a run stays owned by this process without a heartbeat; a process that
    dies on this machine releases its runs at once, one on another host after `lease_ttl`.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        lease_ttl: float = 15.0,
        inline_wait: float = 2.0,
        strict: bool = False,
    ) -> None:
        if lease_ttl <= 0:
            raise ConfigError("lease_ttl must be > 0 seconds")
        if inline_wait < 0:
            raise ConfigError("inline_wait must be >= 0 seconds")
        self.inline_wait = inline_wait
        self.strict = strict
        if strict:
            strict_mode.install()
        self.store: Store = open_store(url)
        self.url = self.store.url
        self.lease_ttl = lease_ttl
        self.owner = new_owner()
        self._beat_store: Store | None = None
        self._beat_lock = threading.Lock()
        # Runs this handle is executing now: the lease owner id is per handle, so the store's
        # compare-and-set cannot tell two threads of one handle apart; this set can.
        self._running: set[str] = set()
        self._running_lock = threading.Lock()

    def close(self) -> None:
        self.store.close()
        if self._beat_store is not None:
            self._beat_store.close()

    def __enter__(self) -> Daybook:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- running ------------------------------------------------------------------------------

    def run(self, workflow: Any, *args: JSON, run_id: str | None = None, **kwargs: JSON) -> Any:
        """Start a run (or attach to run `run_id` if it exists) and return its result."""
        wf = as_workflow(workflow)
        if wf.is_async:
            return asyncio.run(self.run_async(wf, *args, run_id=run_id, **kwargs))
        begun = self._begin(wf, run_id, args, kwargs)
        return self._follow(begun.result if isinstance(begun, _Done) else self._body(*begun))

    def submit(self, workflow: Any, *args: JSON, run_id: str | None = None, **kwargs: JSON) -> str:
        """Record a run as `pending` for a worker (`daybook worker`) to execute; returns its id.

        Submitting an id that exists with the same input is a no-op (it returns the id)."""
        wf = as_workflow(workflow)
        info, first = self._new_run(wf, run_id, args, kwargs, pending=True)
        if not self.store.create_run(info, first):
            self._check_same(self.get_run(info.run_id), wf, info.input)
        return info.run_id

    def load_workflow(self, run_id: str, app: str | None = None) -> Workflow[Any]:
        """The workflow a stored run names, imported if needed (ConfigError if it cannot be)."""
        info = self.get_run(run_id)
        return load(info.workflow, info.ref, app)

    def park(self, run_id: str, message: str) -> None:
        """Set a run this handle holds aside as `needs_attention`, releasing its lease."""
        self.store.finish(
            run_id,
            self.owner,
            RunStatus.NEEDS_ATTENTION.value,
            None,
            {"type": "NeedsAttention", "message": message},
            None,
            time.time(),
        )

    def execute_claimed(self, run_id: str, app: str | None = None) -> Any:
        """Execute a run whose lease this handle already holds (how a worker runs what it took)."""
        info = self.get_run(run_id)
        wf = load(info.workflow, info.ref, app)
        begun = self._claim(run_id, wf, 0.0, claimed=True)
        if isinstance(begun, _Done):
            return self._follow(begun.result)
        if wf.is_async:
            return self._follow(asyncio.run(self._body_async(*begun)))
        return self._follow(self._body(*begun))

    async def run_async(self, workflow: Any, *args: JSON, run_id: str | None = None, **kwargs: JSON) -> Any:
        """`run` for `async def` workflows (store writes are short and made inline)."""
        wf = as_workflow(workflow)
        begun = self._begin(wf, run_id, args, kwargs)
        if isinstance(begun, _Done):
            return await self._follow_async(begun.result)
        return await self._follow_async(await self._body_async(*begun))

    def resume(self, run_id: str, *, wait: float = 0.0, app: str | None = None) -> Any:
        """Continue a stopped run from its journal, in this process. Completed runs just return.

        `wait` seconds: how long to wait for another owner's lease to expire. `app`: the module or
        script defining the workflow, when it is not importable from the stored reference.
        """
        info = self.get_run(run_id)
        if info.status == RunStatus.COMPLETED:
            return self._follow(info.result)  # nothing to run: do not even import its code
        wf = load(info.workflow, info.ref, app)
        if wf.is_async:
            return asyncio.run(self.resume_async(run_id, wait=wait, app=app))
        begun = self._claim(run_id, wf, wait)
        return self._follow(begun.result if isinstance(begun, _Done) else self._body(*begun))

    async def resume_async(self, run_id: str, *, wait: float = 0.0, app: str | None = None) -> Any:
        info = self.get_run(run_id)
        if info.status == RunStatus.COMPLETED:
            return await self._follow_async(info.result)
        wf = load(info.workflow, info.ref, app)
        begun = self._claim(run_id, wf, wait)
        if isinstance(begun, _Done):
            return await self._follow_async(begun.result)
        return await self._follow_async(await self._body_async(*begun))

    def _body(self, exe: Execution, wf: Workflow[Any], info: RunInfo) -> Any:
        try:
            with strict_mode.body(exe.run_id if self.strict else None):
                result = wf.fn(Context(exe), *info.input["args"], **info.input["kwargs"])
        except ContinueAsNew as cont:
            return _Next(self._continue(exe, wf, cont))
        except BaseException as exc:
            raise self._fail(exe, exc) from _cause(exc)
        return self._complete(exe, result)

    def _follow(self, result: Any) -> Any:
        """Walk a chain of segments (continue_as_new) to its end, one segment at a time (a loop,
        so a chain of any length neither recurses nor re-reads earlier segments' journals)."""
        while (next_id := _next_id(result)) is not None:
            info = self.get_run(next_id)
            if info.status == RunStatus.COMPLETED:
                result = info.result
                continue
            wf = load(info.workflow, info.ref)
            begun = self._claim(next_id, wf, self.lease_ttl)
            if isinstance(begun, _Done):
                result = begun.result
            elif wf.is_async:
                result = asyncio.run(self._body_async(*begun))
            else:
                result = self._body(*begun)
        return result

    async def _follow_async(self, result: Any) -> Any:
        while (next_id := _next_id(result)) is not None:
            info = self.get_run(next_id)
            if info.status == RunStatus.COMPLETED:
                result = info.result
                continue
            wf = load(info.workflow, info.ref)
            begun = self._claim(next_id, wf, self.lease_ttl)
            result = begun.result if isinstance(begun, _Done) else await self._body_async(*begun)
        return result

    def _chain_events(self, run_id: str) -> list[Event]:
        """The journals of `run_id` and of every later segment of its chain, in order."""
        events: list[Event] = []
        current: str | None = run_id
        while current is not None:
            info = self.get_run(current)
            events.extend(self.store.load(current))
            current = _next_id(info.result) if info.status == RunStatus.COMPLETED else None
        return events

    def _live(self, run_id: str) -> str:
        """The segment of a continue_as_new chain that is current (the run itself otherwise)."""
        while True:
            info = self.get_run(run_id)
            next_id = _next_id(info.result) if info.status == RunStatus.COMPLETED else None
            if next_id is None:
                return run_id
            run_id = next_id

    def _continue(self, exe: Execution, wf: Workflow[Any], cont: ContinueAsNew) -> str:
        """Close this segment and create the next; safe to repeat after a crash in between
        (the next run is created first, and creating it twice is a no-op)."""
        new_id = next_segment(exe.run_id)
        # Created already leased to this process, so no worker takes it before we go on.
        info, first = self._new_run(wf, new_id, cont.args, cont.kwargs)
        if not self.store.create_run(info, first):
            self._check_same(self.get_run(new_id), wf, info.input)  # a retry after a crash
        self._carry_signals(exe, new_id)
        result = {CONTINUED: new_id}
        done = Event(
            run_id=exe.run_id,
            seq=exe.next_seq,
            kind=Kind.RUN_COMPLETED.value,
            data={"result": result},
            at=time.time(),
        )
        try:
            self._stop_beat(exe)
            self.store.finish(
                exe.run_id, self.owner, RunStatus.COMPLETED.value, result, None, done, time.time()
            )
            self._carry_signals(exe, new_id)  # any that arrived while this segment was closing
        finally:
            self._done(exe)
        return new_id

    def _carry_signals(self, exe: Execution, new_id: str) -> None:
        """Copy the signals this segment never read (updates, raises, verdicts) to the next one.
        Idempotent: a copy keeps the original's time, so a repeat (after a crash) skips it."""
        there = {(n, p, s, a) for _, n, p, s, a in self.store.inbox(new_id)}
        for inbox_id, name, payload, sender, at in self.store.inbox(exe.run_id):
            if inbox_id not in exe.consumed and (name, payload, sender, at) not in there:
                self.store.signal(new_id, name, payload, sender, at)

    async def _body_async(self, exe: Execution, wf: Workflow[Any], info: RunInfo) -> Any:
        if not wf.is_async:
            return self._body(exe, wf, info)
        try:
            with strict_mode.body(exe.run_id if self.strict else None):
                result = await wf.fn(Context(exe), *info.input["args"], **info.input["kwargs"])
        except ContinueAsNew as cont:
            return _Next(self._continue(exe, wf, cont))
        except BaseException as exc:
            raise self._fail(exe, exc) from _cause(exc)
        return self._complete(exe, result)

    def _new_run(
        self,
        wf: Workflow[Any],
        run_id: str | None,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        pending: bool = False,
    ) -> tuple[RunInfo, Event]:
        rid = run_id or uuid.uuid4().hex
        if not rid or len(rid) > 200:
            raise ConfigError("run_id must be a non-empty string of at most 200 characters")
        run_input = {"args": list(args), "kwargs": kwargs}
        check_json(run_input, f"run {rid!r} input")
        now = time.time()
        info = RunInfo(
            run_id=rid,
            workflow=wf.name,
            ref=wf.ref,
            status=(RunStatus.PENDING if pending else RunStatus.RUNNING).value,
            input=run_input,
            result=None,
            error=None,
            created_at=now,
            updated_at=now,
            lease_owner=None if pending else self.owner,
            lease_expires=None if pending else now + self.lease_ttl,
            schema_version=SCHEMA_VERSION,
            code_version=wf.version,
        )
        first = Event(
            run_id=rid,
            seq=1,
            kind=Kind.RUN_STARTED.value,
            name=wf.name,
            data={"input": run_input, "ref": wf.ref, "by": self.owner, "version": wf.version},
            at=now,
        )
        return info, first

    @staticmethod
    def _check_same(existing: RunInfo, wf: Workflow[Any], run_input: Any) -> None:
        if existing.workflow != wf.name or existing.input != run_input:
            raise RunConflict(
                f"run {existing.run_id!r} already exists as {existing.workflow}"
                f"({_brief(existing.input)}); starting it again as {wf.name}({_brief(run_input)}) "
                "would be a different run. Use a new run id, or resume the existing run"
            )

    def _begin(
        self, wf: Workflow[Any], run_id: str | None, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[Execution, Workflow[Any], RunInfo] | _Done:
        info, first = self._new_run(wf, run_id, args, kwargs)
        if self.store.create_run(info, first):
            self._reserve(info.run_id)
            return self._execution(info, [first], wf)
        self._check_same(self.get_run(info.run_id), wf, info.input)
        return self._claim(info.run_id, wf, 0.0)

    def _claim(
        self, run_id: str, wf: Workflow[Any], wait: float, claimed: bool = False
    ) -> tuple[Execution, Workflow[Any], RunInfo] | _Done:
        deadline = time.monotonic() + wait
        if claimed and not self._reserve(run_id):
            raise RunLeased(run_id, f"{self.owner} (this process)", self.lease_ttl)
        while not claimed:
            info = self.get_run(run_id)
            if info.status == RunStatus.COMPLETED:
                return _Done(info.result)
            if info.workflow != wf.name:
                raise RunConflict(f"run {run_id!r} belongs to workflow {info.workflow!r}, not {wf.name!r}")
            # Reserve before claiming: the lease owner id is per handle, so the store cannot
            # tell two threads of this handle apart.
            if self._reserve(run_id):
                holder = info.lease_owner
                expect = holder if holder and holder != self.owner and is_dead_here(holder) else None
                if self.store.claim(run_id, self.owner, self.lease_ttl, time.time(), expect):
                    if expect:
                        log.warning("run %s: took over the lease of dead process %s", run_id, expect)
                    break
                self._unreserve(run_id)
                holder_now = self.get_run(run_id)
                owner, left = holder_now.lease_owner or "?", (holder_now.lease_expires or 0.0) - time.time()
            else:
                owner, left = f"{self.owner} (this process)", 0.05
            if time.monotonic() >= deadline:
                raise RunLeased(run_id, owner, max(0.0, left))
            time.sleep(max(0.01, min(0.2, left, deadline - time.monotonic())))
        try:
            info = self.get_run(run_id)
            if info.status == RunStatus.COMPLETED:
                self._let_go(run_id)
                return _Done(info.result)
            if info.status == RunStatus.FAILED:
                raise RunFailed(run_id, info.error or {})
            events = self.store.load(run_id)
        except BaseException:
            self._let_go(run_id)
            raise
        return self._execution(info, events, wf)

    def _reserve(self, run_id: str) -> bool:
        with self._running_lock:
            if run_id in self._running:
                return False
            self._running.add(run_id)
            return True

    def _unreserve(self, run_id: str) -> None:
        with self._running_lock:
            self._running.discard(run_id)

    def _let_go(self, run_id: str) -> None:
        """Give the run back: release the lease this handle holds and the reservation."""
        try:
            self.store.release(run_id, self.owner)
        finally:
            self._unreserve(run_id)

    def _execution(
        self, info: RunInfo, events: list[Event], wf: Workflow[Any]
    ) -> tuple[Execution, Workflow[Any], RunInfo]:
        beat = Heartbeat(self._renewer(info.run_id), self.lease_ttl / 3)
        exe = Execution(self.store, info.run_id, events, beat)
        exe.inline_wait = self.inline_wait
        return exe, wf, info

    def _renewer(self, run_id: str) -> Any:
        def renew() -> bool:
            with self._beat_lock:
                if self._beat_store is None:
                    self._beat_store = open_store(self.url)
                return self._beat_store.renew(run_id, self.owner, self.lease_ttl, time.time())

        return renew

    def _complete(self, exe: Execution, result: Any) -> Any:
        try:
            return self._complete_inner(exe, result)
        finally:
            self._done(exe)

    def _complete_inner(self, exe: Execution, result: Any) -> Any:
        try:
            exe.check_complete()
            try:
                check_json(result, f"run {exe.run_id!r} result")
            except DaybookError as exc:
                raise Stop(exc, True) from None
            done = Event(
                run_id=exe.run_id,
                seq=exe.next_seq,
                kind=Kind.RUN_COMPLETED.value,
                data={"result": result},
                at=time.time(),
            )
            self._stop_beat(exe)
            self.store.finish(
                exe.run_id, self.owner, RunStatus.COMPLETED.value, result, None, done, time.time()
            )
            return result
        except Stop as stop:
            raise self._fail(exe, stop) from None

    def _fail(self, exe: Execution, exc: BaseException) -> BaseException:
        """Record how the body stopped and return the exception for the caller to raise."""
        try:
            return self._fail_inner(exe, exc)
        finally:
            self._done(exe)

    def _fail_inner(self, exe: Execution, exc: BaseException) -> BaseException:
        self._stop_beat(exe)
        now = time.time()
        if isinstance(exc, NonDeterminismError):
            # The code is wrong for this run (strict mode, a changed body): not the run's
            # failure. Park it for a person, journal untouched, resumable after the fix.
            exc = Stop(exc, True)
        if isinstance(exc, Suspend):
            self.store.suspend(exe.run_id, self.owner, exc.wake_at, now)
            return exc.error
        if isinstance(exc, Stop):
            if not exc.attention:
                if exc.release:
                    with contextlib.suppress(Exception):  # the store may still be down
                        self.store.release(exe.run_id, self.owner)
                return exc.error  # lease lost, or the store failed: leave the run resumable
            message = str(exc.error)
            event = None
            if exc.journal:
                event = Event(
                    run_id=exe.run_id,
                    seq=exe.next_seq,
                    kind=Kind.RUN_ATTENTION.value,
                    data={"message": message, "error": type(exc.error).__name__},
                    at=now,
                )
            self.store.finish(
                exe.run_id,
                self.owner,
                exc.status,
                None,
                {"type": type(exc.error).__name__, "message": message},
                event,
                now,
            )
            return exc.error
        if not isinstance(exc, Exception):
            # KeyboardInterrupt and friends: leave the run resumable, as a crash would.
            self.store.release(exe.run_id, self.owner)
            return exc
        info = error_info(exc)
        event = Event(
            run_id=exe.run_id,
            seq=exe.next_seq,
            kind=Kind.RUN_FAILED.value,
            data={"error": info},
            at=now,
        )
        self.store.finish(exe.run_id, self.owner, RunStatus.FAILED.value, None, info, event, now)
        return RunFailed(exe.run_id, info)

    @staticmethod
    def _stop_beat(exe: Execution) -> None:
        if exe.heartbeat is not None:
            exe.heartbeat.stop()

    def _done(self, exe: Execution) -> None:
        with self._running_lock:
            self._running.discard(exe.run_id)

    def replay(self, run_id: str, *, app: str | None = None) -> Any:
        """Re-run a run's workflow purely from its journal: no tool or model is called, nothing
        is written, no lease is taken. Returns what the workflow returns; raises
        `NonDeterminismError` if the code asks for anything the journal does not hold."""
        info = self.get_run(run_id)
        wf = load(info.workflow, info.ref, app)
        exe = Execution(self.store, run_id, self.store.load(run_id), None, read_only=True)
        exe.sleep = lambda _seconds: None
        ctx = Context(exe)
        try:
            if wf.is_async:
                result = asyncio.run(wf.fn(ctx, *info.input["args"], **info.input["kwargs"]))
            else:
                result = wf.fn(ctx, *info.input["args"], **info.input["kwargs"])
            exe.check_complete()
        except ContinueAsNew:
            return {CONTINUED: next_segment(run_id)}
        except Stop as stop:
            raise stop.error from None
        return result

    def replay_check(self, run_ids: list[str] | None = None, app: str | None = None) -> list[dict[str, JSON]]:
        """Replay stored histories (default: every completed run) against the code now loaded and
        report each: `ok`, or `diverged` with the error, or `changed` when the result differs."""
        ids = (
            run_ids
            if run_ids is not None
            else [r.run_id for r in self.runs(RunStatus.COMPLETED.value, 100_000)]
        )
        report: list[dict[str, JSON]] = []
        for run_id in ids:
            info = self.get_run(run_id)
            row: dict[str, JSON] = {"run_id": run_id, "workflow": info.workflow}
            try:
                result = self.replay(run_id, app=app)
            except DaybookError as exc:
                row.update(state="diverged", error=str(exc))
            else:
                done = info.status == RunStatus.COMPLETED
                row["state"] = "changed" if done and result != info.result else "ok"
            report.append(row)
        return report

    def versions(self) -> list[dict[str, JSON]]:
        """In-flight runs by workflow and code version, and for each patch marker seen in a
        workflow's runs, how many unfinished runs lack it (they still need the old code path;
        at 0 the marker can be deleted)."""
        known: dict[str, set[str]] = {}
        in_flight: dict[tuple[str, str], list[set[str]]] = {}
        for info in self.runs(None, 100_000):
            events = self.store.load(info.run_id)
            markers = {
                e.name.removeprefix("patch:")
                for e in events
                if e.kind == Kind.DECISION and e.name.startswith("patch:")
            }
            known.setdefault(info.workflow, set()).update(markers)
            if info.status not in TERMINAL:
                version = str(events[0].data.get("version", "")) if events else ""
                in_flight.setdefault((info.workflow, version), []).append(markers)
        out: list[dict[str, JSON]] = []
        for workflow in sorted(known):
            groups = {v: runs for (w, v), runs in in_flight.items() if w == workflow} or {"": []}
            for version, runs in sorted(groups.items()):
                out.append(
                    {
                        "workflow": workflow,
                        "version": version,
                        "in_flight": len(runs),
                        "runs_without_marker": {
                            m: sum(1 for have in runs if m not in have) for m in sorted(known[workflow])
                        },
                    }
                )
        return out

    # -- reading ------------------------------------------------------------------------------

    def get_run(self, run_id: str) -> RunInfo:
        info = self.store.get_run(run_id)
        if info is None:
            raise RunNotFound(run_id, self.url)
        return info

    def runs(self, status: str | None = None, limit: int = 100) -> list[RunInfo]:
        if status is not None and status not in {s.value for s in RunStatus}:
            raise ConfigError(
                f"unknown status {status!r}; use one of {', '.join(s.value for s in RunStatus)}"
            )
        return self.store.list_runs(status, limit)

    def journal(self, run_id: str) -> list[Event]:
        """The run's journal in order. A read: it never writes (safe on a live run)."""
        self.get_run(run_id)
        return self.store.load(run_id)

    def export(self, run_id: str) -> dict[str, JSON]:
        info = self.get_run(run_id)
        return {
            "format": "daybook.export",
            "schema_version": SCHEMA_VERSION,
            "run": info.as_dict(),
            "events": [e.as_dict() for e in self.store.load(run_id)],
        }

    def obligations(self, status: str | None = None) -> list[dict[str, JSON]]:
        """Every obligation across runs with its state: open, fulfilled, cancelled, or breached
        (open past its due time). `status` filters on that state."""
        if status not in (None, "open", "fulfilled", "cancelled", "breached"):
            raise ConfigError("status must be open, fulfilled, cancelled or breached")
        found: dict[str, dict[str, JSON]] = {}
        now = time.time()
        for ev in self.store.events_of_kind(Kind.OBLIGATION.value):
            if ev.status == "open":
                found[f"{ev.run_id}/{ev.step}"] = {
                    "id": f"{ev.run_id}/{ev.step}",
                    "run_id": ev.run_id,
                    **ev.data,
                    "state": "open",
                    "opened": ev.at,
                }
            else:
                target = found.get(str(ev.data.get("obligation")))
                if target is not None:
                    target["state"] = ev.status
                    target["settled"] = ev.at
        rows = list(found.values())
        for row in rows:
            due = row.get("due")
            if row["state"] == "open" and isinstance(due, float) and due < now:
                row["state"] = "breached"
        return [r for r in rows if status is None or r["state"] == status]

    def effects(
        self, run_id: str | None = None, *, status: str | None = None, tool: str | None = None
    ) -> list[dict[str, JSON]]:
        """The effect ledger: every effect (of one run, or all) with its request, response, key,
        the counterparty's reference, the decision it came from, its compensation handle and its
        status history (one entry per journal row: intent, attempts, each outcome). `status`
        filters on the current status (confirmed, failed, unknown, in flight)."""
        if run_id is not None:
            self.get_run(run_id)
            events = [e for e in self.store.load(run_id) if e.kind in _EFFECT_KINDS]
        else:
            events = [e for kind in _EFFECT_KINDS for e in self.store.events_of_kind(kind)]
            events.sort(key=lambda e: (e.run_id, e.seq))
        found: dict[tuple[str, int], dict[str, JSON]] = {}
        for ev in events:
            if ev.step is None:
                continue
            at = (ev.run_id, ev.step)
            if ev.kind == Kind.INTENT:
                found[at] = {
                    "run_id": ev.run_id,
                    "step": ev.step,
                    "tool": ev.name,
                    "key": ev.key,
                    "decision": ev.data.get("decision"),
                    "request": ev.data.get("args"),
                    "status": "in flight",
                    "response": None,
                    "ref": None,
                    "compensation": None,
                    "history": [],
                }
            row = found.get(at)
            if row is None:
                continue
            entry: dict[str, JSON] = {"at": ev.at, "attempt": ev.attempt}
            entry["status"] = ev.status if ev.kind == Kind.OUTCOME else ev.kind
            for field in ("reason", "resolved_by", "by", "evidence", "answer", "ref"):
                if field in ev.data:
                    entry[field] = ev.data[field]
            history = row["history"]
            assert isinstance(history, list)
            history.append(entry)
            if ev.kind == Kind.OUTCOME:
                row["status"] = ev.status
                if ev.status == Status.CONFIRMED:
                    row["response"] = ev.data.get("result")
                    row["compensation"] = ev.data.get("compensation")
                if ev.data.get("ref") is not None:
                    row["ref"] = ev.data["ref"]
            elif ev.kind == Kind.ATTEMPT:
                row["status"] = "in flight"
        rows = list(found.values())
        return [
            r
            for r in rows
            if (status is None or r["status"] == status) and (tool is None or r["tool"] == tool)
        ]

    def find_effect(self, effect: str, step: int | None = None) -> tuple[str, int]:
        """(run id, step) of an effect named by its idempotency key, or by run id and step."""
        if step is not None:
            return effect, step
        ev = self.store.find_intent(effect)
        if ev is not None and ev.step is not None:
            return ev.run_id, ev.step
        raise ConfigError(
            f"no effect has key {effect!r}; name it by its key (see `daybook effects`) or by RUN STEP"
        )

    def why(self, effect: str, step: int | None = None) -> dict[str, JSON]:
        """The decision behind an effect (named by its key, or by run id and step): the effect,
        and the recorded decision its intent links to, with the decision ledger's reasons
        (policy and version, observation, alternatives, model, tokens, cost) and the digest of
        the context it was computed from. With no decision before it, the run's mandate (its
        input) is what the effect came from."""
        run_id, step = self.find_effect(effect, step)
        info = self.get_run(run_id)
        events = self.journal(run_id)
        intent = next((e for e in events if e.step == step and e.kind == Kind.INTENT), None)
        if intent is None:
            raise ConfigError(f"run {run_id!r} has no effect at step {step}; see `daybook show {run_id}`")
        outcome = [e for e in events if e.step == step and e.kind == Kind.OUTCOME]
        decision_id = intent.data.get("decision")
        decision = None
        if decision_id:
            dstep = int(str(decision_id).rsplit("/", 1)[1])
            decision = next((e for e in events if e.step == dstep and e.kind == Kind.DECISION), None)
        last = outcome[-1] if outcome else None
        return {
            "effect": {
                "run_id": run_id,
                "step": step,
                "seq": intent.seq,
                "tool": intent.name,
                "key": intent.key,
                "args": intent.data.get("args"),
                "status": last.status if last else "in flight",
                "result": last.data.get("result") if last else None,
                "ref": last.data.get("ref") if last else None,
            },
            "decision": None
            if decision is None
            else {
                "id": decision_id,
                "name": decision.name,
                "seq": decision.seq,
                "at": decision.at,
                "digest": decision.fp,
                "value": decision.data.get("value"),
                **(decision.data.get("why") or {}),
            },
            "mandate": {"workflow": info.workflow, "input": info.input, "code_version": info.code_version},
        }

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
        return run_transaction(
            self.store,
            message,
            fn,
            author=author or getpass.getuser(),
            key=key,
            invariants=invariants,
        )

    def record(self, collection: str, record_id: str) -> JSON:
        """A committed record (None if there is none)."""
        found = self.store.get_record(collection, record_id)
        return None if found is None else json.loads(found[0])

    def commits(self) -> list[dict[str, JSON]]:
        """The audit log of transactions, oldest first."""
        return [
            {"commit_id": c, "key": k, "message": m, "author": a, "at": at, "records": json.loads(r)}
            for c, k, m, a, at, r in self.store.commits()
        ]

    def orphans(self, older_than: float = 0.0) -> list[dict[str, JSON]]:
        """Staged records of transactions that never committed (their process died), older
        than `older_than` seconds."""
        cutoff = time.time() - older_than
        return [
            {"txid": t, "collection": c, "record_id": r, "at": at}
            for t, c, r, at in self.store.staging()
            if at <= cutoff
        ]

    def sweep_orphans(self, older_than: float = 3600.0) -> int:
        """Delete orphaned staging areas older than `older_than` seconds; returns how many
        transactions were swept. (An open transaction younger than that is left alone.)"""
        txids = {str(o["txid"]) for o in self.orphans(older_than)}
        for txid in txids:
            self.store.abandon_tx(txid)
        return len(txids)

    def reconcile(self, run_id: str | None = None, day: str | None = None) -> list[dict[str, JSON]]:
        """Compare the journal with the counterparties' own records (for one run, one day
        (YYYY-MM-DD, local time), or everything) and list the mismatches: `absent_there`, an
        effect confirmed in the journal that the counterparty has no record of (asked through the
        tool's `reconcile`); `never_issued`, a key the counterparty holds that the journal never
        issued (from the tool's `list_keys`, for keys that look like this store's). The tools
        must be imported in this process (`--app` on the CLI)."""
        ids = [run_id] if run_id else [r.run_id for r in self.runs(None, 100_000)]
        confirmed: dict[str, list[Event]] = {}
        issued: set[str] = set()
        for rid in ids:
            intents: dict[int, Event] = {}
            for ev in self.store.load(rid):
                if day and time.strftime("%Y-%m-%d", time.localtime(ev.at)) != day:
                    continue
                if ev.kind == Kind.INTENT and ev.step is not None:
                    intents[ev.step] = ev
                    issued.add(str(ev.key))
                elif ev.kind == Kind.OUTCOME and ev.status == Status.CONFIRMED and ev.step in intents:
                    confirmed.setdefault(ev.name, []).append(intents[ev.step])
        mismatches: list[dict[str, JSON]] = []
        for name, intents_of_tool in sorted(confirmed.items()):
            tool = lookup_tool(name)
            if tool is None or tool.reconcile is None:
                continue
            for intent in intents_of_tool:
                answer = tool.reconcile(str(intent.key), dict(intent.data.get("args") or {}))
                if isinstance(answer, NotFound):
                    mismatches.append(
                        {
                            "kind": "absent_there",
                            "tool": name,
                            "key": intent.key,
                            "run_id": intent.run_id,
                            "step": intent.step,
                        }
                    )
            if tool.list_keys is not None:
                prefixes = tuple(f"{rid}/" for rid in ids)
                for key in tool.list_keys():
                    if key.startswith(prefixes) and key not in issued:
                        mismatches.append({"kind": "never_issued", "tool": name, "key": key})
        return mismatches

    def unknowns(self) -> list[dict[str, JSON]]:
        """Effects whose outcome is not settled: unknown, in flight, or waiting to retry."""
        out: list[dict[str, JSON]] = []
        now = time.time()
        runs: dict[str, RunInfo] = {}
        for ev in self.store.open_effects():
            info = runs.get(ev.run_id) or self.get_run(ev.run_id)
            runs[ev.run_id] = info
            live = bool(info.lease_owner and (info.lease_expires or 0) > now)
            out.append(
                {
                    "run_id": ev.run_id,
                    "step": ev.step,
                    "tool": ev.name,
                    "key": ev.key,
                    "state": "in flight" if live else (ev.status or "unknown (no outcome)"),
                    "run_status": info.status,
                    "since": ev.at,
                }
            )
        return out

    # -- operator actions ---------------------------------------------------------------------

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
        update_id = uuid.uuid4().hex
        run_id = self._live(run_id)
        self.signal(run_id, f"update:{name}", {"id": update_id, "args": args}, sender=sender)
        label = f"answer:{update_id}"
        deadline = time.monotonic() + timeout
        while True:
            # The request moves on with the chain if the segment hands off before serving it.
            for ev in self._chain_events(run_id):
                if ev.kind == Kind.DECISION and ev.name == label:
                    if ev.status == "failed":
                        raise StepFailed(
                            f"update {name!r} failed in run {run_id!r}", ev.data.get("error") or {}
                        )
                    return ev.data.get("value")
            if time.monotonic() >= deadline:
                raise UpdateTimeout(
                    f"run {run_id!r} did not answer update {name!r} within {timeout:g}s; the "
                    "request stays queued and is answered when the run next serves it (is a "
                    "worker running? `daybook runs` shows the run's status)"
                )
            time.sleep(0.05)

    def budget_pool(self, name: str) -> BudgetPool:
        """The shared budget pool `name`: `.set_cap(usd=...)`, `.totals()`, `.draw(agent, ...)`."""
        return BudgetPool(self.store, name)

    def budget(self, run_id: str) -> dict[str, dict[str, float]]:
        """A run's budget from its journal: caps (with raises taken so far) and spent totals."""
        self.get_run(run_id)
        return budget_summary(self.store.load(run_id))

    def raise_budget(self, run_id: str, *, by: str | None = None, **amounts: float) -> int:
        """Raise caps of a run (e.g. `usd=10`): a journaled act, applied when the run next needs
        it; returns the signal id."""
        if not amounts or any(v <= 0 for v in amounts.values()):
            raise ConfigError("raise_budget needs positive amounts, e.g. usd=10")
        return self.signal(run_id, "budget:raise", dict(amounts), sender=by)

    def add_approver(self, name: str) -> str:
        """Register approver `name` (or give it a new token) and return its secret token.

        Only the token's hash is stored; show the token to the approver once."""
        if not name or ":" in name:
            raise ConfigError("an approver name must be non-empty and contain no ':'")
        token = secrets.token_urlsafe(24)
        self.store.set_approver(name, _hash_token(token), time.time())
        return token

    def approvals(self) -> list[dict[str, JSON]]:
        """Gates waiting for a verdict, across unfinished runs."""
        pending: list[dict[str, JSON]] = []
        for status in (RunStatus.SUSPENDED.value, RunStatus.RUNNING.value):
            for info in self.runs(status, 1000):
                queued = {row[1] for row in self.store.inbox(info.run_id)}
                pending.extend(
                    g
                    for g in _gates(info.run_id, self.store.load(info.run_id))
                    if g["state"] == "waiting" and f"verdict:{g['gate_id']}" not in queued
                )
        return pending

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
        known = self.store.approvers().get(approver)
        if known is None or not hmac.compare_digest(known, _hash_token(token)):
            raise NotAuthorized(
                f"approver {approver!r} is unknown or its token does not match; register it with "
                "`daybook approvers add NAME` and use the token that prints"
            )
        self.get_run(run_id)
        gates = {g["gate_id"]: g for g in _gates(run_id, self.store.load(run_id))}
        gate = gates.get(gate_id)
        if gate is None:
            raise ConfigError(
                f"run {run_id!r} has no gate {gate_id!r}; list waiting gates with `daybook approvals`"
            )
        allowed = gate["approvers"]
        if isinstance(allowed, list) and approver not in allowed:
            raise NotAuthorized(f"{approver!r} may not decide gate {gate_id!r} (allowed: {allowed})")
        payload = {"outcome": "approve" if approve else "decline", "reason": reason}
        deadline = gate["deadline"]
        queued = any(row[1] == f"verdict:{gate_id}" for row in self.store.inbox(run_id))
        late = (
            queued  # a verdict is already waiting to be read: the first one decides
            or gate["state"] != "waiting"
            or (isinstance(deadline, float) and time.time() > deadline)
        )
        name = f"{'late-' if late else ''}verdict:{gate_id}"
        if (
            self.store.signal(run_id, name, dumps(payload, "verdict"), approver, time.time(), any_status=late)
            is None
        ):
            raise ConfigError(f"run {run_id!r} is finished; the verdict was not recorded")
        return "late" if late else "delivered"

    def signal(self, run_id: str, name: str, payload: JSON = None, *, sender: str | None = None) -> int:
        """Send signal `name` to a run: it is kept in the run's inbox (durable, in order) until a
        `ctx.wait_for(name)` consumes it, and wakes the run if it is suspended. Returns its id."""
        if not name:
            raise ConfigError("a signal needs a name")
        text = dumps(_plain(payload, f"signal {name!r} payload"), f"signal {name!r} payload")
        run_id = self._live(run_id)
        inbox_id = self.store.signal(run_id, name, text, sender or getpass.getuser(), time.time())
        if inbox_id is None:
            info = self.get_run(run_id)  # raises RunNotFound for an unknown id
            raise ConfigError(f"run {run_id!r} is {info.status}; a finished run takes no more signals")
        return inbox_id

    def resolve(
        self,
        run_id: str,
        step: int | None = None,
        *,
        ref: JSON = None,
        confirmed: JSON = _MISSING,
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
        chosen = [confirmed is not _MISSING, failed is not None, absent]
        if sum(chosen) != 1:
            raise ConfigError("resolve needs exactly one of confirmed=..., failed=..., absent=True")
        who = by or getpass.getuser()
        run_id, step = self.find_effect(run_id, step)
        self.get_run(run_id)
        if not self._reserve(run_id):
            raise RunLeased(run_id, f"{self.owner} (this process)", self.lease_ttl)
        if not self.store.claim(run_id, self.owner, self.lease_ttl, time.time(), None):
            self._unreserve(run_id)
            info = self.get_run(run_id)
            raise RunLeased(
                run_id, info.lease_owner or "?", max(0.0, (info.lease_expires or 0) - time.time())
            )
        try:
            events = self.store.load(run_id)
            recs = [e for e in events if e.step == step]
            if not recs or recs[0].kind != Kind.INTENT:
                raise ConfigError(f"run {run_id!r} has no effect at step {step}")
            last = recs[-1]
            if settles(last):
                raise ConfigError(f"run {run_id!r} step {step} is already {last.status}; nothing to resolve")
            base: dict[str, JSON] = {"resolved_by": "manual", "by": who, "evidence": evidence}
            if confirmed is not _MISSING:
                check_json(confirmed, f"resolution of step {step}")
                status, data = Status.CONFIRMED, {"result": confirmed, **base}
                if ref is None and isinstance(confirmed, str | int):
                    ref = confirmed
                if ref is not None:
                    data["ref"] = ref
            elif failed is not None:
                status = Status.FAILED
                data = {"error": {"type": "ResolvedFailed", "message": failed}, "final": True, **base}
            else:
                status, data = Status.UNKNOWN, {"resolution": "absent", **base}
            ev = Event(
                run_id=run_id,
                seq=events[-1].seq + 1,
                kind=Kind.OUTCOME.value,
                step=step,
                name=recs[0].name,
                key=recs[0].key,
                status=status.value,
                attempt=last.attempt,
                fp=recs[0].fp,
                data=data,
                at=time.time(),
            )
            self.store.append(ev)
            return ev
        finally:
            self._let_go(run_id)

    # -- coordination entities ----------------------------------------------------------------

    def entity(self, name: str) -> Entity:
        """The coordination entity `name`: a lease (`claim`, `release`) and an append-only log
        (`record`, `view`) shared by every process on this store. It exists once first claimed."""
        return Entity(self.store, name)

    def leases(self) -> list[Lease]:
        """Every coordination entity with its holder, deadline and lease state (a read)."""
        return list_leases(self.store)


_EFFECT_KINDS = (Kind.INTENT.value, Kind.ATTEMPT.value, Kind.OUTCOME.value)


def _hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _gates(run_id: str, events: list[Event]) -> list[dict[str, JSON]]:
    """The gates a journal holds and where each stands: waiting, decided or timed_out."""
    gates: dict[str, dict[str, JSON]] = {}
    for ev in events:
        if ev.kind == Kind.DECISION and ev.name.startswith("gate:") and ev.status == "recorded":
            value = ev.data.get("value") or {}
            gate_id = value.get("decision") or f"{run_id}/{ev.step}"
            gates[gate_id] = {
                "run_id": run_id,
                "gate_id": gate_id,
                "action": value.get("action"),
                "approvers": value.get("approvers"),
                "since": ev.at,
                "state": "waiting",
                "deadline": None if value.get("timeout") is None else ev.at + float(value["timeout"]),
            }
        elif ev.kind == Kind.SIGNAL and ev.name.startswith("signal:verdict:"):
            gate = gates.get(ev.name.removeprefix("signal:verdict:"))
            if gate is not None and ev.status in ("received", "timeout"):
                gate["state"] = "decided" if ev.status == "received" else "timed_out"
    return list(gates.values())


def _plain(value: JSON, what: str) -> JSON:
    check_json(value, what)
    return value


def _cause(exc: BaseException) -> BaseException | None:
    if isinstance(exc, Stop):
        return None
    return exc.__cause__ if isinstance(exc, DaybookError) else exc


def _brief(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


__all__ = ["Daybook", "NeedsAttention"]
