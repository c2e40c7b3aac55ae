"""Updates: requests with an answer, sent to a running run and applied once.

A caller's `update` queues the request as a signal `update:<name>` and waits for the answer the
run computes in `ctx.handle_update` as a recorded step (`answer:<id>`), following the run's
continue-as-new chain if the request moves on with it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from ..errors import StepFailed, UpdateTimeout
from ..gates import identity
from ..journal.decision import Decisions
from ..journal.execution import Execution
from ..journal.facet import Facet
from ..journal.wait import Waits
from ..records import JSON, Kind
from ..runtime.chain import chain_events, live
from ..runtime.claim import Claims
from ..runtime.inbox import send
from .acts import identify


class Updates(Facet):
    """`ctx.handle_update`."""

    def __init__(self, exe: Execution, decisions: Decisions, waits: Waits) -> None:
        super().__init__(exe)
        self._decisions = decisions
        self._waits = waits

    def handle_update(
        self, name: str, fn: Callable[[Any], Any], timeout: float | None = None
    ) -> tuple[Any, Any] | None:
        """Serve the next update `name` sent with `book.update(run_id, name, args)`: a request
        with an answer, applied once. Waits like `wait_for` (durably), computes `fn(args)` as a
        recorded step whose value is the answer the caller receives, and returns (args, answer);
        None if `timeout` passed first."""
        request = self._waits.wait_for(f"update:{name}", timeout)
        if request is None:
            return None
        body = request.payload if isinstance(request.payload, dict) else {}
        args = body.get("args")
        answer = self._decisions.decide(f"answer:{body.get('id')}", lambda: fn(args)).value
        return args, answer


def update(
    claims: Claims,
    run_id: str,
    name: str,
    args: JSON,
    *,
    timeout: float,
    sender: str | None,
    token: str | None = None,
) -> JSON:
    """Send update `name` to a run and wait for its answer; `UpdateTimeout` if none comes within
    `timeout` seconds (the request stays queued for the run). A registered approver's name as
    `sender` needs its `token` and the operator role (`gates.identity`)."""
    update_id = uuid.uuid4().hex
    run_id = live(claims, run_id)
    who = identify(claims, sender, token, identity.ROLE)
    send(
        claims, run_id, f"update:{name}", {"id": update_id, "args": args}, sender, internal=True, identify=who
    )
    label = f"answer:{update_id}"
    deadline = time.monotonic() + timeout
    while True:
        # The request moves on with the chain if the segment hands off before serving it.
        for ev in chain_events(claims, run_id):
            if ev.kind == Kind.DECISION and ev.name == label:
                if ev.status == "failed":
                    raise StepFailed(f"update {name!r} failed in run {run_id!r}", ev.data.get("error") or {})
                return ev.data.get("value")
        if time.monotonic() >= deadline:
            raise UpdateTimeout(
                f"run {run_id!r} did not answer update {name!r} within {timeout:g}s; the "
                "request stays queued and is answered when the run next serves it (is a "
                "worker running? `daybook runs` shows the run's status)"
            )
        time.sleep(0.05)
