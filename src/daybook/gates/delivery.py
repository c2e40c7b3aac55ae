"""The deliverer: sends the outbox's approval requests to this process's sinks, each once.

One pass (`Deliverer.run_once`) reads the outbox (`gates.outbox`), and for each request some
sink of this process has not finished (delivered or given up) and whose next try is due: it
claims the request's entity with a lease (two deliverers, in any processes, never send one
request at the same time), records an `attempt` before each send, and `delivered` or
`failed` (or `gave_up`, after `attempts` tries or a refusal) after it, then lets the claim go.
A failed try is tried again after a backoff (`backoff * 2**(tries-1)`, at most `max_backoff`).

A crash between a send and its record leaves an `attempt` with no outcome: the claim lapses and
a deliverer sends it again, with the same `Idempotency-Key`, which a receiver drops (the
request is received once). A crash before the send: it is sent after the restart.

It runs as a thread (`start`) in `daybook worker --notify-url` and in a `Daybook(notify=...)`
handle, and as one pass in `daybook outbox deliver`.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import SinkConfigError
from ..records import dumps, safe_text
from ..store import Store, open_store
from . import outbox
from .sink import Refused, Sink, sinks_of

log = logging.getLogger("daybook.outbox")

DEFAULT_ATTEMPTS = 8


@dataclass
class Pass:
    """What one pass did: requests `delivered` (to a sink), tries that `failed`, sinks that
    `gave_up`, and requests another deliverer held (`busy`)."""

    delivered: int = 0
    failed: int = 0
    gave_up: int = 0
    busy: int = 0


class Deliverer:
    """Delivers the outbox of `store` to `sinks` (see the module docstring)."""

    def __init__(
        self,
        store: Store,
        sinks: list[Sink],
        *,
        attempts: int = DEFAULT_ATTEMPTS,
        backoff: float = 1.0,
        max_backoff: float = 300.0,
        lease_ttl: float = 60.0,
        poll: float = 1.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.sinks = list(sinks)
        self.attempts = attempts
        self.backoff = backoff
        self.max_backoff = max_backoff
        # Longer than a send can take (a webhook's timeout is 60s at most), so a live send
        # never loses its claim to another deliverer mid-way.
        slowest = max((float(getattr(s, "timeout", 0.0)) for s in self.sinks), default=0.0)
        self.lease_ttl = max(lease_ttl, 2 * slowest)
        self.poll = poll
        self.clock = clock
        self.owner = f"deliverer:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        # Requests every sink of this deliverer finished: final, never read again.
        self._done: set[str] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # Whether `stop` closes the store (a handle opened for this deliverer's thread).
        self.owns_store = False

    def run_once(self) -> Pass:
        """One pass over the outbox (see the module docstring)."""
        done = Pass()
        if not self.sinks:
            return done
        for e in outbox.entries(self.store, skip=self._done):
            if all(e.finished(s.name) for s in self.sinks):
                self._done.add(e.name)
                continue
            if self._stop.is_set():
                break
            if self._due(e):
                self._deliver(e.name, done)
        return done

    def _due(self, e: outbox.Entry) -> bool:
        now = self.clock()
        if e.holder is not None and e.holder != self.owner and (e.deadline or 0.0) >= now:
            return False  # another deliverer holds it live
        return any(not e.finished(s.name) and now >= self._next_try(e, s.name) for s in self.sinks)

    def _next_try(self, e: outbox.Entry, sink: str) -> float:
        tries = e.tries.get(sink, 0)
        if tries == 0 or sink not in e.errors:
            return 0.0  # never tried, or a try cut short by a crash: at once
        wait: float = min(self.max_backoff, self.backoff * 2 ** (tries - 1))
        return e.last_try[sink] + wait

    def _deliver(self, name: str, done: Pass) -> None:
        if not self.store.entity_claim(name, self.owner, self.lease_ttl, self.clock()):
            done.busy += 1
            return
        try:
            view = self.store.entity_view(name)
            if view is None:
                return
            e = outbox.entry(name, view)  # read again under the claim: it may have moved on
            assert e.request is not None
            now = self.clock()
            for sink in self.sinks:
                if e.finished(sink.name) or now < self._next_try(e, sink.name):
                    continue
                if not self._try(e, sink, done):
                    return  # lost the claim: another deliverer goes on
        finally:
            self.store.entity_release(name, self.owner, self.clock())

    def _try(self, e: outbox.Entry, sink: Sink, done: Pass) -> bool:
        """One try of one sink, recorded before and after; False if the claim was lost."""
        n = e.tries.get(sink.name, 0) + 1
        assert e.request is not None
        deadline = e.request.get("deadline")
        if isinstance(deadline, int | float) and self.clock() > deadline:
            # News of a gate whose time is over helps nobody (its escalation is a new request).
            done.gave_up += 1
            error = "the gate's deadline passed before it was delivered"
            return self._record(e.name, "gave_up", {"sink": sink.name, "tries": n - 1, "error": error})
        if not self._record(e.name, "attempt", {"sink": sink.name, "n": n}):
            return False
        try:
            sink.send(e.request)
        except Exception as exc:
            error = safe_text(f"{type(exc).__name__}: {exc}")[:500]
            final = isinstance(exc, Refused) or n >= self.attempts
            done.failed += 1
            log.warning("approval request %s: %s try %d failed: %s", e.key, sink.name, n, error)
            if not self._record(e.name, "failed", {"sink": sink.name, "n": n, "error": error}):
                return False
            e.tries[sink.name], e.errors[sink.name] = n, error
            if final:
                done.gave_up += 1
                log.error("approval request %s: %s gave up after %d tries: %s", e.key, sink.name, n, error)
                return self._record(e.name, "gave_up", {"sink": sink.name, "tries": n, "error": error})
            return True
        done.delivered += 1
        return self._record(e.name, "delivered", {"sink": sink.name, "n": n})

    def _record(self, name: str, action: str, data: dict[str, object]) -> bool:
        text = dumps(data, f"outbox {action}")
        return self.store.entity_record(name, self.owner, action, text, self.clock())

    # -- as a thread ----------------------------------------------------------------------------

    def start(self) -> Deliverer:
        """Deliver on a daemon thread, a pass every `poll` seconds, until `stop`."""
        self._thread = threading.Thread(target=self._loop, name="daybook-outbox", daemon=True)
        self._thread.start()
        return self

    def stop(self, wait: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(wait)
        if self.owns_store and (self._thread is None or not self._thread.is_alive()):
            self.store.close()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.run_once()
            except Exception as exc:  # a store hiccup: said, and tried again at the next poll
                log.warning("outbox delivery pass failed: %s: %s", type(exc).__name__, exc)
            self._stop.wait(self.poll)


def background(store: Store, notify: object, **options: Any) -> Deliverer | None:
    """A deliverer of `store`'s outbox to the sinks `notify` configures (`sink.sinks_of`), on a
    thread with a store handle of its own (as the lease heartbeat has); None without sinks."""
    sinks = sinks_of(notify)
    if not sinks:
        return None
    if store.read_only:
        raise SinkConfigError("a read-only handle cannot deliver approval requests (it writes their log)")
    # `dsn`: the URL that connects (`url` may have its password masked); behind the same guard.
    raw = open_store(getattr(store, "dsn", store.url))
    twin = getattr(store, "twin", None)
    own: Store = twin(raw) if twin is not None else raw
    found = Deliverer(own, sinks, **options)
    found.owns_store = True
    return found.start()
