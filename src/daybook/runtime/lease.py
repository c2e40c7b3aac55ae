"""Run leases: who owns a run, for how long, and when a dead owner's lease may be taken at once.

An owner id records where the owner runs. A lease held by a process that is provably dead (same
kernel boot, same PID namespace, and that PID no longer runs with the same start time) is taken
over immediately; any other lease is honoured until it expires.
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

log = logging.getLogger("daybook")


def _read(path: str) -> str:
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return ""


def _start_time(pid: int) -> str:
    stat = _read(f"/proc/{pid}/stat")
    if not stat:
        return ""
    # The command name (field 2) may contain spaces; fields after the closing paren are fixed.
    return stat.rsplit(")", 1)[-1].split()[19]


def _pidns() -> str:
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return ""


_BOOT = _read("/proc/sys/kernel/random/boot_id")[:8]


def new_owner() -> str:
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{_start_time(pid)}:{_BOOT}:{_pidns()}:{uuid.uuid4().hex[:6]}"


def is_dead_here(owner: str) -> bool:
    """True only when `owner` ran on this kernel and PID namespace and its process is gone."""
    parts = owner.split(":")
    if len(parts) != 6 or not _BOOT:
        return False
    host, pid, start, boot, ns, _ = parts
    if host != socket.gethostname() or boot != _BOOT or ns != _pidns() or not pid.isdigit():
        return False
    return _start_time(int(pid)) != start


# What a heartbeat reads of the run's inbox: (the newest pause request, the retractions).
Requests = tuple[tuple[int, str] | None, list[tuple[int, str, str]]]


class Beats:
    """One thread that renews the leases of many runs, each at its own interval.

    A run used to start a thread of its own for its heartbeat and join it at its end: two
    thread switches that a busy machine delays by milliseconds, on every run (an MCP call
    through the proxy is a run). This thread is started by the first heartbeat, sleeps until the
    next one is due, and ends after `IDLE` seconds with none to beat. The heartbeats of one
    `Daybook` share it (they already share one connection and its lock, so they renewed one at
    a time before too)."""

    IDLE = 5.0  # seconds the thread waits with no heartbeat before it ends

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._due: dict[Heartbeat, float] = {}
        self._thread: threading.Thread | None = None
        self._wake_at = 0.0  # when the thread wakes next (0 while it renews)
        self._pid = os.getpid()

    def add(self, beat: Heartbeat) -> None:
        with self._cond:
            if self._pid != os.getpid():  # a forked child: its parent's runs are not its own
                self._pid, self._due, self._thread = os.getpid(), {}, None
            due = self._due[beat] = time.monotonic() + beat.interval
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="daybook-heartbeat", daemon=True)
                self._thread.start()
            elif due < self._wake_at:
                # Woken only when this one is due before the thread would wake anyway: waking a
                # thread is a switch of the GIL, which on a busy machine costs the caller ms.
                self._cond.notify()

    def remove(self, beat: Heartbeat) -> None:
        """Stop beating `beat`; returns once a renewal of it in progress has ended."""
        with self._cond:
            self._due.pop(beat, None)  # not woken: it finds the next one due when it wakes
        with beat.busy:
            pass

    def _next(self) -> Heartbeat | None:
        """The heartbeat due now (its next time set), waiting for it; None when idle too long."""
        with self._cond:
            while True:
                if not self._due:
                    self._wake_at = time.monotonic() + self.IDLE
                    if not self._cond.wait(self.IDLE) and not self._due:
                        self._thread = None
                        return None
                    continue
                beat, at = min(self._due.items(), key=lambda item: item[1])
                now = time.monotonic()
                if at <= now:
                    self._wake_at = 0.0  # awake: renewing
                    self._due[beat] = now + beat.interval
                    beat.busy.acquire()  # released by _loop once this renewal is done
                    return beat
                self._wake_at = at
                self._cond.wait(at - now)

    def _loop(self) -> None:
        while (beat := self._next()) is not None:
            try:
                if not beat.stopped and not beat.tick():
                    with self._cond:
                        self._due.pop(beat, None)
            finally:
                beat.busy.release()


_SHARED = Beats()  # for heartbeats made without a `Beats` of their own


@dataclass(eq=False)
class Heartbeat:
    """Renews a lease from a background thread (`Beats`); `lost` turns true if a renewal is
    refused. `stop` it when the run lets go of its lease."""

    renew: Callable[[], bool]
    interval: float
    lost: bool = False
    # Looked at after each renewal (on the heartbeat's own connection): the newest pause request
    # in the run's inbox as (inbox id, who asked), which the run honours at its next step, and
    # the retractions sent so far as (inbox id, target, who).
    watch: Callable[[], Requests] | None = None
    pause: tuple[int, str] | None = None
    # Set by the cursor while a tool that declares `cancel` runs (S11): handed the retractions
    # after each renewal, so one that names the running step can stop it mid-call.
    in_flight: Callable[[list[tuple[int, str, str]]], None] | None = None
    beats: Beats | None = None
    # Set by the effect's hot path while a call with no timeout runs (its tool, run and key, and
    # when it began, monotonic): one still running after `hung_after` seconds is logged once,
    # since nothing else would say why the run waits (a hung call holds the run;
    # `Retry(timeout=)` bounds it).
    calling: tuple[str, str, str, float] | None = None
    hung_after: float = 300.0

    def __post_init__(self) -> None:
        self._warned: tuple[str, str, str, float] | None = None
        self.stopped = False
        self.busy = threading.RLock()  # held while a renewal runs (stop waits for it)
        self._beats = self.beats or _SHARED
        self._beats.add(self)

    def tick(self) -> bool:
        """One renewal (and a look at the inbox); False once the lease is lost (no more)."""
        try:
            if not self.renew():
                self.lost = True
                return False
            if self.watch is not None:
                self.pause, retracts = self.watch()
                hook = self.in_flight
                if hook is not None and retracts:
                    hook(retracts)
            self._note_hung()
        except Exception:
            # A transient store error must not kill the run; the lease may still be ours and
            # the journal's (run_id, seq) key fences a takeover anyway.
            pass
        return True

    def _note_hung(self) -> None:
        calling = self.calling
        if calling is None or calling is self._warned:
            return
        tool, run_id, key, since = calling
        took = time.monotonic() - since
        if took >= self.hung_after:
            self._warned = calling
            log.warning(
                "run %s: the call of %s (key %s) has run for %.0f s with no timeout; the run "
                "waits for it (give the tool Retry(timeout=SECONDS) if its calls can hang)",
                run_id,
                tool,
                key,
                took,
            )

    def stop(self) -> None:
        self.stopped = True
        self._beats.remove(self)
