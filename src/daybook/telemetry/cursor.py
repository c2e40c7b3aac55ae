"""A run's span-export cursor: durable, shared by every exporter of the store, claimed.

Owns the rule "each step's span is exported once overall": whichever process exports a run's
spans (a `Daybook(otel=...)` handle executing it, a worker, `daybook web --otel`), it first claims
the run's export lease, reads how far the run was exported, exports what settled past that, and
appends "exported up to seq S" before giving the lease back. The lease and its append-only log are
a coordination entity (`daybook.coordination.entity`, named `daybook.otel:<run id>`; hidden from
`book.leases()`), so the claim is the store's own compare-and-set on both backends, and a replayed
step (settled before the cursor) is never exported again, by this process or another.

The crash window: spans are handed to the SDK and flushed before the cursor is appended, so a
process killed between the two leaves the cursor where it was, and the next exporter sends that
batch again with the same span ids (at least once; `genai.span_id`). A claim held by a process
that died on this machine is taken over at once; one from another host after `TTL` seconds.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

from ..coordination.entity import INTERNAL_PREFIX as PREFIX
from ..coordination.entity import Entity
from ..runtime.lease import is_dead_here, new_owner

# Seconds an export claim holds against other exporters if its process dies mid-batch.
TTL = 30.0


def entity_name(run_id: str) -> str:
    """The coordination entity holding `run_id`'s cursor (a digest for a very long run id)."""
    if len(run_id) <= 180:
        return PREFIX + run_id
    return PREFIX + "sha256:" + hashlib.sha256(run_id.encode()).hexdigest()


class Cursor:
    """One exporter's handle on the runs' export cursors (`exporter`: its owner id, which says
    where it runs, so a claim of a dead exporter on this machine is taken at once)."""

    def __init__(self, store: Any, exporter: str | None = None) -> None:
        self.store = store
        self.exporter = exporter or new_owner()

    def read(self, run_id: str) -> int:
        """The seq the run was exported up to (0: nothing yet). A read: no claim, no write."""
        return _upto(Entity(self.store, entity_name(run_id)).view().log)

    def claim(self, run_id: str) -> int | None:
        """Take the run's export claim and return the cursor as it stands under it; None if
        another live exporter holds it (it exports what this one would have)."""
        entity = Entity(self.store, entity_name(run_id))
        if not entity.claim(self.exporter, TTL):
            view = entity.view()
            holder = view.holder
            if not (holder and view.state == "held" and is_dead_here(holder)):
                return None
            # Its process died on this machine mid-batch: released in its name (that batch is
            # not in the cursor, so it is sent again under the same span ids), then claimed.
            self.store.entity_release(entity.name, holder, time.time())
            if not entity.claim(self.exporter, TTL):
                return None
        return _upto(entity.view().log)

    def advance(self, run_id: str, upto: int, spans: int) -> bool:
        """Append "exported up to `upto`" and give the claim back; False if the claim lapsed
        meanwhile (another exporter may send this batch again, under the same span ids)."""
        entity = Entity(self.store, entity_name(run_id))
        done = entity.record(self.exporter, "exported", {"upto": upto, "spans": spans})
        entity.release(self.exporter)
        return done

    def give_back(self, run_id: str) -> None:
        """Release the claim without moving the cursor (nothing was exported)."""
        Entity(self.store, entity_name(run_id)).release(self.exporter)


def _upto(log: list[Any]) -> int:
    best = 0
    for entry in log:
        if entry.action == "exported" and isinstance(entry.data, dict):
            upto = entry.data.get("upto")
            if isinstance(upto, int) and not isinstance(upto, bool):
                best = max(best, upto)
    return best
