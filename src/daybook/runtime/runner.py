"""The runner: starts, attaches to, resumes and executes runs, one owner at a time.

A run is owned by one process at a time through a lease on its header row (`claim.Claims`); the
owner loads the whole journal in one query, replays the workflow from memory with a fresh `ctx`
(built by the `context` factory the facade hands in, so this layer never imports the facets
above it), and goes on live from the first step the journal does not hold. How the body ended
is recorded by `finish`; continue-as-new chains are followed by `chain`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol, cast

from ..errors import DaybookError, RunCancelled, RunExpired, RunFailed, RunLeased
from ..journal import current
from ..journal import strict as strict_mode
from ..journal.execution import Execution, RunSettings
from ..journal.stop import ContinueAsNew, Rerun, Stop
from ..records import JSON, RunInfo, RunStatus, check_unerased, readable
from ..store import Store
from . import finish
from .chain import Next, close_segment, next_id
from .claim import Claims, Finished
from .fork import expand
from .inbox import notify
from .lease import new_owner
from .start import OneAct, Unborn, check_same, new_run
from .workflow import Apps, Workflow, as_workflow, load

log = logging.getLogger("daybook")
Begun = tuple[Execution, Workflow[Any], RunInfo]


class Watcher(Protocol):
    """Told when this handle begins and ends executing a run (a segment of it: to its end, a
    suspension, a crash it survives); the facade's span exporter (`daybook.telemetry`)."""

    def began(self, run_id: str) -> None: ...

    def ended(self, run_id: str) -> None: ...


