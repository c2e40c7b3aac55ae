"""Resolutions for a live run: a person's `resolve` of an effect whose run is executing now.

The run's owner holds its lease, so `resolve` cannot append to the journal itself. It puts the
resolution in the run's inbox under `RESOLVE_SIGNAL + key` (a reserved name: a plain signal
cannot forge one), and the effect's lifecycle, at its next status round (or the next
execution's, after a crash or a suspension), journals it as its own outcome row, naming the
inbox message (`inbox_id`) so it is applied once, and settles as the person said.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..records import JSON, Status
from .execution import Execution

RESOLVE_SIGNAL = "resolve:"
# What a resolution may say: the statuses `resolve` writes (unknown: `absent`, send it again).
STATUSES = (Status.CONFIRMED.value, Status.FAILED.value, Status.UNKNOWN.value)
# Names the outcome row sets itself: a payload that carries one is not a resolution.
_ROW_FIELDS = frozenset({"inbox_id", "kind", "attempt", "status"})


@dataclass(frozen=True)
class Resolution:
    """A resolution waiting in the inbox: the outcome row's status and data, and its message."""

    inbox_id: int
    status: Status
    data: dict[str, JSON]


def body(status: Status, data: dict[str, JSON]) -> dict[str, JSON]:
    """The inbox payload of a resolution (`decode` reads it back)."""
    return {"status": status.value, "data": data}


def decode(payload: str) -> tuple[Status, dict[str, JSON]] | None:
    """A resolution's status and row data, or None for a payload that is not one (ignored)."""
    try:
        found: Any = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(found, dict) or found.get("status") not in STATUSES:
        return None
    data = found.get("data")
    if not isinstance(data, dict) or not _ROW_FIELDS.isdisjoint(data):
        return None
    return Status(found["status"]), data


def waiting(exe: Execution, key: str) -> Resolution | None:
    """The first resolution for effect `key` in the run's inbox that no row has applied yet."""
    if exe.read_only:
        return None  # a pure replay writes nothing: what the journal holds is the history
    for inbox_id, name, payload, _sender, _at in exe.store.inbox(exe.run_id):
        if name != RESOLVE_SIGNAL + key or inbox_id in exe.consumed:
            continue
        found = decode(payload)
        if found is not None:
            return Resolution(inbox_id, *found)
    return None
