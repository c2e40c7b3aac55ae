"""The approval outbox: a durable record of each approval request, and where its delivery stands.

A request (`request`: run, gate, action, `about` as the journal holds it, approvers, deadline,
the gate's terms (expiry policy, approvals needed, precheck facts, ask and escalation level)
and a delivery key `<gate id>/<n>`) is kept in the store as a coordination entity named
`daybook.outbox/<key>` (no table of its own, so both stores hold it as they hold every entity):
its lease is the claim a deliverer takes to send it, and its append-only log is the request
(`request`, written once: `enqueue` is idempotent by key), then every try (`attempt`, with the
sink and the error), each sink's `delivered` and each sink's `gave_up`. The log is the whole
state: any process reads it, no row is ever updated but by gc (store/erasure.py), which, when it
erases the run, gives a pending request up for every sink (`gave_up` of sink `*`) and replaces
the request row with an erasure mark that keeps its spine (key, run, gate, action, times): an
erased request is never sent again, and `daybook outbox list` still shows its key and state.

The gate enqueues its request inside the step that records the gate (before the gate's row is
written), so a crash never leaves an open gate without its request; a crash in between
re-records the gate with the same id, and `enqueue` finds the request already there.

What sends it is `gates.delivery`; what a request is sent to (`gates.sink`) comes from the
process's configuration only, never from a stored row.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError, CorruptJournal
from ..records import JSON, dumps
from ..store import Entities, EntitiesReads
from ..store.erasure import EVERY_SINK, OUTBOX

# The reserved entity-name prefix of outbox requests (`daybook entities` does not list them).
PREFIX = OUTBOX
# How long an enqueuer holds a request's entity while it writes the request (seconds).
_ENQUEUE_TTL = 10.0
_ENQUEUER = "daybook:enqueue"


def delivery_key(run_id: str, gate_id: str, n: int = 1) -> str:
    """The key of the `n`-th request of a gate (1: it opened; 2.. re-asked or escalated): also
    the `Idempotency-Key` header a receiver drops a duplicate by. A gate id is `<run id>/<step>`
    (or a decision's id, which is too); one that is not gets the run id in front."""
    base = gate_id if gate_id.startswith(f"{run_id}/") else f"{run_id}/{gate_id}"
    return f"{base}/{n}"


def request(
    run_id: str, gate_id: str, proposal: dict[str, Any], *, n: int = 1, reason: str = "opened"
) -> dict[str, JSON]:
    """The approval request of a gate, from its recorded proposal (`about` must already be as
    the journal holds it: a secret as its digest mark). `reason`: why it is sent (`opened`,
    `re-asked`, `escalated`)."""
    opened = proposal.get("opened")
    timeout = proposal.get("timeout")
    deadline = None if opened is None or timeout is None else float(opened) + float(timeout)
    return {
        "type": "daybook.approval_request",
        "key": delivery_key(run_id, gate_id, n),
        "n": n,
        "reason": reason,
        "run_id": run_id,
        "gate_id": gate_id,
        "action": proposal.get("action"),
        "about": proposal.get("about"),
        "approvers": proposal.get("approvers"),
        "timeout": timeout,
        "opened": opened,
        "deadline": deadline,
        "approve": f"daybook approve {run_id} {gate_id}",
        "deny": f"daybook deny {run_id} {gate_id}",
        # The gate's terms (`gates.expiry`, `gates.gate`): what happens at the deadline, how
        # many distinct approvers it needs, the facts its precheck read, which ask and level.
        "expiry": proposal.get("expiry") or "deny",
        "escalate_to": proposal.get("escalate_to") or [],
        "level": proposal.get("level") or 0,
        "approvals": proposal.get("approvals") or 1,
        "facts": proposal.get("facts"),
        "ask": proposal.get("ask") or 1,
        "first": proposal.get("first"),
    }


def enqueue(store: Entities, req: dict[str, JSON], *, wait: float = 3 * _ENQUEUE_TTL) -> dict[str, Any]:
    """Append approval request `req` to the outbox durably (when this returns, a crash does not
    lose it) and return the request the outbox holds under its key: `req`, or, writing nothing,
    the one enqueued there before (idempotent by `req["key"]`). The entry point for every
    request: a gate opening, re-asked or escalated."""
    key = req.get("key")
    if not isinstance(key, str) or not key:
        raise ConfigError(f"an approval request needs a delivery key, got {req.get('key')!r}")
    name = PREFIX + key
    text = dumps(req, f"approval request {key!r}")
    deadline = time.monotonic() + wait
    while True:
        if (earlier := held(store, name)) is not None:
            return earlier
        if store.entity_claim(name, _ENQUEUER, _ENQUEUE_TTL, time.time()):
            try:
                # Looked at again under the claim: another enqueuer may have written it since.
                if (earlier := held(store, name)) is not None:
                    return earlier
                if not store.entity_record(name, _ENQUEUER, "request", text, time.time()):
                    raise ConfigError(f"approval request {key!r}: lost the outbox claim while writing it")
                return dict(req)
            finally:
                store.entity_release(name, _ENQUEUER, time.time())
        if time.monotonic() >= deadline:
            # Held by a crashed enqueuer (its claim lapses in seconds) or a deliverer, which
            # only claims what has a request: there is nothing to write.
            raise ConfigError(
                f"approval request {key!r}: the outbox entry is held by another process; try again"
            )
        time.sleep(0.05)


def held(store: EntitiesReads, name: str) -> dict[str, Any] | None:
    """The request the outbox holds under entity `name`, if any."""
    found = store.entity_view(name)
    return None if found is None else entry(name, found).request


@dataclass
class Entry:
    """Where one request stands, from its log: the request, every try per sink (`tries`, and
    when the last began), the last error of each sink not delivered yet, the sinks it was
    `delivered` to and the ones given up (`gave_up`: sink -> last error; `*`: every sink, gc's).
    `erased`: the gc pass that erased the request's payload (its `request` is then the mark)."""

    name: str
    request: dict[str, Any] | None
    holder: str | None
    deadline: float | None
    tries: dict[str, int] = field(default_factory=dict)
    last_try: dict[str, float] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    delivered: dict[str, float] = field(default_factory=dict)
    gave_up: dict[str, str] = field(default_factory=dict)
    erased: str | None = None

    @property
    def key(self) -> str:
        return self.name.removeprefix(PREFIX)

    def finished(self, sink: str) -> bool:
        # An erased request has nothing left to send.
        return sink in self.delivered or sink in self.gave_up or self.erased is not None

    def state(self) -> str:
        """`delivered` (to every sink that tried), `undelivered` (a sink gave up, or gc
        erased it before it was delivered), `retrying` (a try failed, another is due), `queued`
        (not tried yet). A send in flight while gc gave the request up that then succeeds:
        `delivered`."""
        if set(self.gave_up) - {EVERY_SINK}:
            return "undelivered"
        if self.delivered and set(self.tries) <= set(self.delivered):
            return "delivered"
        if EVERY_SINK in self.gave_up or self.erased is not None:
            return "undelivered"
        return "retrying" if self.tries else "queued"

    def as_dict(self) -> dict[str, JSON]:
        req = self.request or {}
        return {
            "key": self.key,
            "run_id": req.get("run_id"),
            "gate_id": req.get("gate_id"),
            "action": req.get("action"),
            "reason": req.get("reason"),
            "state": self.state(),
            "tries": dict(self.tries),
            "delivered": sorted(self.delivered),
            "gave_up": dict(self.gave_up),
            "last_error": next(reversed(self.errors.values()), None) or self.gave_up.get(EVERY_SINK),
            "erased": self.erased,
        }


def entry(name: str, found: tuple[str | None, float | None, list[tuple[int, float, str, str, str]]]) -> Entry:
    """A request's state from its entity (holder, deadline, log), as `entity_view` gives it."""
    holder, deadline, log = found
    e = Entry(name, None, holder, deadline)
    for row_id, at, _agent, action, text in log:
        try:
            data = json.loads(text)
        except ValueError:
            raise CorruptJournal(
                f"outbox entry {name!r} log row {row_id} is not JSON; the row was changed outside daybook"
            ) from None
        data = data if isinstance(data, dict) else {}
        sink = str(data.get("sink", ""))
        if action == "request" and e.request is None:
            e.request = data
            erased = data.get("$erased")
            e.erased = erased if isinstance(erased, str) else None
        elif action == "attempt":  # written before the send: a crash after it is a try too
            e.tries[sink] = e.tries.get(sink, 0) + 1
            e.last_try[sink] = at
        elif action == "failed":
            e.errors[sink] = str(data.get("error") or "")
        elif action == "delivered":
            e.delivered[sink] = at
            e.errors.pop(sink, None)
        elif action == "gave_up":
            e.gave_up[sink] = str(data.get("error") or "")
    return e


def entries(store: EntitiesReads, *, skip: set[str] | None = None) -> list[Entry]:
    """Every request in the outbox (oldest key first, by name) with where it stands; `skip`:
    entity names not to read (finished ones a deliverer already knows)."""
    found: list[Entry] = []
    for name, _holder, _deadline in store.entity_list():
        if not name.startswith(PREFIX) or (skip is not None and name in skip):
            continue
        view = store.entity_view(name)
        if view is None:
            continue
        e = entry(name, view)
        if e.request is not None:
            found.append(e)
    return found


def outbox(store: EntitiesReads, state: str | None = None) -> list[dict[str, JSON]]:
    """The approval requests and where each stands (`queued`, `retrying`, `delivered`,
    `undelivered`); with `state`, only those."""
    rows = [e.as_dict() for e in entries(store)]
    return [r for r in rows if state is None or r["state"] == state]


def notice(store: EntitiesReads, run_id: str, gate_id: str) -> str:
    """Where the latest request of a gate stands (for the approvals list): its state, or `none`
    (a gate opened before the outbox). Reads the gate's requests by key, n = 1, 2, ..."""
    state, n = "none", 1
    while True:
        name = PREFIX + delivery_key(run_id, gate_id, n)
        view = store.entity_view(name)
        e = None if view is None else entry(name, view)
        if e is None or e.request is None:
            return state
        state, n = e.state(), n + 1
