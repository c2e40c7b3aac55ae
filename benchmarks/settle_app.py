"""Goal 2's workflow (issue 28): N no-op effects of a tool whose unknown outcome daybook settles
by itself, for run.py's `settle` cell (cells.py).

The tool has the profile the goal names: a status query by key (it answers from the tool's own
record of the keys it has executed) and an idempotent re-send. Whether daybook then commits the
outcome of step k with the intent of step k+1 is daybook's business: the cell counts the commits
the store makes per step and says which it found.
"""

from __future__ import annotations

import inspect
from typing import Any

import daybook

DONE: dict[str, dict[str, Any]] = {}  # the counterparty's record: what each key returned
# A tool option that turns the deferred outcome commit on, if daybook's tool() has one.
DEFER_WORDS = ("defer", "settle", "lazy_outcome", "one_fsync", "group_outcome")


def defer_options(fn: Any) -> dict[str, bool]:
    """Switches of `fn` (keyword options whose default is False) whose name says "defer the
    outcome commit": all turned on."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return {}
    return {p.name: True for p in params if p.default is False and any(w in p.name for w in DEFER_WORDS)}


def _status(key: str, args: dict[str, Any]) -> Any:
    got = DONE.get(key)
    return daybook.Absent() if got is None else daybook.Confirmed(got)


TOOL_OPTIONS = defer_options(daybook.tool)


@daybook.tool(idempotent=True, irreversible=False, status=_status, **TOOL_OPTIONS)
def bench_settle(i: int, idempotency_key: str) -> dict[str, Any]:
    result = {"ok": True, "i": i}
    DONE[idempotency_key] = result
    return result


@daybook.workflow
def bench_settle_steps(ctx: daybook.Context, n: int) -> dict[str, int]:
    for i in range(n):
        ctx.effect(bench_settle, i=i)
    return {"steps": n}
