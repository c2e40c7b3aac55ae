"""Resolving by hand: a person records, with evidence and who they are, what happened to an
effect whose outcome is unknown.

`confirmed`: it happened (the result, and the counterparty's reference); `failed`: it did not
and will not; `absent`: the counterparty never received it, so the next resume sends it again
under the same key. The record is a new outcome row written under the run's lease.
"""

from __future__ import annotations

import getpass
import time
from typing import Any

from ..errors import ConfigError
from ..records import JSON, Event, Kind, RunStatus, Status, check_json, settles
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
) -> Event:
    """Record the resolution of the effect at `step` of `run_id` (or, with `step=None`, of the
    effect whose key is `run_id`); returns the outcome row."""
    if sum([confirmed is not MISSING, failed is not None, absent]) != 1:
        raise ConfigError("resolve needs exactly one of confirmed=..., failed=..., absent=True")
    run_id, step = find_effect(claims.store, run_id, step)
    base: dict[str, JSON] = {"resolved_by": "manual", "by": by or getpass.getuser(), "evidence": evidence}
    claims.get_run(run_id)
    # The run's lease, its status kept: a parked run stays parked (then `retry` or `recover`).
    claims.hold(run_id, ANY_STATUS)
    try:
        events = claims.store.load(run_id)
        recs = [e for e in events if e.step == step]
        if not recs or recs[0].kind != Kind.INTENT:
            raise ConfigError(f"run {run_id!r} has no effect at step {step}")
        last = recs[-1]
        if settles(last):
            raise ConfigError(f"run {run_id!r} step {step} is already {last.status}; nothing to resolve")
        status, data = _resolution(step, ref, confirmed, failed, base)
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
        claims.store.append(ev)
        return ev
    finally:
        claims.let_go(run_id)


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
