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


@dataclass
class Heartbeat:
    """Renews a lease from a background thread; `lost` turns true if a renewal is refused."""

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
    # Set by the effect's hot path while a call with no timeout runs (its tool, run and key, and
    # when it began, monotonic): one still running after `hung_after` seconds is logged once,
    # since nothing else would say why the run waits (a hung call holds the run;
    # `Retry(timeout=)` bounds it).
    calling: tuple[str, str, str, float] | None = None
    hung_after: float = 300.0

    def __post_init__(self) -> None:
        self._warned: tuple[str, str, str, float] | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="daybook-heartbeat", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                if not self.renew():
                    self.lost = True
                    return
                if self.watch is not None:
                    self.pause, retracts = self.watch()
                    hook = self.in_flight
                    if hook is not None and retracts:
                        hook(retracts)
                self._note_hung()
            except Exception:
                # A transient store error must not kill the run; the lease may still be ours and
                # the journal's (run_id, seq) key fences a takeover anyway.
                continue

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
        self._stop.set()
        self._thread.join()
