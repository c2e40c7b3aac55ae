"""Pure replay: re-run a run's workflow from its journal alone, to check code against history.

No tool or model is called, nothing is written, no lease is taken: the execution is read-only,
so the first step the journal does not settle raises `NonDeterminismError`. `replay_check` does
this for many stored runs and reports each as `ok`, `changed`, `diverged`, `raised` or `not
loaded`. The code comes only from this process's registry and the modules the operator names
(`app`, `$DAYBOOK_APP`), never from a run's stored reference.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import ConfigError, DaybookError, RunNotFound
from ..journal import current
from ..journal.execution import Execution, RunSettings
from ..journal.stop import ContinueAsNew, Stop
from ..records import JSON, RunInfo, RunStatus
from ..store import Store
from .chain import CONTINUED, next_segment
from .fork import expand
from .workflow import Apps, load


def replay(store: Store, context: Callable[[Execution], Any], run_id: str, app: Apps = None) -> Any:
    """Re-run `run_id`'s workflow from its journal and return what the workflow returns."""
    info = _get(store, run_id)
    if isinstance(info.input, dict) and "$erased" in info.input:
        # Retention (`daybook gc`) erased what replay would need: only the spine is left.
        raise ConfigError(
            f"run {run_id!r}: its payloads were erased by `daybook gc` ({info.input['$erased']}), "
            "so it cannot be replayed; its spine (kinds, keys, statuses, times) is still there "
            f"to read with `daybook show {run_id}`"
        )
    wf = load(info.workflow, info.ref, app)
    events = expand(store, store.load(run_id))
    exe = Execution(store, run_id, events, None, read_only=True, settings=RunSettings(sleep=_no_sleep))
    ctx = context(exe)
    try:
        with current.running(ctx):
            if wf.is_async:
                import asyncio

                result = asyncio.run(wf.fn(ctx, *info.input["args"], **info.input["kwargs"]))
            else:
                result = wf.fn(ctx, *info.input["args"], **info.input["kwargs"])
        exe.check_complete()
    except ContinueAsNew:
        return {CONTINUED: next_segment(run_id)}
    except Stop as stop:
        raise stop.error from None
    return result


def replay_check(
    store: Store, context: Callable[[Execution], Any], run_ids: list[str] | None, app: Apps
) -> list[dict[str, JSON]]:
    """Replay stored histories (default: every completed run) against the code now loaded and
    report each: `ok`, or `diverged` with the error, or `changed` when the result differs."""
    ids = (
        run_ids
        if run_ids is not None
        else [r.run_id for r in store.list_runs(RunStatus.COMPLETED.value, 100_000)]
    )
    report: list[dict[str, JSON]] = []
    for run_id in ids:
        info = _get(store, run_id)
        row: dict[str, JSON] = {"run_id": run_id, "workflow": info.workflow}
        if isinstance(info.input, dict) and "$erased" in info.input:
            row["state"] = "erased"  # by retention: nothing left to replay, nothing diverged
            report.append(row)
            continue
        row.update(_check_one(store, context, info, app))
        report.append(row)
    return report


def _check_one(
    store: Store, context: Callable[[Execution], Any], info: RunInfo, app: Apps
) -> dict[str, JSON]:
    """`ok`, `changed`, `diverged` (the code asks what the journal does not hold), `raised` (the
    code raises where the run did not), or `not loaded` (no code given for the workflow)."""
    try:
        load(info.workflow, info.ref, app)
    except ConfigError as exc:
        return {"state": "not loaded", "error": str(exc)}
    try:
        result = replay(store, context, info.run_id, app)
    except DaybookError as exc:
        return {"state": "diverged", "error": str(exc)}
    except Exception as exc:  # the workflow's own code raised while replaying
        error = info.error if isinstance(info.error, dict) and info.status != RunStatus.COMPLETED else {}
        if error.get("type") == type(exc).__name__:
            return {"state": "ok"}  # it raised the same way when it ran (failed, or parked)
        return {"state": "raised", "error": f"{type(exc).__name__}: {exc}"}
    done = info.status == RunStatus.COMPLETED
    return {"state": "changed" if done and result != info.result else "ok"}


def _get(store: Store, run_id: str) -> RunInfo:
    info = store.get_run(run_id)
    if info is None:
        raise RunNotFound(run_id, store.url)
    return info


def _no_sleep(_seconds: float) -> None:
    """A replay reads the journal: it never waits."""