class Runner:
    """Executes runs on one store as one owner. `context(exe)` builds the workflow's `ctx`."""

    def __init__(
        self,
        store: Store,
        *,
        lease_ttl: float,
        inline_wait: float,
        strict: bool,
        context: Callable[[Execution], Any],
        park: bool = True,
        gate_irreversible: bool | tuple[str, ...] = False,
        defer_outcomes: bool = False,
    ) -> None:
        self.store = store
        # `Daybook(defer_outcomes=)`: see `Execution` (one fsync per effect step).
        self.defer_outcomes = defer_outcomes
        self.gate_irreversible = gate_irreversible
        self.lease_ttl = lease_ttl
        self.inline_wait = inline_wait
        self.frontier_spin: float | None = None  # see `Execution.frontier_spin`
        self.strict = strict
        self.owner = new_owner()
        self.claims = Claims(store, self.owner, lease_ttl)
        self.context = context
        # An exception the workflow did not raise on purpose parks the run (`finish.fail`).
        self.park_bugs = park
        # A workflow with `recover=` hands a failure to this (semantic recovery, set by the
        # facade: this layer cannot import it); True means the journal now holds a branch to run.
        self.recover: Callable[[Execution, Workflow[Any], Exception], bool] | None = None
        # Told as each run's execution here begins and ends (`Daybook(otel=...)`); None: nobody.
        self.watcher: Watcher | None = None
        # The store of each one-act run executing here whose header may not be written yet.
        self._one_act: dict[str, OneAct] = {}

    def close(self) -> None:
        self.claims.close()

    # -- starting and attaching ---------------------------------------------------------------

    def run(
        self,
        workflow: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        run_id: str | None,
        parent: str | None = None,
    ) -> Any:
        """Start (or attach to) a run; `parent`: a new run is created below that one (its
        spend counts against that run's caps), with no step taken in it."""
        wf = as_workflow(workflow)
        if wf.is_async:
            # Imported where an async workflow needs it, here and below: asyncio is a fifth of
            # the CPU of starting a daybook process, and a process running sync code never loads it.
            import asyncio

            return asyncio.run(self.run_async(wf, args, kwargs, run_id, parent))
        begun = self._begin(wf, run_id, args, kwargs, parent)
        return self._follow(begun.result if isinstance(begun, Finished) else self._body(*begun), run_id)

    async def run_async(
        self,
        workflow: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        run_id: str | None,
        parent: str | None = None,
    ) -> Any:
        wf = as_workflow(workflow)
        lazy = wf.one_act and run_id is not None and parent is None
        begun = self._begin(wf, run_id, args, kwargs, parent, lazy)
        if isinstance(begun, Finished):
            return await self._follow_async(begun.result, run_id)
        try:
            result = await self._body_async(*begun)
        except Unborn:  # created elsewhere meanwhile (nothing was written here): attach to it
            begun = self._begin(wf, run_id, args, kwargs, parent)
            if isinstance(begun, Finished):
                return await self._follow_async(begun.result, run_id)
            result = await self._body_async(*begun)
        return await self._follow_async(result, run_id)

    def submit(self, workflow: Any, args: tuple[Any, ...], kwargs: dict[str, Any], run_id: str | None) -> str:
        wf = as_workflow(workflow)
        info, first = new_run(
            wf, run_id, args, kwargs, owner=self.owner, lease_ttl=self.lease_ttl, pending=True
        )
        if not self.store.create_run(info, first):
            check_same(self.claims.get_run(info.run_id), wf, info.input)
        return info.run_id

    def resume(self, run_id: str, wait: float, app: Apps) -> Any:
        info = self.claims.get_run(run_id)
        if info.status == RunStatus.COMPLETED:
            self._ended_before(run_id)
            return self._follow(info.result, run_id)  # nothing to run: do not even import its code
        wf = load(info.workflow, info.ref, app)
        if wf.is_async:
            import asyncio

            return asyncio.run(self.resume_async(run_id, wait, app))
        begun = self._claim(run_id, wf, wait)
        return self._follow(begun.result if isinstance(begun, Finished) else self._body(*begun), run_id)

    async def resume_async(self, run_id: str, wait: float, app: Apps) -> Any:
        info = self.claims.get_run(run_id)
        if info.status == RunStatus.COMPLETED:
            self._ended_before(run_id)
            return await self._follow_async(info.result, run_id)
        wf = load(info.workflow, info.ref, app)
        begun = self._claim(run_id, wf, wait)
        if isinstance(begun, Finished):
            return await self._follow_async(begun.result, run_id)
        return await self._follow_async(await self._body_async(*begun), run_id)

    def execute_claimed(self, run_id: str, app: Apps) -> Any:
        """Execute a run whose lease this handle already holds (how a worker runs what it took)."""
        info = self.claims.get_run(run_id)
        wf = load(info.workflow, info.ref, app)
        # The store let this handle claim it, so no thread of ours executes it: one that just
        # suspended or stopped it may still be between giving the lease back and its reservation.
        deadline = time.monotonic() + 2.0
        while not self.claims.reserve(run_id):
            if time.monotonic() >= deadline:
                raise RunLeased(run_id, f"{self.owner} (this process)", self.lease_ttl)
            time.sleep(0.005)
        begun = self._load(run_id, wf)
        if isinstance(begun, Finished):
            return self._follow(begun.result, run_id)
        if wf.is_async:
            import asyncio

            return self._follow(asyncio.run(self._body_async(*begun)), run_id)
        return self._follow(self._body(*begun), run_id)

    def park(self, run_id: str, message: str) -> None:
        """Set a run this handle holds aside as `needs_attention`, releasing its lease."""
        error = {"type": "NeedsAttention", "message": message}
        self.store.finish(run_id, self.owner, RunStatus.NEEDS_ATTENTION.value, None, error, None, time.time())

    def _begin(
        self,
        wf: Workflow[Any],
        run_id: str | None,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        parent: str | None = None,
        lazy: bool = False,
    ) -> Begun | Finished:
        info, first = new_run(wf, run_id, args, kwargs, owner=self.owner, lease_ttl=self.lease_ttl)
        if parent is not None:
            info = dataclasses.replace(info, parent_run=parent)
        if lazy and self.store.get_run(info.run_id) is None and self.claims.reserve(info.run_id):
            # A one-act run not in the store: its header goes with its first act (`OneAct`).
            journal = self._one_act[info.run_id] = OneAct(self.store, info, first)
            return self._execution(info, [first], wf, journal)
        if self.store.create_run(info, first):
            self.claims.reserve(info.run_id)
            return self._execution(info, [first], wf)
        check_same(self.claims.get_run(info.run_id), wf, info.input)
        return self._claim(info.run_id, wf, 0.0)

    def _claim(self, run_id: str, wf: Workflow[Any], wait: float) -> Begun | Finished:
        finished = self.claims.acquire(run_id, wf.name, wait)
        if finished is not None:
            self._ended_before(run_id)
        return finished if finished is not None else self._load(run_id, wf)

    def _load(self, run_id: str, wf: Workflow[Any]) -> Begun | Finished:
        """Read the header and journal of a run this handle has just leased."""
        try:
            info = self.claims.get_run(run_id)
            if info.status == RunStatus.COMPLETED:
                self.claims.let_go(run_id)
                self._ended_before(run_id)
                return Finished(info.result)
            if info.status == RunStatus.FAILED:
                raise RunFailed(run_id, info.error or {})
            if info.status == RunStatus.CANCELLED:
                raise RunCancelled(run_id)
            if info.status == RunStatus.EXPIRED:
                raise RunExpired(run_id)
            events = expand(self.store, self.store.load(run_id))
            check_unerased(run_id, events)  # a fork of a run gc erased: never replay the marks
        except BaseException:
            self.claims.let_go(run_id)
            raise
        return self._execution(info, events, wf)

    def _execution(
        self, info: RunInfo, events: list[Any], wf: Workflow[Any], journal: OneAct | None = None
    ) -> Begun:
        settings = RunSettings(
            inline_wait=self.inline_wait,
            frontier_spin=self.frontier_spin,
            gate_irreversible=self.gate_irreversible,
            parent_run=info.parent_run,
            spawn=self.drive_child,
            deadline=None if wf.timeout is None else info.created_at + wf.timeout,
            defer_outcomes=self.defer_outcomes,
        )
        heartbeat = self.claims.heartbeat(info.run_id)
        if journal is None:
            return Execution(self.store, info.run_id, events, heartbeat, settings=settings), wf, info
        renew = heartbeat.renew
        heartbeat.renew = lambda: journal.unborn or renew()  # no lease to renew before its header
        exe = Execution(cast(Store, journal), info.run_id, events, heartbeat, settings=settings)
        return exe, wf, info

    def drive_child(self, run_id: str, wf: Workflow[Any]) -> None:
        """Run child run `run_id` here, to its end or its first wait, if no other process holds
        it; however it ends is its own run's business (its parent reads the outcome)."""
        try:
            begun = self._claim(run_id, wf, 0.0)
            if isinstance(begun, Finished):
                return
            if wf.is_async:
                import asyncio

                asyncio.run(self._body_async(*begun))
            else:
                self._body(*begun)
        except DaybookError:
            return  # suspended, parked, failed, or held by another process: recorded there

    # -- executing ----------------------------------------------------------------------------

    def _body(self, exe: Execution, wf: Workflow[Any], info: RunInfo) -> Any:
        with self._watched(exe.run_id), _closing(exe):
            return self._body_of(exe, wf, info)

    def _body_of(self, exe: Execution, wf: Workflow[Any], info: RunInfo) -> Any:
        try:
            while True:
                try:
                    ctx = self.context(exe)
                    with strict_mode.body(exe.run_id if self.strict else None), current.running(ctx):
                        result = wf.fn(ctx, *info.input["args"], **info.input["kwargs"])
                    break
                except Rerun:
                    exe = self._again(exe)
                except Exception as exc:
                    if not self._recovered(exe, wf, exc):
                        raise
                    exe = self._again(exe)
        except ContinueAsNew as cont:
            return Next(close_segment(self.claims, exe, wf, cont))
        except BaseException as exc:
            raise self._fail(exe, exc, wf) from _cause(exc)
        return self._complete(exe, result)

    async def _body_async(self, exe: Execution, wf: Workflow[Any], info: RunInfo) -> Any:
        if not wf.is_async:
            return self._body(exe, wf, info)
        with self._watched(exe.run_id), _closing(exe):
            return await self._body_async_of(exe, wf, info)

    async def _body_async_of(self, exe: Execution, wf: Workflow[Any], info: RunInfo) -> Any:
        try:
            while True:
                try:
                    ctx = self.context(exe)
                    with strict_mode.body(exe.run_id if self.strict else None), current.running(ctx):
                        result = await wf.fn(ctx, *info.input["args"], **info.input["kwargs"])
                    break
                except Rerun:
                    exe = self._again(exe)
                except Exception as exc:
                    if not self._recovered(exe, wf, exc):
                        raise
                    exe = self._again(exe)
        except ContinueAsNew as cont:
            return Next(close_segment(self.claims, exe, wf, cont))
        except BaseException as exc:
            raise self._fail(exe, exc, wf) from _cause(exc)
        return self._complete(exe, result)

    @contextlib.contextmanager
    def _watched(self, run_id: str) -> Iterator[None]:
        """The body of a run executing here, told to the watcher (whose failure never reaches
        the run: it only observes)."""
        watcher = self.watcher
        if watcher is None:
            yield
            return
        _tell(watcher.began, run_id)
        try:
            yield
        finally:
            _tell(watcher.ended, run_id)

    def _ended_before(self, run_id: str) -> None:
        """A run found complete: the watcher sees it end (what a process that died after its
        last row left unexported goes out now)."""
        if self.watcher is not None:
            _tell(self.watcher.ended, run_id)

    def _recovered(self, exe: Execution, wf: Workflow[Any], exc: Exception) -> bool:
        return (
            wf.recover is not None
            and self.recover is not None
            and not exe.read_only
            and self.recover(exe, wf, exc)
        )

    def _again(self, exe: Execution) -> Execution:
        """A fresh execution of the same run over its journal as it stands now (`Rerun`)."""
        exe.flush()  # the journal as it stands includes the outcomes held for the next row
        journal = self._one_act.pop(exe.run_id, None)
        if journal is not None:
            journal.born()
        events = self.store.load(exe.run_id)
        return Execution(self.store, exe.run_id, events, exe.heartbeat, settings=exe.settings)

    def _complete(self, exe: Execution, result: JSON) -> Any:
        try:
            try:
                return finish.complete(self._store_of(exe), self.owner, exe, result)
            except Stop as stop:
                raise self._fail(exe, stop) from None
        finally:
            self._one_act.pop(exe.run_id, None)
            self.claims.unreserve(exe.run_id)
            self._tell_parent(exe)

    def _store_of(self, exe: Execution) -> Store:
        """The store `exe` writes through: a one-act run's own (`OneAct`), else the runner's."""
        journal = self._one_act.get(exe.run_id)
        return self.store if journal is None else cast(Store, journal)

    def _tell_parent(self, exe: Execution) -> None:
        if exe.settings.parent_run is None:
            return
        info = self.store.get_run(exe.run_id)
        if info is not None:
            with contextlib.suppress(DaybookError):
                notify(self.store, info)

    def _fail(self, exe: Execution, exc: BaseException, wf: Workflow[Any] | None = None) -> BaseException:
        try:
            fail_on = wf.fail_on if wf is not None else ()
            return finish.fail(self._store_of(exe), self.owner, exe, exc, fail_on, self.park_bugs)
        finally:
            self._one_act.pop(exe.run_id, None)
            self.claims.unreserve(exe.run_id)
            self._tell_parent(exe)

    def _follow(self, result: Any, run_id: str | None) -> Any:
        """Walk a chain of segments (continue_as_new) to its end, one segment at a time (a loop,
        so a chain of any length neither recurses nor re-reads earlier segments' journals).
        A result gc erased raises `RunErased`: the mark is never returned as the result."""
        while (following := next_id(readable(run_id or "", result, "its result"))) is not None:
            run_id, info = following, self.claims.get_run(following)
            if info.status == RunStatus.COMPLETED:
                result = info.result
                continue
            wf = load(info.workflow, info.ref)
            begun = self._claim(following, wf, self.lease_ttl)
            if isinstance(begun, Finished):
                result = begun.result
            elif wf.is_async:
                import asyncio

                result = asyncio.run(self._body_async(*begun))
            else:
                result = self._body(*begun)
        return result

    async def _follow_async(self, result: Any, run_id: str | None) -> Any:
        while (following := next_id(readable(run_id or "", result, "its result"))) is not None:
            run_id, info = following, self.claims.get_run(following)
            if info.status == RunStatus.COMPLETED:
                result = info.result
                continue
            wf = load(info.workflow, info.ref)
            begun = self._claim(following, wf, self.lease_ttl)
            result = begun.result if isinstance(begun, Finished) else await self._body_async(*begun)
        return result


def _tell(hook: Callable[[str], None], run_id: str) -> None:
    try:
        hook(run_id)
    except Exception as exc:  # an observer's failure is logged, never the run's
        log.warning("run %s: %s failed: %s", run_id, getattr(hook, "__qualname__", hook), exc)


def _cause(exc: BaseException) -> BaseException | None:
    if isinstance(exc, Stop):
        return None
    return exc.__cause__ if isinstance(exc, DaybookError) else exc


@contextlib.contextmanager
def _closing(exe: Execution) -> Iterator[None]:
    """However the run's execution here ends (its end row written), what it asked to be done
    at its end (`settings.closers`: the environment's stop) runs, each once, in the order declared."""
    try:
        yield
    finally:
        closers = list(exe.settings.closers.values())
        exe.settings.closers.clear()
        for close in closers:
            close()
