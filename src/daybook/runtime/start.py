"""Starting a run: its header row and first journal row, and the check that an existing run
with the same id is the same run (same workflow, same input); and a one-act run's store
(`OneAct`), which writes the header with the run's first act and its confirmed outcome with
the run's end: two commits for a proxied MCP call instead of four."""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Sequence
from typing import Any

from ..errors import ConfigError, LeaseLost, RunConflict
from ..records import (
    MAX_PAYLOAD,
    SCHEMA_VERSION,
    Event,
    Kind,
    RunInfo,
    RunStatus,
    check_json,
    check_text,
    dumps,
    readable,
)
from ..store import Store
from ..store.secrets import has_secret, share_concealer
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


class Unborn(LeaseLost):
    """A one-act run's header could not be written with its first act: another process created
    a run of that id meanwhile (the runner then attaches to it as to any existing run)."""


class OneAct:
    """The store of a run whose body is one act (a proxied MCP call: a gate, then one effect,
    then its end), as its execution sees it. Two commits are saved, each at a point where a
    crash leaves what a crash just before it leaves today:

    - the header and `run_started` row are written with the run's first journal row (the
      intent of its effect, or its gate's request), in one transaction. A crash before it
      leaves no run: nothing was sent (the intent comes before the call), and the same call
      made again starts it afresh. Nothing else reads the run before it has a row;
    - the confirmed outcome of the act is held and written with the run's end (`finish`), in
      one transaction. Nothing happens between the two but building the end row, so a crash
      before that commit leaves what a crash before the outcome's own commit leaves: an
      intent without an outcome, an unknown its tool's status query, an idempotent re-send or
      a person settles, never re-sent blindly.

    Any other use of the store writes what is held first, on its own (`__getattr__`).
    """

    def __init__(self, store: Store, info: RunInfo, first: Event) -> None:
        self._store = store
        self._run_id = info.run_id
        self._birth: tuple[RunInfo, Event] | None = (info, first)
        self._held: list[Event] = []
        self._journal_only = True  # nothing but journal rows written through it (`tx_rows`)
        share_concealer(self, store)  # the intent's secrets are scrubbed by the store it goes to

    def _write(self, rows: Sequence[Event]) -> None:
        """`rows` (the held ones first), with the header if it is not written yet."""
        rows = [*self._held, *rows]
        birth = self._birth
        if birth is not None:
            info, now = birth[0], time.time()
            if info.lease_expires is not None:  # the lease runs from now, not from the start
                info = dataclasses.replace(info, lease_expires=now + info.lease_expires - info.created_at)
            if not self._store.create_run(info, birth[1], rows):
                raise Unborn(
                    f"run {birth[0].run_id!r} was created by another process meanwhile; "
                    "attach to it (the runner does) or use another run id"
                )
            self._birth = None
        elif len(rows) == 1:
            self._store.append(rows[0])
        elif rows:
            self._store.append_batch(rows)
        self._held.clear()

    @property
    def unborn(self) -> bool:
        """Whether the run's header is not written yet (it has no lease to renew)."""
        return self._birth is not None

    def born(self) -> Store:
        """The store, once the header and every held row are written."""
        if self._birth is not None or self._held:
            self._write(())
        return self._store

    def append(self, event: Event) -> None:
        if event.kind == Kind.OUTCOME.value and event.status == "confirmed" and _small(event):
            self._held.append(event)  # written with the run's end, or its next row
            return
        self._write([event])

    def append_batch(self, events: list[Event]) -> None:
        self._write(events)

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
        if self._birth is not None:
            self._write(())  # a run that ended before any act: its header first, then its end
        rows = [*self._held, *held]
        if rows:
            self._store.finish(run_id, owner, status, result, error, event, now, rows)
        else:
            self._store.finish(run_id, owner, status, result, error, event, now)
        self._held.clear()  # kept if the end was refused: an exit path writes them, no gap

    def tx_rows(self, run_id: str | None = None, open_only: bool = False, before: int | None = None) -> Any:
        """Without a look in the store for this run's own transactions while it has written
        nothing but journal rows: a run born through this handle (no earlier execution) opens a
        transaction only through the store's other methods, which pass `__getattr__`. What the
        run's end asks (`release_ended`), on every proxied call, answered without a read."""
        if run_id == self._run_id and self._journal_only:
            return []
        return self.born().tx_rows(run_id=run_id, open_only=open_only, before=before)

    def __getattr__(self, name: str) -> Any:
        self._journal_only = False
        return getattr(self.born(), name)


def _small(event: Event) -> bool:
    """Whether `event` may be held: one well under the payload limit (a larger one is written
    at once, where a refusal is the act's own, as without holding)."""
    return len(dumps(event.data, f"run {event.run_id!r} seq {event.seq}")) <= MAX_PAYLOAD // 2
