"""The environment's life (S3-S6): a run's sandbox started, stopped, snapshotted and restored by
hooks the workflow passes to `ctx.environment`, and the log of all that.

A run declares its workspace once (`ctx.environment(handle, ...)`, a recorded decision, so every
replay sees the same handle). The hooks are code in the workflow, given again by every execution
that reaches the declaration; daybook never imports one because a stored row names it:

- `start(handle)` at each execution's declaration: the first start, and on a resume (in another
  process, days later) the restart in place. It must be idempotent: after a SIGKILL of the process
  executing the run, the sandbox may still be up when the next execution starts it.
- `restore(handle, snapshot)` before `start` when the sandbox was stopped with a snapshot (the
  JSON `snapshot` returned): for a sandbox whose state does not survive a stop on its own.
- `alive(handle)`, after `start`: the liveness check with its startup grace (`liveness`).
- `stop(handle)` then `snapshot(handle)` when the execution ends, however it ends: completed,
  failed (the state kept for inspection: stopped, never destroyed), paused, suspended on a wait.

- `destroy(handle)` only once the run is `expired`, past the retention window (`expiry`, by `gc`
  or a worker on its schedule), in whichever process expires it, days after the run's last
  execution: so it is not kept from the execution but found again by name, in the code the
  operator loaded in that process (`--app`, `$DAYBOOK_APP`, `gc(app=)`). It must be a function the
  workflow's module names at top level (defined or imported there); the log records that name,
  and expiry takes the function of that name from the globals of the run's workflow, and only
  when that workflow is registered in the expiring process (never importing anything a row
  names). It must be idempotent, as `start` is: a kill between the hook and its log entry runs it
  again at the next pass. Then the directory is removed if the workflow declared
  `remove_on_expiry` (a sandbox keeps its state under the directory it is declared by).

Every step of that life is an entry in the run's environment log, a coordination entity named
`daybook.env:<run id>` (hidden from `book.leases()`): `declared` (kind, handle, remove_on_expiry,
the destroy hook's name), `started`, `restored`, `stopped` (the run's status then, the snapshot),
`stop_failed`, then at expiry `destroy_awaiting` (expired by a process without the workflow's
code: kept, listed), `destroy_requested`, `destroyed` or `destroy_failed`, and `expired` (done
with).
The log is append-only and gc does not erase it, so expiry reads what to destroy from it even after
the run's payloads are gone.
"""

from __future__ import annotations

import hashlib
import time
import traceback
from collections.abc import Callable
from typing import Any

from ..coordination.entity import ENVIRONMENT_PREFIX, Entity
from ..errors import ConfigError, EnvironmentLost
from ..journal.decision import Decisions
from ..journal.execution import Execution
from ..journal.facet import Facet
from ..records import JSON, check_json, safe_text
from ..runtime import workflow
from ..store import Store
from .liveness import DEFAULT_GRACE, await_alive

# The recorded decision naming the run's environment (the checkpoint's `environment` part).
ENVIRONMENT = "environment"
# How long one write to the environment log holds its lease: only the write itself.
LOG_TTL = 30.0

Hook = Callable[[str], Any]


class Environments(Facet):
    """`ctx.environment`."""

    def __init__(self, exe: Execution, decisions: Decisions) -> None:
        super().__init__(exe)
        self._decisions = decisions

    def environment(
        self,
        handle: str,
        kind: str = "directory",
        remove_on_expiry: bool = False,
        *,
        alive: Callable[[str], bool] | None = None,
        grace: float = DEFAULT_GRACE,
        start: Hook | None = None,
        stop: Hook | None = None,
        snapshot: Callable[[str], JSON] | None = None,
        restore: Callable[[str, JSON], Any] | None = None,
        destroy: Hook | None = None,
    ) -> str:
        _check_hooks(alive=alive, start=start, stop=stop, snapshot=snapshot, restore=restore, destroy=destroy)
        declared = {"kind": kind, "handle": handle, "remove_on_expiry": remove_on_expiry}
        value = self._decisions.decide(ENVIRONMENT, lambda: declared).value
        where = str(value["handle"])
        exe = self._exe
        if exe.read_only:
            return where
        named = None if destroy is None else destroy_name(exe.store, exe.run_id, destroy)
        logged = {**value, "run_id": exe.run_id, "destroy": named}
        _begin(Log(exe.store, exe.run_id), logged, start, restore)
        if stop is not None:
            exe.settings.closers[ENVIRONMENT] = lambda: _stop(exe.store, exe.run_id, where, stop, snapshot)
        if alive is not None:
            await_alive(exe, where, alive, grace)
        return where


def _check_hooks(**hooks: Any) -> None:
    for name, hook in hooks.items():
        if hook is not None and not callable(hook):
            raise ConfigError(
                f"ctx.environment({name}=...) takes a function of the handle, not {type(hook).__name__}"
            )
    if hooks["snapshot"] is not None and hooks["stop"] is None:
        raise ConfigError(
            "ctx.environment(snapshot=...) needs stop=...: a snapshot is taken of the stopped sandbox"
        )


