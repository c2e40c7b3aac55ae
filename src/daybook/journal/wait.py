"""Durable waits: timers (`ctx.sleep`) and signals (`ctx.wait_for`).

A timer's deadline and a wait's start are journaled, so a crash or a stop loses neither and each
fires once. Waits up to `inline_wait` seconds happen in this process; longer ones suspend the run
(no thread, socket or process held) until a worker resumes it when due or a signal arrives.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

from ..records import Kind
from .execution import Execution, step_fingerprint
from .facet import Facet
from .stop import Suspend


class _Pending:
    """Still waiting: neither a signal nor the deadline yet."""


@dataclass(frozen=True)
class Signal:
    """A signal a run received: journaled when it is consumed, replayed from the journal."""

    name: str
    payload: Any
    sender: str
    at: float
    # True only when the signal carries its sender's signature over its name and payload and the
    # sender is registered in the approvers file (`gates.identity`); else a name taken on trust.
    authenticated: bool = False


_PENDING = _Pending()

# How a signal sent through the identity rule is stored in the inbox: its payload beside who sent
# it (`identity`: authenticated or not, the OS user, the database role, a signature if any).
ENVELOPE = "daybook.signal"


def signal_act(name: str, payload: Any) -> str:
    """What a sender's signature on a signal covers: its name and payload, so it cannot be moved."""
    body = json.dumps([name, payload], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return f"signal:{hashlib.sha256(body.encode()).hexdigest()[:32]}"


def envelope(payload: Any, identity: Any) -> dict[str, Any]:
    return {"format": ENVELOPE, "payload": payload, "identity": identity}


def opened(text: str) -> tuple[Any, Any]:
    """(payload, identity record or None) of a signal's inbox text; a row written without the
    envelope (an older store, or by hand) has no identity."""
    value = json.loads(text)
    if (
        isinstance(value, dict)
        and value.get("format") == ENVELOPE
        and set(value) == {"format", "payload", "identity"}
    ):
        return value["payload"], value["identity"]
    return value, None


# Whether a signal's record proves who sent it: (act, sender, record) -> proved.
Prover = Callable[[str, str, Any], bool]


class Waits(Facet):
    """`ctx.sleep` and `ctx.wait_for`, sync and async, sharing one journaled wait each."""

    def __init__(self, exe: Execution, prove: Prover | None = None) -> None:
        super().__init__(exe)
        # Whether a signal's sender is proved by its record: the identity check lives in a
        # higher layer (`daybook.gates.identity`), which `Context` passes in.
        self._prove = prove

    def sleep(self, seconds: float) -> None:
        """A durable timer: the deadline is journaled, so a crash or a stop does not lose it and
        it fires once. Waits of up to a couple of seconds happen in this process; longer ones
        suspend the run (no thread, socket or process held) until a worker resumes it when due."""
        due = self._due(seconds)
        if due is not None:
            step, left = due
            if left > 0:
                self._exe.settings.sleep(left)
            self._fire(step)

    async def sleep_async(self, seconds: float) -> None:
        """`sleep` for async workflows: the in-process part of the wait does not block the loop."""
        import asyncio  # loaded already: this runs on an event loop

        due = self._due(seconds)
        if due is not None:
            step, left = due
            if left > 0 and not self._exe.read_only:
                await asyncio.sleep(left)
            self._fire(step)

    def _due(self, seconds: float) -> tuple[int, float] | None:
        """None if the timer already fired; else its step and how long to wait in process
        (suspends the run instead when that is longer than `inline_wait`)."""
        due = self._timer(seconds)
        if due is None:
            return None
        step, fire_at = due
        left = fire_at - self._exe.clock()
        if left > self._exe.settings.inline_wait:
            raise Suspend(self.run_id, fire_at, f"a timer (step {step})")
        return step, left

    def _timer(self, seconds: float) -> tuple[int, float] | None:
        if seconds < 0:
            raise ValueError(f"ctx.sleep({seconds}): seconds must be >= 0")
        exe = self._exe
        step = exe.alloc()
        fp = step_fingerprint({"seconds": seconds}, step, "sleep")
        recs = exe.expect(step, Kind.TIMER, "sleep", fp)
        if recs is None:
            fire_at = exe.clock() + seconds
            exe.append(
                Kind.TIMER,
                step,
                "sleep",
                status="set",
                fp=fp,
                data={"fire_at": fire_at, "seconds": seconds},
            )
            return step, fire_at
        if recs[-1].status == "fired":
            return None
        return step, float(recs[0].data["fire_at"])

    def _fire(self, step: int) -> None:
        self._exe.append(Kind.TIMER, step, "sleep", status="fired", data={})

    def wait_for(self, name: str, timeout: float | None = None) -> Signal | None:
        """Wait for the next signal `name` sent to this run (`book.signal`, `daybook signal`).

        Returns the `Signal`, or None once `timeout` seconds have passed without one. The wait is
        durable: past a couple of seconds the run is suspended until the signal or the deadline.
        Signals queue: each wait consumes the oldest unconsumed one of that name, once."""
        polls = self._polls(name, timeout)
        try:
            while True:
                self._exe.settings.sleep(next(polls))
        except StopIteration as done:
            result: Signal | None = done.value
            return result

    async def wait_for_async(self, name: str, timeout: float | None = None) -> Signal | None:
        """`wait_for` for async workflows."""
        import asyncio  # loaded already: this runs on an event loop

        polls = self._polls(name, timeout)
        try:
            while True:
                await asyncio.sleep(next(polls))
        except StopIteration as done:
            result: Signal | None = done.value
            return result

    def _polls(self, name: str, timeout: float | None) -> Generator[float, None, Signal | None]:
        """The wait itself, shared by the sync and async forms: yields how long to pause before
        looking again; returns the signal (or None on timeout); suspends past `inline_wait`."""
        step, deadline, done = self._wait_step(name, timeout)
        if not isinstance(done, _Pending):
            return done
        waited = 0.0
        while True:
            got = self._take(step, name, deadline)
            if not isinstance(got, _Pending):
                return got
            if waited >= self._exe.settings.inline_wait:
                raise Suspend(self.run_id, deadline, f"signal {name!r} (step {step})")
            pause = 0.05 if waited < 0.5 else 0.2
            yield pause
            waited += pause

    def _wait_step(
        self, name: str, timeout: float | None
    ) -> tuple[int, float | None, Signal | _Pending | None]:
        if timeout is not None and timeout < 0:
            raise ValueError(f"ctx.wait_for({name!r}, timeout={timeout}): timeout must be >= 0")
        exe = self._exe
        step = exe.alloc()
        label = f"signal:{name}"
        fp = step_fingerprint({"name": name, "timeout": timeout}, step, label)
        recs = exe.expect(step, Kind.SIGNAL, label, fp)
        if recs is None:
            deadline = None if timeout is None else exe.clock() + timeout
            exe.append(
                Kind.SIGNAL,
                step,
                label,
                status="waiting",
                fp=fp,
                data={"name": name, "deadline": deadline},
            )
            return step, deadline, _PENDING
        last = recs[-1]
        if last.status == "received":
            d = last.data
            sure = bool(d.get("authenticated"))
            return step, None, Signal(name, d.get("payload"), str(d.get("sender")), float(d["at"]), sure)
        if last.status == "timeout":
            return step, None, None
        deadline = recs[0].data.get("deadline")
        return step, None if deadline is None else float(deadline), _PENDING

    def _proved(self, act: str, sender: str, record: Any) -> bool:
        """Whether `record` proves `sender` sent `act` to this run (no prover given: never)."""
        return self._prove is not None and self._prove(act, sender, record)

    def _take(self, step: int, name: str, deadline: float | None) -> Signal | _Pending | None:
        """The next unconsumed signal (journaled as consumed); None on timeout; else _PENDING."""
        exe = self._exe
        for inbox_id, sig_name, payload_text, sender, at in exe.store.inbox(exe.run_id):
            if sig_name != name or inbox_id in exe.consumed:
                continue
            if deadline is not None and at > deadline:
                continue  # arrived after the deadline: late, and it does nothing
            payload, who = opened(payload_text)
            data: dict[str, Any] = {"inbox_id": inbox_id, "payload": payload, "sender": sender, "at": at}
            sure = False
            if who is not None:
                sure = self._proved(signal_act(name, payload), sender, who)
                # As checked now: a record that claims more than its signature proves says so.
                data.update(identity={**who, "authenticated": sure} if isinstance(who, dict) else who)
                data["authenticated"] = sure
            exe.append(Kind.SIGNAL, step, f"signal:{name}", status="received", data=data)
            exe.consumed.add(inbox_id)
            return Signal(name, payload, sender, at, sure)
        if deadline is not None and exe.clock() >= deadline:
            exe.append(Kind.SIGNAL, step, f"signal:{name}", status="timeout", data={})
            return None
        return _PENDING
