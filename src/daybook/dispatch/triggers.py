"""Reactive triggers (O13): a change log read through a stored offset, one handler run per event.

A trigger has a name, a change log and a handler workflow. The change log is anything that can be
read from a position: `read(after, limit)` returns the changes past offset `after`, in order, each
a `Change(offset, id, data)` (a table's change feed, an append-only file, a queue with positions).
It is polled, never pushed: no LISTEN/NOTIFY-only delivery, which drops what arrives while nobody
listens.

Each pass (`book.follow_changes(name, read, workflow)`) reads the trigger's offset, reads the
changes past it, and for each one runs the handler as the run `trigger:<name>:<event id>`, to its
end or its first wait, then advances the offset past that change. The run id is the event's, so
the handler is idempotent per event id: delivering an event twice attaches to the run the first
delivery made, whose effects are journaled under that run's keys, and nothing is done twice. The
offset advances only after the handler's run has journaled what it did: a process killed between
the two leaves the offset before the event, the next pass delivers it again, and that delivery is
a replay of the journal (no second effect).

The offset is a coordination entity `trigger:<name>` (shown by `book.leases()` and `daybook
leases`): its lease makes one follower at a time (another pass meanwhile delivers nothing; one
whose process died on this machine is taken over at once, one on another host after `TTL`), and
its append-only log holds one `advanced` entry per delivered event (offset, event id, run id, the
run's status then), which is also the trigger's delivery history.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from ..errors import ConfigError
from ..records import JSON, check_json, check_text, dumps
from ..runtime.lease import is_dead_here
from ..store import Store

PREFIX = "trigger:"
# Seconds a follower's claim holds against other followers if its process dies mid-pass.
TTL = 60.0
MAX_BATCH = 10_000
# A handler run that stopped with what it did journaled: its event is delivered (the run goes on,
# if it can, by a worker or `daybook retry`, never by a second delivery).
HANDLED = frozenset(
    {"completed", "failed", "suspended", "needs_attention", "paused", "cancelled", "expired", "stuck"}
)


class Change(NamedTuple):
    """One change in a change log: its position (`offset`, increasing), the event's id (unique
    in the log: the handler's run is named by it) and its payload (JSON). A read may return
    plain `(offset, id, data)` tuples or `{"offset", "id", "data"}` dicts instead."""

    offset: int
    id: str
    data: JSON = None


ChangeLog = Callable[[int, int], Sequence[Any]]
# Runs the handler for one change as the run with the given id; returns the run's status then.
Handle = Callable[[str, Change], str]


def offset(store: Store, name: str) -> int:
    """The trigger's offset: every change up to it was delivered (0: none yet). A read."""
    found = store.entity_view(PREFIX + _name(name))
    return _offset(found[2]) if found is not None else 0


def follow(
    store: Store, owner: str, name: str, read: ChangeLog, handle: Handle, limit: int
) -> dict[str, JSON]:
    """One pass of trigger `name` (see the module docstring): `{"delivered": [{offset, id,
    run_id, status}], "offset": ..., "held_by": None}`, or nothing delivered and `held_by` set
    when another live follower holds the trigger."""
    entity = PREFIX + _name(name)
    if not callable(read):
        raise ConfigError(
            f"trigger {name!r}: read is the change log's read(after, limit), not {type(read).__name__}"
        )
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_BATCH:
        raise ConfigError(
            f"trigger {name!r}: limit is a whole number of changes from 1 to {MAX_BATCH}, not {limit!r}"
        )
    holder = _claim(store, entity, owner)
    if holder is not None:
        return {"delivered": [], "offset": offset(store, name), "held_by": holder}
    delivered: list[JSON] = []
    try:
        at = offset(store, name)
        for change in _changes(name, read(at, limit), at):
            if not store.entity_claim(entity, owner, TTL, time.time()):
                break  # renewed per change, so a long pass keeps it; lost: the taker goes on
            run_id = f"{entity}:{change.id}"
            status = handle(run_id, change)  # the handler's effects are journaled in its run...
            entry = {"offset": change.offset, "id": change.id, "run_id": run_id, "status": status}
            if not store.entity_record(entity, owner, "advanced", dumps(entry, "trigger entry"), time.time()):
                break  # ...then the offset moves; a lost claim leaves it to the follower that took it
            delivered.append(entry)
            at = change.offset
    finally:
        store.entity_release(entity, owner, time.time())
    return {"delivered": delivered, "offset": at, "held_by": None}


def _claim(store: Store, entity: str, owner: str) -> str | None:
    """Take the trigger's claim; None when taken, else the live holder's id."""
    if store.entity_claim(entity, owner, TTL, time.time()):
        return None
    found = store.entity_view(entity)
    holder = found[0] if found is not None else None
    if holder and is_dead_here(holder):
        # Its process died on this machine mid-pass: released in its name, then claimed. The
        # change it was handling is past the offset still, so it is delivered again (a replay).
        store.entity_release(entity, holder, time.time())
        if store.entity_claim(entity, owner, TTL, time.time()):
            return None
    return holder or "another follower"


def _changes(name: str, got: Sequence[Any], after: int) -> list[Change]:
    """The changes a read returned, checked: in increasing offsets past `after`."""
    out: list[Change] = []
    last = after
    for given in got:
        change = _change(name, given)
        if isinstance(change.offset, bool) or not isinstance(change.offset, int) or change.offset <= last:
            raise ConfigError(
                f"trigger {name!r}: the change log returned offset {change.offset!r} after {last}: "
                f"read(after, limit) must return changes past `after`, in increasing offsets"
            )
        if not isinstance(change.id, str) or not change.id.strip():
            raise ConfigError(f"trigger {name!r}: a change's id is a non-empty string, not {change.id!r}")
        check_text(change.id, f"trigger {name!r}: a change's id")
        check_json(change.data, f"trigger {name!r}: change {change.id!r}")
        out.append(change)
        last = change.offset
    return out


def _change(name: str, given: Any) -> Change:
    if isinstance(given, Mapping) and {"offset", "id"} <= set(given):
        return Change(given["offset"], given["id"], given.get("data"))
    if isinstance(given, tuple | list) and len(given) in (2, 3):
        return Change(*given)
    raise ConfigError(
        f"trigger {name!r}: the change log returned {type(given).__name__} {str(given)[:80]!r}; each "
        "change is Change(offset, id, data), an (offset, id, data) tuple or an {offset, id, data} dict"
    )


def _offset(log: Sequence[tuple[Any, ...]]) -> int:
    best = 0
    for _id, _at, _who, action, text in log:
        if action == "advanced":
            best = max(best, int(json.loads(text).get("offset", 0)))
    return best


def _name(name: str) -> str:
    if not isinstance(name, str) or not name.strip() or len(name) > 150:
        raise ConfigError(f"a trigger's name is a non-empty string of at most 150 characters, not {name!r}")
    return name
