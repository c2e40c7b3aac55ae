"""Starting a run: its header row and first journal row, and the check that an existing run
with the same id is the same run (same workflow, same input)."""

from __future__ import annotations

import time
import uuid
from typing import Any

from ..errors import ConfigError, RunConflict
from ..records import SCHEMA_VERSION, Event, Kind, RunInfo, RunStatus, check_json, check_text, readable
from ..store.secrets import has_secret
from .workflow import Workflow, registered, same_code


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
    if has_secret(run_input):
        raise ConfigError(SECRET_INPUT)
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


# Why a secret is refused as workflow input: a resume in another process needs the input's value,
# and the journal never holds a secret's value.
SECRET_INPUT = (
    "a daybook.Secret cannot be workflow input: a run is resumed from its journal, possibly in "
    "another process, and the journal never holds a secret's value (only its digest). Pass the "
    "secret's name instead (say 'stripe/api-key') and let the tool that needs it fetch it from "
    "your secret manager or environment when it acts; or mark the argument secret on the tool "
    "(@daybook.tool(secrets=('api_key',))) and read the value inside the workflow from the "
    "environment, which a resume reads again"
)


def check_same(existing: RunInfo, wf: Workflow[Any], run_input: Any) -> None:
    """Refuse to start a run whose id exists as another workflow or with other input (or whose
    input gc erased: `RunErased`, since nobody can tell whether it is the same run). A run is
    bound to its workflow's identity: its code reference (`module:qualname`), or the stable
    name given with `@daybook.workflow(name=...)`, which keeps its runs wherever the code moves."""
    readable(existing.run_id, existing.input, "its input and result")
    if not same_workflow(existing, wf):
        raise RunConflict(
            f"run {existing.run_id!r} belongs to workflow {existing.workflow!r} at {existing.ref!r}; "
            f"{wf.name!r} at {wf.ref!r} is another workflow of the same name and cannot attach to "
            "it (it would return that run's result without running). Use another run id, or give "
            "each workflow its own name (@daybook.workflow(name=...))"
        )
    if existing.input != run_input:
        raise RunConflict(
            f"run {existing.run_id!r} already exists as {existing.workflow}"
            f"({_brief(existing.input)}); starting it again as {wf.name}({_brief(run_input)}) "
            "would be a different run. Use a new run id, or resume the existing run"
        )


def same_workflow(existing: RunInfo, wf: Workflow[Any]) -> bool:
    """Whether `wf` is the workflow that started `existing`: the same name and the same code;
    or, for a workflow with an explicit name, that name (its code may have moved), unless this
    process has the run's own code registered as another workflow of that name."""
    if existing.workflow != wf.name:
        return False
    if same_code(existing.ref, wf.ref):
        return True
    return wf.named and not any(
        other is not wf and same_code(other.ref, existing.ref) for other in registered(wf.name)
    )


def _brief(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
