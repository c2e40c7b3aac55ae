"""Claims: the runs one handle owns, under a lease in the store and a reservation in memory.

The lease owner id is per handle, so the store's compare-and-set cannot tell two threads of one
handle apart; the reservation set can. A claim waits (up to `wait` seconds) for another owner's
lease to lapse, and takes over at once from a provably dead process on this machine. While a run
executes, a heartbeat renews its lease on a connection of its own.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import RunCancelled, RunConflict, RunExpired, RunLeased, RunNotFound
from ..records import RunInfo, RunStatus
from ..store import Store, open_store
from .lease import Beats, Heartbeat, Requests, is_dead_here

log = logging.getLogger("daybook")

# The inbox name of a pause request for a run that is executing (`runtime.operator.pause`).
PAUSE_SIGNAL = "pause:"
# The inbox name of a revision (`steering.revision.steer`); a retraction among them may stop a
# running call (S11), which the heartbeat looks for.
STEER_SIGNAL = "steer:"


# Whether a revision (run id, sender, body) is signed by a registered operator: set by the
# facade (`steering.revision.signed`, which this layer cannot import); None trusts no one.
Trusted = Callable[[str, str, Any], bool]


def retractions(
    inbox: list[tuple[int, str, str, str, float]], run_id: str = "", trusted: Trusted | None = None
) -> list[tuple[int, str, str]]:
    """The retractions in a run's inbox that name a target and that bind (`trusted`: signed by an
    operator, or sent while no operator is registered): (inbox id, target, who sent it). Once
    operators exist, a name taken on trust stops no running call: the run reads it as a
    revision like any other, and only an operator's key undoes an act."""
    found = []
    for inbox_id, name, payload, sender, _at in inbox:
        if name != STEER_SIGNAL:
            continue
        try:
            body = json.loads(payload)
        except ValueError:
            continue  # not ours to judge here: the run reads it and reports it
        if not isinstance(body, dict) or body.get("kind") != "retract":
            continue
        if isinstance(body.get("target"), str) and trusted is not None and trusted(run_id, sender, body):
            found.append((inbox_id, body["target"], sender))
    return found


@dataclass
class Finished:
    """The run is already completed: nothing to execute, here is its recorded result."""

    result: Any


