"""Coordination entities: shared journaled state for agents that work on the same resource.

This module owns the `Entity` handle and what it reads back (`EntityView`, `EntityEntry`,
`Lease`). An entity is one durable record per shared resource (an incident, a prospect, a
budget pool) with a lease `{holder, deadline}` and an append-only log of `(time, agent,
action)`. Agents coordinate through it, not by messaging each other: `claim` is an atomic
compare-and-set in the store whose return value says who won, `record` is refused unless the
caller holds a live lease, and every successful claim, release and record is a log entry, so the
log is at once the coordination protocol, the timeline and the audit trail.

The lease and log live in the store (`daybook_entities`, `daybook_entity_log`); this module only
validates arguments, stamps the time and turns rows into values.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Literal

from ..checks import checked
from ..errors import ConfigError, CorruptJournal
from ..records import JSON, check_json, check_text, dumps, shown
from ..store import Entities, EntitiesReads
from ..store.erasure import OUTBOX

# The approval outbox's requests (`daybook.gates.outbox`, a layer beside this one; gc erases
# them with their run, `daybook.store.erasure`).
OUTBOX_PREFIX = OUTBOX
# Entities daybook keeps for itself (a run's span-export cursor, `daybook.telemetry.cursor`).
INTERNAL_PREFIX = "daybook.otel:"
# The web inspector's audit log (`daybook.gates.audit.PREFIX`, a layer beside this one; `daybook
# audit` shows it).
AUDIT_PREFIX = "daybook.audit:"
# A run's environment log: its sandbox started, stopped, expired (`daybook.steering.environment`).
ENVIRONMENT_PREFIX = "daybook.env:"
# A named reader's position in a run's stream (`book.follow(..., reader=)`,
# `daybook.coordination.reader`).
READER_PREFIX = "daybook.reader:"
# None is listed among the leases a person coordinates agents with.
HIDDEN_PREFIXES = (OUTBOX_PREFIX, INTERNAL_PREFIX, AUDIT_PREFIX, ENVIRONMENT_PREFIX, READER_PREFIX)

# Written by claim() and release() themselves; record() may not forge them.
RESERVED_ACTIONS = frozenset({"claim", "release"})

LeaseState = Literal["free", "held", "expired"]


def lease_state(holder: str | None, deadline: float | None, now: float) -> LeaseState:
    """`free` (never claimed, or released), `held` (deadline not passed) or `expired`."""
    if holder is None or deadline is None:
        return "free"
    return "held" if deadline >= now else "expired"


@dataclass(frozen=True)
class EntityEntry:
    """One log entry: at `at` (epoch seconds) `agent` did `action` (claim, release, or what it
    recorded), with `data` (for a claim: its ttl and deadline)."""

    id: int
    at: float
    agent: str
    action: str
    data: JSON

    def as_dict(self) -> dict[str, JSON]:
        return asdict(self)


@dataclass(frozen=True)
class Lease:
    """An entity's lease as read at `read_at`: `holder` is who holds it, or last held it if it
    has `expired` (None once released or never claimed)."""

    name: str
    holder: str | None
    deadline: float | None
    state: LeaseState
    read_at: float

    def as_dict(self) -> dict[str, JSON]:
        return asdict(self)


@dataclass(frozen=True)
class EntityView:
    """An entity's lease and whole log from one consistent read; `state` is the lease's state at
    `read_at` (`free`, `held` or `expired`)."""

    name: str
    holder: str | None
    deadline: float | None
    log: list[EntityEntry]
    state: LeaseState
    read_at: float

    def as_dict(self) -> dict[str, JSON]:
        return asdict(self)


@checked
class Entity:
    """A handle on coordination entity `name` in a store (from `Daybook.entity(name)`).

    The handle holds no state: every call goes to the store, so handles in any number of
    threads, processes or hosts sharing the store see one lease and one log.
    """

    def __init__(self, store: Entities, name: str, *, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.name = _name(name, "an entity name")
        self._clock = clock

    def __repr__(self) -> str:
        return f"Entity({self.name!r})"

    def claim(self, agent: str, ttl: float) -> bool:
        """Take the lease for `ttl` seconds if it is free, expired, or already `agent`'s (which
        renews the deadline to now + ttl). Atomic across threads, processes and hosts: True
        means `agent` won and a `claim` entry is in the log; False means another agent holds a
        live lease (yield to it, or try again after its deadline)."""
        who = _name(agent, "the claiming agent")
        if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not math.isfinite(ttl) or ttl <= 0:
            raise ConfigError(
                f"claim of entity {self.name!r}: ttl must be a positive number of seconds, got {shown(ttl)} "
                "(e.g. claim(agent, ttl=600) for ten minutes)"
            )
        return self.store.entity_claim(self.name, who, float(ttl), self._clock())

    def release(self, agent: str) -> bool:
        """Give the lease up. True (and a `release` entry in the log) if `agent` held it live;
        False if it did not: never held, released already, expired, or taken by another agent."""
        return self.store.entity_release(self.name, _name(agent, "the releasing agent"), self._clock())

    def record(self, agent: str, action: str, data: JSON = None) -> bool:
        """Append `(now, agent, action, data)` to the log if `agent` holds a live lease. False,
        with nothing written, if it does not (it lost or never had the lease: yield)."""
        who = _name(agent, "the recording agent")
        what = _name(action, "the recorded action")
        if what in RESERVED_ACTIONS:
            raise ConfigError(
                f"action {what!r} is written by Entity.{what}() itself; record what the agent did "
                "under another name (e.g. 'starting', 'completed')"
            )
        label = f"data of {what!r} on entity {self.name!r}"
        check_json(data, label)
        return self.store.entity_record(self.name, who, what, dumps(data, label), self._clock())

    def view(self) -> EntityView:
        """The lease and the whole log, in order. A pure read: it writes nothing, not even for
        an entity that was never claimed (that one is `free`, with an empty log)."""
        now = self._clock()
        found = self.store.entity_view(self.name)
        if found is None:
            return EntityView(self.name, None, None, [], "free", now)
        holder, deadline, rows = found
        log = [EntityEntry(i, at, who, act, _data(self.name, i, text)) for i, at, who, act, text in rows]
        return EntityView(self.name, holder, deadline, log, lease_state(holder, deadline, now), now)


def list_leases(store: EntitiesReads, clock: Callable[[], float] = time.time) -> list[Lease]:
    """Every entity in the store with its lease, by name (a read); not the approval outbox's
    requests, which are entities under a reserved prefix (`daybook outbox list` shows them), nor
    the runs' span-export cursors (`daybook.telemetry.cursor`)."""
    now = clock()
    return [
        Lease(name, holder, deadline, lease_state(holder, deadline, now), now)
        for name, holder, deadline in store.entity_list()
        if not name.startswith(HIDDEN_PREFIXES)
    ]


def _name(value: object, what: str) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 200:
        raise ConfigError(f"{what} must be a non-empty string of at most 200 characters, got {value!r}")
    check_text(value, what)
    return value


def _data(name: str, entry_id: int, text: str) -> JSON:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise CorruptJournal(
            f"entity {name!r} log entry {entry_id}: data is not valid JSON ({exc}); the row was "
            "changed outside daybook. Restore it from a backup"
        ) from None


__all__ = ["Entity", "EntityEntry", "EntityView", "Lease", "list_leases"]
