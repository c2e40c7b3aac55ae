"""Child runs (H8): a workflow starts sub-agents as runs of their own, and waits for them durably.

`ctx.child(workflow, *args, run_id=None, **kwargs)` takes two steps of the parent at the call,
synchronously, so `asyncio.gather` of several children gets the same ids and positions on every
replay: the `child` decision creates the child run (id `<parent>~child<step>` unless given,
`pending`, linked to its parent) and the `child-result` decision records how it ended. Between
the two, the parent drives the child in this process when nothing else holds it; a child that
waits, crashes or runs elsewhere leaves the parent suspended (no process held) until the child
ends: a finishing child signals its parent (`child:<id>`, a reserved name), and a parent that
wakes without that signal asks the store every RECHECK seconds, so a crash between the child's
end and its signal costs time, never the result. Replay reads both steps back: a child is never
started twice, and its result is the recorded one.

The tree composes: a child's budget admissions count against every ancestor's caps
(`budget.Budget`), its gates list under the root in `approvals`, and cancelling a parent cancels
its unfinished children (`book.cancel`).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from ..errors import StepFailed
from ..journal.decision import Decisions
from ..journal.execution import Execution, step_fingerprint
from ..journal.facet import Facet
from ..journal.stop import Suspend
from ..records import JSON, Kind, RunStatus, Status, readable
from ..runtime.inbox import ENDED
from ..runtime.start import check_same, new_run
from ..runtime.workflow import Workflow, as_workflow
from ..store import Store

CHILD = "child"
RESULT = "child-result"
# A parent woken by nothing asks the store this often whether its child ended.
RECHECK = 300.0


class ChildFailed(StepFailed):
    """A child run ended without a result (failed, cancelled or expired); the parent's step
    fails with it. Catch it to go on without the child; `daybook show CHILD` says why."""


class Children(Facet):
    """`ctx.child`."""

    def __init__(self, exe: Execution, decisions: Decisions) -> None:
        super().__init__(exe)
        self._decisions = decisions

    def child(self, workflow: Any, *args: JSON, run_id: str | None = None, **kwargs: JSON) -> Any:
        """Start `workflow(*args, **kwargs)` as a child run and return its result (an awaitable
        inside an async workflow). Its id is `<this run>~child<step>` unless `run_id` names it."""
        wf = as_workflow(workflow)
        exe = self._exe
        wanted = run_id or f"{exe.run_id}~child{exe.next_step}"
        made = self._decisions.decide(CHILD, lambda: _create(exe.store, exe.run_id, wf, args, kwargs, wanted))
        cid = str(made.value["run_id"])
        step = exe.alloc()  # taken now: the position never depends on which child ends first
        fp = step_fingerprint({"run_id": cid}, step, RESULT)
        import asyncio  # already loaded where there is a running loop; see runner.py

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return self._child_done(step, fp, cid, lambda: self._child_run(cid, wf))
        return self._child_done_async(step, fp, cid, wf)

    async def _child_done_async(self, step: int, fp: str, cid: str, wf: Workflow[Any]) -> Any:
        import asyncio

        if self._exe.steps.get(step) is None and not self._exe.read_only:
            await asyncio.to_thread(self._child_run, cid, wf)
        return self._child_done(step, fp, cid, lambda: None)

    def _child_done(self, step: int, fp: str, cid: str, drive: Any) -> Any:
        exe = self._exe
        recs = exe.expect(step, Kind.DECISION, RESULT, fp)
        if recs is None:
            drive()
            info = exe.store.get_run(cid)
            if info is None or info.status not in ENDED:
                wake = time.time() + RECHECK
                raise Suspend(exe.run_id, wake, f"child run {cid!r} (step {step})")
            # A child gc erased hands its parent no mark as data: RunErased (gc keeps the
            # children of unfinished parents; this is a run that existed before its parent).
            result = readable(cid, info.result, "its result")
            outcome = {"run_id": cid, "status": info.status, "result": result, "error": info.error}
            exe.append(
                Kind.DECISION, step, RESULT, status=Status.RECORDED.value, fp=fp, data={"value": outcome}
            )
        else:
            outcome = recs[0].data["value"]
        if outcome["status"] != RunStatus.COMPLETED.value:
            err = outcome.get("error") or {}
            raise ChildFailed(
                f"child run {cid!r} ended {outcome['status']}: {err.get('type', '')} "
                f"{err.get('message', '')}".rstrip()
                + f"; `daybook show {cid}` says more",
                err,
            )
        return outcome["result"]

    def _child_run(self, cid: str, wf: Workflow[Any]) -> None:
        spawn = self._exe.settings.spawn
        if spawn is not None and not self._exe.read_only:
            spawn(cid, wf)


def _create(
    store: Store,
    parent: str,
    wf: Workflow[Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    cid: str,
) -> dict[str, JSON]:
    info, first = new_run(wf, cid, args, kwargs, owner=parent, lease_ttl=0.0, pending=True)
    info = dataclasses.replace(info, parent_run=parent)
    if not store.create_run(info, first):
        existing = store.get_run(cid)
        assert existing is not None
        check_same(existing, wf, info.input)
    return {"run_id": cid, "workflow": wf.name}