class Claims:
    """The leases and reservations of one handle (one owner id)."""

    def __init__(self, store: Store, owner: str, lease_ttl: float) -> None:
        self.store = store
        self.owner = owner
        self.lease_ttl = lease_ttl
        self.trusted: Trusted | None = None
        self._beat_store: Store | None = None
        self._beat_lock = threading.Lock()
        self._beats = Beats()  # one thread renews this handle's leases
        self._running: set[str] = set()
        self._running_lock = threading.Lock()

    def close(self) -> None:
        if self._beat_store is not None:
            self._beat_store.close()

    def get_run(self, run_id: str) -> RunInfo:
        info = self.store.get_run(run_id)
        if info is None:
            raise RunNotFound(run_id, self.store.url)
        return info

    def acquire(self, run_id: str, workflow: str, wait: float) -> Finished | None:
        """Lease `run_id` for this handle (None), or find it completed (`Finished`); raises
        `RunLeased` if another owner still holds it after `wait` seconds."""
        deadline = time.monotonic() + wait
        while True:
            info = self.get_run(run_id)
            if info.status == RunStatus.COMPLETED:
                return Finished(info.result)
            if info.status == RunStatus.CANCELLED:
                raise RunCancelled(run_id)
            if info.status == RunStatus.EXPIRED:
                raise RunExpired(run_id)
            if info.workflow != workflow:
                raise RunConflict(f"run {run_id!r} belongs to workflow {info.workflow!r}, not {workflow!r}")
            # Reserve before claiming: the store cannot tell two threads of this handle apart.
            if self.reserve(run_id):
                if self._claim(run_id, info.lease_owner):
                    return None
                self.unreserve(run_id)
                holder_now = self.get_run(run_id)
                owner, left = holder_now.lease_owner or "?", (holder_now.lease_expires or 0.0) - time.time()
            else:
                owner, left = f"{self.owner} (this process)", 0.05
            if time.monotonic() >= deadline:
                raise RunLeased(run_id, owner, max(0.0, left))
            time.sleep(max(0.01, min(0.2, left, deadline - time.monotonic())))

    def _claim(self, run_id: str, holder: str | None) -> bool:
        expect = holder if holder and holder != self.owner and is_dead_here(holder) else None
        if not self.store.claim(run_id, self.owner, self.lease_ttl, time.time(), expect):
            return False
        if expect:
            log.warning("run %s: took over the lease of dead process %s", run_id, expect)
        return True

    def take_now(self, run_id: str) -> None:
        """Lease `run_id` at once for a short operator action (`resolve`), or raise `RunLeased`."""
        if not self.reserve(run_id):
            raise RunLeased(run_id, f"{self.owner} (this process)", self.lease_ttl)
        if not self.store.claim(run_id, self.owner, self.lease_ttl, time.time(), None):
            self.unreserve(run_id)
            info = self.get_run(run_id)
            raise RunLeased(
                run_id, info.lease_owner or "?", max(0.0, (info.lease_expires or 0) - time.time())
            )

    def hold(self, run_id: str, allowed: tuple[str, ...]) -> bool:
        """Lease `run_id` at once while its status is one of `allowed`, keeping that status (an
        operator's action on a stopped run: a recovery); takes over at once from a provably dead
        process on this machine. False if the status is not allowed; raises `RunLeased` if
        another live owner (or another thread of this handle) holds it."""
        if not self.reserve(run_id):
            raise RunLeased(run_id, f"{self.owner} (this process)", self.lease_ttl)
        holder = self.get_run(run_id).lease_owner
        expect = holder if holder and holder != self.owner and is_dead_here(holder) else None
        if self.store.hold(run_id, self.owner, self.lease_ttl, time.time(), expect, allowed):
            if expect:
                log.warning("run %s: took over the lease of dead process %s", run_id, expect)
            return True
        self.unreserve(run_id)
        info = self.get_run(run_id)
        if info.status not in allowed:
            return False
        raise RunLeased(run_id, info.lease_owner or "?", max(0.0, (info.lease_expires or 0.0) - time.time()))

    def reserve(self, run_id: str) -> bool:
        with self._running_lock:
            if run_id in self._running:
                return False
            self._running.add(run_id)
            return True

    def unreserve(self, run_id: str) -> None:
        with self._running_lock:
            self._running.discard(run_id)

    def let_go(self, run_id: str) -> None:
        """Give the run back: release the lease this handle holds and the reservation."""
        try:
            self.store.release(run_id, self.owner)
        finally:
            self.unreserve(run_id)

    def heartbeat(self, run_id: str) -> Heartbeat:
        """Renew the run's lease every `lease_ttl / 3` seconds on a connection of its own."""

        def renew() -> bool:
            with self._beat_lock:
                if self._beat_store is None:
                    # `dsn`: the URL that connects (`url` may have its password masked).
                    raw = open_store(getattr(self.store, "dsn", self.store.url))
                    # Behind the same guard: the inbox it watches holds encoded payloads.
                    twin = getattr(self.store, "twin", None)
                    self._beat_store = twin(raw) if twin is not None else raw
                return self._beat_store.renew(run_id, self.owner, self.lease_ttl, time.time())

        def watch() -> Requests:
            with self._beat_lock:
                assert self._beat_store is not None
                inbox = self._beat_store.inbox(run_id)
            asked = [(row[0], row[3]) for row in inbox if row[1] == PAUSE_SIGNAL]
            return (asked[-1] if asked else None), retractions(inbox, run_id, self.trusted)

        return Heartbeat(renew, self.lease_ttl / 3, watch=watch, beats=self._beats)
