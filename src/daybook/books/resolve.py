"""Resolving by hand: a person records, with evidence and who they are, what happened to an
effect whose outcome is unknown.

`confirmed`: it happened (the result, and the counterparty's reference); `failed`: it did not
and will not; `absent`: the counterparty never received it, so the next resume sends it again
under the same key. The record is a new outcome row written under the run's lease; when a live
process holds the run (it is polling the counterparty, say), the resolution goes through the
run's inbox and that process journals it (`journal.resolution`).
"""

from __future__ import annotations

import getpass
import time
from typing import Any

from ..errors import ConfigError, RunLeased
from ..journal import resolution
from ..records import JSON, Event, Kind, RunStatus, Status, check_json, check_text, dumps, settles
from ..runtime.claim import Claims
from .effects import find_effect

MISSING: Any = object()  # `confirmed=` not given (None is a result a tool may return)
ANY_STATUS = tuple(s.value for s in RunStatus)


def resolve(
    claims: Claims,
    run_id: str,
    step: int | None,
    *,
    ref: JSON = None,
    confirmed: JSON = MISSING,
    failed: str | None = None,
    absent: bool = False,
    by: str | None = None,
    evidence: str = "",
    identity: dict[str, JSON] | None = None,
) -> Event:
    """Record the resolution of the effect at `step` of `run_id` (or, with `step=None`, of the
    effect whose key is `run_id`); returns the outcome row. A run a live process holds gets it
    through its inbox (`journal.resolution`): the row is the one the run journals on reading it,
    or, if it has not within `claims.lease_ttl`, a `queued` row (seq 0) it will journal."""
    if sum([confirmed is not MISSING, failed is not None, absent]) != 1:
        raise ConfigError("resolve needs exactly one of confirmed=..., failed=..., absent=True")
    run_id, step = find_effect(claims.store, run_id, step)
    who = by or getpass.getuser()
    if not isinstance(who, str) or not isinstance(evidence, str):
        raise ConfigError(f"resolve's by= and evidence= are text, not {by!r} and {evidence!r}")
    check_text(who, "resolve's `by`")
    base: dict[str, JSON] = {"resolved_by": "manual", "by": who, "evidence": evidence}
    if identity:
        base["identity"] = identity  # how sure `by` is (gates.identity)
    status, data = _resolution(step, ref, confirmed, failed, base)
    claims.get_run(run_id)
    try:
        # The run's lease, its status kept: a parked run stays parked (then `retry` or `recover`).
        claims.hold(run_id, ANY_STATUS)
    except RunLeased:
        return _through_inbox(claims, run_id, step, status, data)
    try:
        events = claims.store.load(run_id)
        intent, last = _open_effect(events, run_id, step)
        ev = Event(
            run_id=run_id,
            seq=events[-1].seq + 1,
            kind=Kind.OUTCOME.value,
            step=step,
            name=intent.name,
            key=intent.key,
            status=status.value,
            attempt=last.attempt,
            fp=intent.fp,
            data=data,
            at=time.time(),
        )
        claims.store.append(ev)
        return ev
    finally:
        claims.let_go(run_id)


def _open_effect(events: list[Event], run_id: str, step: int) -> tuple[Event, Event]:
    """The effect's intent and last row; `ConfigError` if there is none or it is settled."""
    recs = [e for e in events if e.step == step]
    if not recs or recs[0].kind != Kind.INTENT:
        raise ConfigError(f"run {run_id!r} has no effect at step {step}")
    if settles(recs[-1]):
        raise ConfigError(f"run {run_id!r} step {step} is already {recs[-1].status}; nothing to resolve")
    return recs[0], recs[-1]


def _through_inbox(claims: Claims, run_id: str, step: int, status: Status, data: dict[str, JSON]) -> Event:
    """Hand the resolution to the process that holds the run (see `journal.resolution`) and
    wait, up to the lease's length, for the run to journal it."""
    intent, last = _open_effect(claims.store.load(run_id), run_id, step)
    key = str(intent.key)
    payload = dumps(resolution.body(status, data), f"resolution of step {step}")
    inbox_id = claims.store.signal(
        run_id, resolution.RESOLVE_SIGNAL + key, payload, str(data["by"]), time.time()
    )
    if inbox_id is None:
        raise ConfigError(
            f"run {run_id!r} ended while the resolution was being sent; `daybook show {run_id}`"
        )
    deadline = time.monotonic() + claims.lease_ttl
    while time.monotonic() < deadline:
        recs = [ev for ev in claims.store.load(run_id) if ev.step == step]
        ours = [ev for ev in recs if ev.kind == Kind.OUTCOME and ev.data.get("inbox_id") == inbox_id]
        if ours:
            return ours[0]
        if settles(recs[-1]):
            raise ConfigError(
                f"run {run_id!r} step {step} was settled by the run itself meanwhile "
                f"({recs[-1].status}, seq {recs[-1].seq}); the resolution was not needed and is "
                "not applied"
            )
        time.sleep(POLL)
    queued = {**data, "inbox_id": inbox_id, "queued": True}
    return Event(
        run_id=run_id, seq=0, kind=Kind.OUTCOME.value, step=step, name=intent.name, key=key,
        status=status.value, attempt=last.attempt, fp=intent.fp, data=queued, at=time.time(),
    )  # fmt: skip


# How often `resolve` looks for the row the live run journals from its inbox.
POLL = 0.1


def _resolution(
    step: int, ref: JSON, confirmed: JSON, failed: str | None, base: dict[str, JSON]
) -> tuple[Status, dict[str, JSON]]:
    """The outcome's status and data for what the person said."""
    if confirmed is not MISSING:
        check_json(confirmed, f"resolution of step {step}")
        data: dict[str, JSON] = {"result": confirmed, **base}
        if ref is None and isinstance(confirmed, str | int):
            ref = confirmed
        if ref is not None:
            data["ref"] = ref
        return Status.CONFIRMED, data
    if failed is not None:
        return Status.FAILED, {"error": {"type": "ResolvedFailed", "message": failed}, "final": True, **base}
    return Status.UNKNOWN, {"resolution": "absent", **base}
