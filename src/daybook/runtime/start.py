"""Starting a run: its header row and first journal row, and the check that an existing run
with the same id is the same run (same workflow, same input)."""

from __future__ import annotations

import time
import uuid
from typing import Any

from ..errors import ConfigError, RunConflict
from ..records import SCHEMA_VERSION, Event, Kind, RunInfo, RunStatus, check_json, check_text
from .workflow import Workflow


def new_run(
    wf: Workflow[Any],
    run_id: str | None,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    owner: str,
    lease_ttl: float,
    pending: bool = False,
) -> tuple[RunInfo, Event]:
    """The header and `run_started` row of a new run: leased to `owner` unless `pending` (then
    a worker takes it)."""
    rid = run_id or uuid.uuid4().hex
    if not rid or len(rid) > 200:
        raise ConfigError("run_id must be a non-empty string of at most 200 characters")
    check_text(rid, "the run id")
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
        lease_owner=None if pending else owner,
        lease_expires=None if pending else now + lease_ttl,
        schema_version=SCHEMA_VERSION,
        code_version=wf.version,
    )
    first = Event(
        run_id=rid,
        seq=1,
        kind=Kind.RUN_STARTED.value,
        name=wf.name,
        data={"input": run_input, "ref": wf.ref, "by": owner, "version": wf.version},
        at=now,
    )
    return info, first


def check_same(existing: RunInfo, wf: Workflow[Any], run_input: Any) -> None:
    """Refuse to start a run whose id exists as another workflow or with other input."""
    if existing.workflow != wf.name or existing.input != run_input:
        raise RunConflict(
            f"run {existing.run_id!r} already exists as {existing.workflow}"
            f"({_brief(existing.input)}); starting it again as {wf.name}({_brief(run_input)}) "
            "would be a different run. Use a new run id, or resume the existing run"
        )


def _brief(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
