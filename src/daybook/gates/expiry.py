"""What a gate does when its time runs out, stated per gate: its expiry policy.

- `deny` (also spelled `decline`, the name before policies): the gate ends `timed_out`, a
  verdict that releases nothing. The default: the safe one.
- `escalate`: the gate stays open, addressed now to the next approver list of `escalate_to`
  (one list is one level; a list of lists is several, in order), each level with the gate's
  `timeout` again; once the last level's time passes too, the gate ends `timed_out`.
- `wait`: the gate keeps waiting with no end, marked `overdue` past its deadline.
- `needs_attention`: the run stops in `needs_attention` (what `on_timeout="escalate"` meant
  before escalation lists existed).

The levels are scheduled from the time the gate opened (level k runs from `opened + k*timeout`
to `opened + (k+1)*timeout`), so where a gate stands is a function of its row and the clock:
`daybook approvals` shows the level now due even before a worker has woken the run to record
it, and an escalation approver may answer at once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError

POLICIES = ("deny", "escalate", "wait", "needs_attention")
# Earlier names still accepted, as what they mean now.
ALIASES = {"decline": "deny"}
MAX_LEVELS = 5


@dataclass(frozen=True)
class Expiry:
    """A gate's expiry policy: what happens when its `timeout` passes (module docstring)."""

    policy: str = "deny"
    levels: tuple[tuple[str, ...], ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {"policy": self.policy, "escalate_to": [list(level) for level in self.levels]}


def expiry(on_timeout: str, escalate_to: Any, timeout: float | None, where: str) -> Expiry:
    """The policy `on_timeout` names, checked: a clear ConfigError saying what to write instead."""
    if not isinstance(on_timeout, str) or ALIASES.get(on_timeout, on_timeout) not in POLICIES:
        raise ConfigError(
            f"{where}: on_timeout={on_timeout!r} is not an expiry policy; use one of "
            f"{', '.join(map(repr, POLICIES))} ('decline' is 'deny')"
        )
    policy = ALIASES.get(on_timeout, on_timeout)
    if timeout is not None and not 0 <= timeout < math.inf:
        raise ConfigError(f"{where}: timeout={timeout!r}: use seconds >= 0, or None for no limit")
    levels = _levels(escalate_to, where)
    if policy == "escalate":
        if not levels:
            raise ConfigError(
                f"{where}: on_timeout='escalate' needs escalate_to=[names] (one level) or "
                "[[names], [names]] (levels in order): the approvers the gate goes to when its time "
                "passes; for the old meaning (stop the run in needs_attention) use "
                "on_timeout='needs_attention'"
            )
        if timeout is None:
            raise ConfigError(f"{where}: on_timeout='escalate' needs a timeout (seconds per level)")
    elif levels:
        raise ConfigError(
            f"{where}: escalate_to is given but on_timeout={on_timeout!r}; "
            "set on_timeout='escalate' or drop escalate_to"
        )
    return Expiry(policy, levels)


def _levels(raw: Any, where: str) -> tuple[tuple[str, ...], ...]:
    if raw is None:
        return ()
    bad = ConfigError(
        f"{where}: escalate_to={raw!r}: give a list of approver names (one level) or a list of "
        f"such lists (up to {MAX_LEVELS} levels, in order), none empty"
    )
    if isinstance(raw, str) or not isinstance(raw, Sequence) or not raw:
        raise bad
    nested = [raw] if all(isinstance(n, str) for n in raw) else list(raw)
    levels: list[tuple[str, ...]] = []
    for level in nested:
        if isinstance(level, str) or not isinstance(level, Sequence) or not level:
            raise bad
        if not all(isinstance(n, str) and n for n in level):
            raise bad
        levels.append(tuple(level))
    if len(levels) > MAX_LEVELS:
        raise bad
    return tuple(levels)


def approvals_needed(n: Any, where: str) -> int:
    """`approvals=`: how many distinct approvers must approve, checked (an int >= 1)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(
            f"{where}: approvals={n!r}: give the number of distinct approvers who must approve, "
            "an int >= 1 (approvals=2 for four eyes)"
        )
    return n


def standing(gate: dict[str, Any], now: float) -> dict[str, Any]:
    """Where an open gate row stands at `now` under its policy, scheduled from when it opened
    (module docstring): its `level`, the `approvers` it is addressed to, its `deadline` and
    whether it is `overdue` (policy `wait`) or `expired` (no verdict can act any more)."""
    policy = str(gate.get("expiry") or "deny")
    timeout = gate.get("timeout")
    opened = gate.get("opened")
    levels = [list(level) for level in gate.get("escalate_to") or []]
    row = dict(gate)
    row.setdefault("level", 0)
    row["overdue"] = bool(gate.get("overdue"))
    row["expired"] = False
    if not isinstance(timeout, int | float) or not isinstance(opened, int | float):
        row["on_expiry"] = said(row)
        return row
    base = gate.get("first_approvers")
    if policy == "escalate":
        level = min(len(levels), max(int(row["level"]), int((now - opened) // timeout) if timeout else 0))
        row["level"] = level
        row["approvers"] = base if level == 0 else levels[level - 1]
        row["deadline"] = opened + (level + 1) * timeout
        row["expired"] = now > row["deadline"]
    elif policy == "wait":
        row["overdue"] = row["overdue"] or now > opened + timeout
    else:
        row["expired"] = now > opened + timeout
    row["on_expiry"] = said(row)
    return row


def said(row: dict[str, Any]) -> str:
    """The expiry policy of a gate row in words, as every listing shows it."""
    policy = str(row.get("expiry") or "deny")
    levels = [list(level) for level in row.get("escalate_to") or []]
    if row.get("timeout") is None:
        return "no deadline"
    if policy == "escalate":
        level = int(row.get("level") or 0)
        if level >= len(levels):
            return f"deny (escalated {level} of {len(levels)} levels)"
        return f"escalate to {','.join(levels[level])} (level {level + 1} of {len(levels)})"
    if policy == "wait":
        return "wait (overdue)" if row.get("overdue") else "keep waiting, marked overdue"
    if policy == "needs_attention":
        return "stop the run in needs_attention"
    return "deny"