def _begin(
    log: Log, declared: dict[str, Any], start: Hook | None, restore: Callable[[str, JSON], Any] | None
) -> None:
    """An execution reaching the declaration: log it once, restore the last stop's snapshot,
    start (or restart in place)."""
    where = str(declared["handle"])
    last = log.declared()
    # Again when the code's destroy hook changed (added to a workflow with runs under way).
    if last is None or last.get("destroy") != declared["destroy"]:
        log.write("declared", declared)
    if restore is not None:
        stopped = log.last_stop()
        if stopped is not None and stopped.get("snapshot") is not None:
            restore(where, stopped["snapshot"])
            log.write("restored", {"snapshot": stopped["snapshot"]})
    if start is not None:
        start(where)
        log.write("started", {"handle": where})


def _stop(store: Store, run_id: str, handle: str, stop: Hook, snapshot: Callable[[str], JSON] | None) -> None:
    """The end of an execution: stop the sandbox, snapshot it, log both. A hook that raises is
    logged (`stop_failed`), never raised: the run's own end is already journaled, and the next
    execution's `start` finds the sandbox as the failed stop left it."""
    log = Log(store, run_id)
    info = store.get_run(run_id)
    status = info.status if info is not None else None
    try:
        stop(handle)
        taken = snapshot(handle) if snapshot is not None else None
        check_json(taken, f"the snapshot of environment {handle!r}")
    except Exception as exc:
        where = safe_text("".join(traceback.format_exception_only(exc)))[-2000:]
        log.write("stop_failed", {"status": status, "error": where})
        return
    log.write("stopped", {"status": status, "snapshot": taken})


def destroy_name(store: Store, run_id: str, destroy: Hook) -> str:
    """The name the run's workflow module gives `destroy` at top level: what expiry looks it up
    by, in another process, days later (a lambda or a nested function has no such name)."""
    found = _workflow_globals(store, run_id)
    names = [] if found is None else [k for k, v in found.items() if v is destroy and k.isidentifier()]
    own = getattr(destroy, "__name__", "")
    if own in names:
        return own
    if names:
        return sorted(names)[0]
    raise ConfigError(
        f"ctx.environment(destroy={getattr(destroy, '__qualname__', destroy)!r}) must be a function "
        "the workflow's module names at top level (define it there, or import it there): it runs "
        "at expiry, past the retention window, in whichever process expires the run, which finds "
        "it by that name in the workflow's code (--app), not in this execution"
    )


def _workflow_globals(store: Store, run_id: str) -> dict[str, Any] | None:
    info = store.get_run(run_id)
    if info is None:
        return None
    found = workflow.registered_as(info.workflow, info.ref)
    return None if found is None else dict(getattr(found.fn, "__globals__", {}))


def destroy_hook(store: Store, run_id: str, name: str, app: workflow.Apps) -> Hook | None:
    """The run's destroy hook by its logged `name`, from its workflow's module as the operator
    loaded it in this process (`app`, `$DAYBOOK_APP`); None when that workflow is not loaded here
    (the run waits, its environment kept, for a process that has it). Nothing a row names is
    imported: the workflow is found as a resume finds it, the hook among its module's names."""
    info = store.get_run(run_id)
    if info is None or not name.isidentifier():
        return None
    try:
        wf = workflow.load(info.workflow, info.ref, app)
    except ConfigError:
        return None
    hook = getattr(wf.fn, "__globals__", {}).get(name)
    if not callable(hook) or isinstance(hook, type):
        return None
    found: Hook = hook
    return found


def log_name(run_id: str) -> str:
    """The coordination entity holding `run_id`'s environment log (a digest for a long id)."""
    if len(run_id) <= 180:
        return ENVIRONMENT_PREFIX + run_id
    return ENVIRONMENT_PREFIX + "sha256:" + hashlib.sha256(run_id.encode()).hexdigest()


class Log:
    """A run's environment log: append-only entries, each written under a short lease of the
    run's own name (one process executes a run at a time; expiry writes after it ended)."""

    def __init__(self, store: Any, run_id: str) -> None:
        self.entity = Entity(store, log_name(run_id))
        self.agent = "run:" + hashlib.sha256(run_id.encode()).hexdigest()[:32]

    def write(self, action: str, data: JSON) -> None:
        for _ in range(50):
            if self.entity.claim(self.agent, LOG_TTL):
                break
            time.sleep(0.1)  # a stale claim of a process that died mid-write lapses in LOG_TTL
        else:
            raise EnvironmentLost(
                f"the environment log {self.entity.name!r} is held by another process; try again "
                f"once its claim lapses ({LOG_TTL:g}s)"
            )
        entry = data if isinstance(data, dict) else {"value": data}
        self.entity.record(self.agent, action, {**entry, "at": time.time()})
        self.entity.release(self.agent)

    def entries(self) -> list[dict[str, Any]]:
        """Every entry but the lease's own claims and releases: {action, ...data}."""
        return [
            {"action": e.action, **(e.data if isinstance(e.data, dict) else {})}
            for e in self.entity.view().log
            if e.action not in ("claim", "release")
        ]

    def declared(self) -> dict[str, Any] | None:
        found = [e for e in self.entries() if e["action"] == "declared"]
        return found[-1] if found else None

    def last_stop(self) -> dict[str, Any] | None:
        ends = [e for e in self.entries() if e["action"] in ("stopped", "stop_failed", "started")]
        return ends[-1] if ends and ends[-1]["action"] == "stopped" else None
