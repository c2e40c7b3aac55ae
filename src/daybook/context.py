"""The run context: how a workflow records decisions and performs effects, live or on replay.

Every call on `Context` takes the next step position in call order (so parallel steps get
deterministic ids), then either returns what the journal holds for that position or does the
work live and journals it. Effects follow one state machine, shared by the sync and async paths:

    intent -> call -> outcome confirmed | failed | unknown
    unknown -> status(key) | verify(args) | lookup(ref) -> confirmed(ref)
                                      -> absent -> attempt (same key) -> call ...
                                      -> pending -> durable timer (`poll`) -> ask again
                                                    (no `poll`: backoff, then needs attention)
    unknown, past the dedup window -> lookup(ref) if a reference is known, else needs attention
    unknown, tool idempotent -> attempt (same key) -> call ...
    unknown, otherwise -> needs attention (a person resolves it; nothing is guessed)
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import json
import logging
import random as _random
import threading
import time
import traceback
import uuid as _uuid
from collections.abc import Awaitable, Callable, Coroutine, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, NoReturn, TypeVar, overload

from . import strict
from .budget import Budget
from .entity import Entity
from .errors import (
    DaybookError,
    DedupWindowExpired,
    DuplicateKey,
    EffectFailed,
    LeaseLost,
    NeedsAttention,
    NonDeterminismError,
    RunStuck,
    StepFailed,
    StoreUnavailable,
    Suspended,
)
from .lease import Heartbeat
from .llm import LLMClient
from .records import JSON, Event, Kind, Status, Why, check_json, fingerprint
from .store import Store
from .tool import Confirmed, NotFound, StillUnknown, Tool, classify
from .tool import lookup as lookup_tool

T = TypeVar("T")
log = logging.getLogger("daybook")
_SLEEP = time.sleep  # the original: strict mode may guard `time.sleep` for workflow bodies

# What the effect state machine asks its driver to do, and what it gets back.
_Op = tuple[str, Any]
_Reply = tuple[str, Any] | None
# Reads and bookkeeping steps, not decisions an effect follows from: clock and randomness, the
# barrier, reads of the world (adapters, the loop's observe/verify), and every internal step
# (their names hold a colon: budget:charge, patch:NAME, precondition:..., notify:..., answer:...).
_NOT_REASONS = frozenset(
    {"now", "random", "uuid", "barrier", "claim", "on_stuck", "observe", "verify", "files.read", "sql.query"}
)


@dataclass(frozen=True)
class Decision(Generic[T]):
    """A recorded decision. `id` is `<run id>/<step>`; derive effect keys from it with `key()`."""

    id: str
    name: str
    value: T
    step: int

    def key(self, kind: str, i: int = 0) -> str:
        return f"{self.id}/{kind}/{i}"


class Stop(BaseException):
    """Internal: unwind the workflow without letting user `except Exception` blocks swallow it.

    `attention` carries a message for the run header (and, with `journal`, a journal row);
    a lease loss carries neither, because this process no longer owns the run.
    """

    def __init__(
        self,
        error: DaybookError,
        attention: bool,
        journal: bool = False,
        release: bool = False,
        status: str = "needs_attention",
    ) -> None:
        super().__init__(str(error))
        self.error = error
        self.attention = attention
        self.journal = journal
        self.release = release
        self.status = status


class Suspend(Stop):
    """Internal: park the run until `wake_at` (None: until a signal arrives)."""

    def __init__(self, run_id: str, wake_at: float | None, waiting_for: str) -> None:
        super().__init__(Suspended(run_id, wake_at, waiting_for), False)
        self.wake_at = wake_at


@dataclass(frozen=True)
class Verdict:
    """How an approval gate ended: `approved`, `declined`, `timed_out`, or `stale` (approved,
    but the precondition no longer held when it was re-checked)."""

    gate_id: str
    outcome: str
    approver: str | None = None
    reason: str = ""

    @property
    def approved(self) -> bool:
        return self.outcome == "approved"


@dataclass
class Compensation:
    """What `ctx.compensate()` did, effect keys in unwind (LIFO) order."""

    compensated: list[str] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)  # the inverse failed
    no_inverse: list[str] = field(default_factory=list)  # nothing registered can undo it

    @property
    def complete(self) -> bool:
        return not self.stuck and not self.no_inverse


class _Pending:
    """Still waiting: neither a signal nor the deadline yet."""


_PENDING = _Pending()


class ContinueAsNew(Stop):
    """Internal: end this run's segment and go on as a new run with fresh input."""

    def __init__(self, run_id: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        super().__init__(DaybookError(f"run {run_id!r} continues as a new run"), False)
        self.args = args
        self.kwargs = kwargs


def next_segment(run_id: str) -> str:
    """`R` -> `R~2` -> `R~3`: the id of the run that continues `run_id`."""
    base, sep, n = run_id.rpartition("~")
    return f"{base}~{int(n) + 1}" if sep and n.isdigit() else f"{run_id}~2"


@dataclass(frozen=True)
class Signal:
    """A signal a run received: journaled when it is consumed, replayed from the journal."""

    name: str
    payload: Any
    sender: str
    at: float


def error_info(exc: BaseException) -> dict[str, str]:
    return {
        "type": type(exc).__name__,
        "message": str(exc),
        "where": "".join(traceback.format_exception(exc)[-3:])[-2000:],
    }


class Execution:
    """One process's execution of one run: the loaded journal and the next positions to write."""

    def __init__(
        self,
        store: Store,
        run_id: str,
        events: list[Event],
        heartbeat: Heartbeat | None,
        read_only: bool = False,
    ) -> None:
        self.store = store
        self.read_only = read_only
        self.run_id = run_id
        self.heartbeat = heartbeat
        self.steps: dict[int, list[Event]] = {}
        for ev in events:
            if ev.step is not None:
                self.steps.setdefault(ev.step, []).append(ev)
        self.recorded_steps = max(self.steps, default=0)
        self.next_seq = (events[-1].seq if events else 0) + 1
        self.next_step = 1
        self.keys: dict[str, int] = {}
        self.per_decision: dict[str, int] = {}
        # The latest decision made or replayed: an effect with no explicit decision links to it.
        self.last_decision: str | None = None
        # What bufferable adapters hold until their commit step, per adapter instance: memory
        # of this execution only, refilled on replay by the steps that filled it.
        self.held: dict[object, list[Any]] = {}
        self.clock: Callable[[], float] = time.time
        self.sleep: Callable[[float], None] = _SLEEP
        # Waits up to this long happen in this process; longer ones suspend the run.
        self.inline_wait = 2.0
        self.consumed: set[int] = {
            int(ev.data["inbox_id"])
            for ev in events
            if ev.kind == Kind.SIGNAL and ev.status == "received" and "inbox_id" in ev.data
        }

    # -- journal writes -----------------------------------------------------------------------

    def append(self, kind: Kind, step: int | None, name: str, **fields: Any) -> Event:
        if self.read_only:
            raise Stop(
                NonDeterminismError(
                    f"run {self.run_id!r}: replay needs to record step {step} ({kind.value} "
                    f"{name!r}), which the journal does not settle; the run has not finished "
                    "that step, or the workflow code changed"
                ),
                True,
            )
        if self.heartbeat is not None and self.heartbeat.lost:
            raise Stop(LeaseLost(f"run {self.run_id!r}: lease lost; stopped before writing"), False)
        ev = Event(
            run_id=self.run_id,
            seq=self.next_seq,
            kind=kind.value,
            step=step,
            name=name,
            at=self.clock(),
            **fields,
        )
        try:
            self.store.append(ev)
        except LeaseLost as exc:
            raise Stop(exc, False) from None
        except DuplicateKey as exc:
            raise Stop(exc, True) from None
        except Exception as exc:
            # The store is unreachable or broken: stop as a crash would (no terminal status the
            # store could not record anyway); resume goes on from the last durable row.
            raise Stop(
                StoreUnavailable(
                    f"run {self.run_id!r}: the journal write for seq {ev.seq} ({ev.kind} "
                    f"{ev.name!r}) failed: {type(exc).__name__}: {exc}. The run stopped where "
                    "the journal ends; fix the store, then `daybook resume` it"
                ),
                False,
                release=True,
            ) from exc
        # Live rows are not kept: memory stays flat however long the run (a step's rows are
        # only ever read back by a later process, from the store).
        self.next_seq += 1
        return ev

    def alloc(self) -> int:
        step = self.next_step
        self.next_step += 1
        return step

    def expect(self, step: int, kind: Kind, name: str, fp: str) -> list[Event] | None:
        # Popped: a replayed step is never looked up again, so a resume frees as it goes.
        recs = self.steps.pop(step, None)
        if not recs:
            return None
        first = recs[0]
        if first.kind != kind or first.name != name:
            raise Stop(
                NonDeterminismError(
                    f"run {self.run_id!r} step {step}: the journal holds {first.kind} "
                    f"{first.name!r} but the workflow now asks for {kind.value} {name!r}. The "
                    "workflow code changed under a live run: restore the code it started with "
                    "to finish it, or start a new run"
                ),
                True,
            )
        if first.fp != fp:
            raise Stop(
                NonDeterminismError(
                    f"run {self.run_id!r} step {step} ({kind.value} {name!r}): its arguments "
                    f"differ from the journal (fingerprint {first.fp}, now {fp}). Arguments must "
                    "come from recorded steps (ctx.decide, ctx.now, ...) so replay sees the same "
                    "values; restore the code the run started with"
                ),
                True,
            )
        return recs

    def check_complete(self) -> None:
        done = self.next_step - 1
        if self.recorded_steps > done:
            first = self.steps[min(k for k in self.steps if k > done)][0]
            raise Stop(
                NonDeterminismError(
                    f"run {self.run_id!r}: the workflow finished after step {done}, but the "
                    f"journal holds step {done + 1} ({first.kind} {first.name!r}); the workflow "
                    "code changed under a live run: restore the code it started with"
                ),
                True,
            )


def _fingerprint(value: Any, step: int, name: str, check: bool = True) -> str:
    from .errors import NotSerializable

    try:
        return fingerprint(value, "", check)
    except NotSerializable as exc:
        # The message is built only here: the hot path never formats it.
        raise Stop(NotSerializable(f"step {step} {name!r} arguments{exc}"), True) from None


def _json(value: Any, what: str) -> None:
    from .errors import NotSerializable

    try:
        check_json(value, what)
    except NotSerializable as exc:
        raise Stop(exc, True) from None


class _Effect:
    """The state machine of one effect step; a generator so sync and async drivers share it."""

    def __init__(
        self,
        exe: Execution,
        step: int,
        tool: Tool[Any],
        key: str,
        args: dict[str, JSON],
        fp: str,
        decision: str | None,
        recs: list[Event] | None,
    ) -> None:
        self.exe = exe
        self.step = step
        self.tool = tool
        self.key = key
        self.args = args
        self.fp = fp
        self.decision = decision
        self.recs = recs

    def _write(self, kind: Kind, attempt: int, status: Status | None = None, **data: Any) -> Event:
        if kind == Kind.ATTEMPT or status in (Status.UNKNOWN, Status.FAILED):
            # Operators read these; confirmed outcomes (the hot path) are not logged.
            log.warning(
                "run %s step %s %s key=%s attempt %s: %s %s",
                self.exe.run_id,
                self.step,
                self.tool.name,
                self.key,
                attempt,
                status.value if status else kind.value,
                data.get("reason") or data.get("error", ""),
            )
        return self.exe.append(
            kind,
            self.step,
            self.tool.name,
            key=self.key,
            status=status.value if status else None,
            attempt=attempt,
            fp=self.fp,
            data=data,
        )

    def _attention(self, why: str, error: DaybookError | None = None) -> Stop:
        rid = self.exe.run_id
        msg = (
            f"run {rid!r} step {self.step} {self.tool.name!r} (key {self.key!r}): outcome unknown: "
            f"{why}. Ask the counterparty what happened to key {self.key!r}, record it with "
            f"`daybook resolve {rid} {self.step} --confirmed JSON | --failed MESSAGE | --absent` "
            f"(--absent: it never arrived, safe to send again under the same key), then "
            f"`daybook resume {rid}`"
        )
        stop = Stop(error or NeedsAttention(rid, msg), True, journal=True)
        log.error("%s", stop.error)
        return stop

    def _failed(self, attempt: int, exc: BaseException) -> EffectFailed:
        info = error_info(exc)
        self._write(Kind.OUTCOME, attempt, Status.FAILED, error=info, final=True)
        return self._raise_failed(info)

    def _raise_failed(self, info: dict[str, str]) -> EffectFailed:
        return EffectFailed(
            f"step {self.step} {self.tool.name!r} (key {self.key!r}) failed: "
            f"{info.get('type')}: {info.get('message')}",
            info,
        )

    def flow(self) -> Generator[_Op, _Reply, Any]:
        retry = self.tool.retry
        recs = self.recs or []
        # Once any attempt's outcome was unknown, the act may have happened: from then on a
        # re-send must respect the dedup window and running out of attempts is a question for a
        # person, never a certain failure.
        doubtful = any(e.kind == Kind.OUTCOME and e.status == Status.UNKNOWN for e in recs)
        operator_absent = False
        # The counterparty's own id for the act, once any answer carried one (asked by it past
        # the dedup window); and when the next status round is due, if one was scheduled.
        ref: Any = next((e.data["ref"] for e in reversed(recs) if "ref" in e.data), None)
        poll_at: float | None = None
        if not recs:
            ev = self._write(Kind.INTENT, 1, args=self.args, decision=self.decision)
            intent_at, attempt, state = ev.at, 1, "call"
        else:
            intent_at = recs[0].at
            last = recs[-1]
            attempt = last.attempt
            if last.kind in (Kind.INTENT, Kind.ATTEMPT):
                # The crash window: an intent without an outcome may or may not have happened.
                self._write(
                    Kind.OUTCOME,
                    attempt,
                    Status.UNKNOWN,
                    reason="in flight when the process that sent it stopped",
                )
                doubtful = True
                state = "resolve"
            elif last.status == Status.CONFIRMED:
                return last.data.get("result")
            elif last.status == Status.FAILED:
                if last.data.get("final", True):
                    raise self._raise_failed(last.data.get("error") or {})
                state = "retry"
            else:
                # A person's `resolve --absent` is evidence: it overrides the attempt limit and
                # the dedup window, which exist to stop the runtime from guessing.
                operator_absent = last.data.get("resolution") == "absent"
                state = "resend" if operator_absent else "resolve"
                if not operator_absent and "poll_at" in last.data:
                    poll_at = float(last.data["poll_at"])

        while True:
            if state in ("retry", "resend"):
                if not operator_absent:
                    window = self.tool.dedup_window
                    age = self.exe.clock() - intent_at
                    if doubtful and window is not None and age > window:
                        raise self._attention("dedup window expired", self._window_error(window, age))
                    if not retry.allows(attempt + 1):
                        raise self._attention(f"all {attempt} attempts are used")
                yield ("sleep", retry.delay(attempt))
                attempt += 1
                reason = {
                    "retry": "retry after a transient failure, same key",
                    "resend": "sent again under the same key: "
                    + (
                        "a person recorded that it never arrived"
                        if operator_absent
                        else "the counterparty has no record of it"
                        if self.tool.reconcile
                        else "verify found no trace of it"
                        if self.tool.verify
                        else "the tool is idempotent"
                    ),
                }[state]
                self._write(Kind.ATTEMPT, attempt, reason=reason)
                operator_absent = False
                state = "call"
            elif state == "call":
                reply = yield ("call", retry.timeout or 0.0)
                assert reply is not None
                tag, value = reply
                if tag == "ok":
                    try:
                        check_json(value, f"step {self.step} {self.tool.name!r} result")
                    except DaybookError as exc:
                        self._write(
                            Kind.OUTCOME,
                            attempt,
                            Status.UNKNOWN,
                            reason=f"the tool returned a value daybook cannot journal: {exc}",
                        )
                        raise Stop(exc, True) from None
                    self._write(Kind.OUTCOME, attempt, Status.CONFIRMED, result=value, **self._books(value))
                    return value
                verdict = classify(value)
                if verdict == "failed":
                    if doubtful:
                        # An earlier attempt may have landed: a refusal now proves nothing.
                        self._write(
                            Kind.OUTCOME,
                            attempt,
                            Status.UNKNOWN,
                            error=error_info(value),
                            reason="refused, but an earlier attempt may have happened",
                        )
                        state = "resolve"
                        continue
                    raise self._failed(attempt, value)
                if verdict == "transient":
                    if not retry.allows(attempt + 1) and not doubtful:
                        raise self._failed(attempt, value)
                    self._write(Kind.OUTCOME, attempt, Status.FAILED, error=error_info(value), final=False)
                    state = "retry"
                    continue
                carried = getattr(value, "ref", None)
                if carried is not None:
                    ref = carried
                self._write(
                    Kind.OUTCOME,
                    attempt,
                    Status.UNKNOWN,
                    error=error_info(value),
                    reason="the request may have reached the counterparty but no answer came",
                    **({"ref": ref} if ref is not None else {}),
                )
                doubtful = True
                state = "resolve"
            elif state == "resolve":
                tool = self.tool
                expired = doubtful and self._expired(intent_at)
                if expired and tool.lookup is not None and ref is not None:
                    op = "lookup"  # past the window the key proves nothing: ask by its own id
                elif tool.reconcile is not None:
                    op = "status"
                elif tool.verify is not None:
                    op = "verify"
                elif tool.lookup is not None and ref is not None:
                    op = "lookup"
                elif tool.idempotent:
                    state = "resend"
                    continue
                else:
                    raise self._attention(
                        "the tool has no status query or verify hook to ask the counterparty and is "
                        "not declared idempotent, so daybook will not send it again on a guess"
                    )
                rounds = 0
                while True:
                    if poll_at is not None:
                        left = poll_at - self.exe.clock()
                        if left > self.exe.inline_wait:
                            # A durable timer: the next round's time is in the journal; the run
                            # holds no process and a worker resumes it when due.
                            raise Suspend(
                                self.exe.run_id, poll_at, f"the counterparty's answer (step {self.step})"
                            )
                        if left > 0:
                            yield ("sleep", left)
                        poll_at = None
                    reply = yield (op, ref)
                    assert reply is not None
                    tag, answer = reply
                    if tag == "ok" and isinstance(answer, Confirmed):
                        _json(answer.result, f"step {self.step} reconciled result")
                        self._write(
                            Kind.OUTCOME,
                            attempt,
                            Status.CONFIRMED,
                            result=answer.result,
                            resolved_by=op,
                            **self._books(answer.result, answer.ref if answer.ref is not None else ref),
                        )
                        return answer.result
                    if tag == "ok" and isinstance(answer, NotFound):
                        if op == "lookup":
                            raise self._attention(
                                f"the counterparty has no record under its own reference {ref!r} "
                                "and the dedup window has passed, so a re-send is unprotected"
                            )
                        state = "resend"
                        break
                    if tag == "ok" and not isinstance(answer, StillUnknown):
                        raise self._attention(
                            f"{op} returned {answer!r}; expected Confirmed, Absent (NotFound) or "
                            "Pending (StillUnknown)"
                        )
                    if isinstance(answer, StillUnknown) and answer.ref is not None:
                        ref = answer.ref
                    if tool.poll is not None:
                        # Declared polling: unlimited rounds, each answer a row in the effect's
                        # status history, the wait between them a durable timer.
                        poll_at = self.exe.clock() + tool.poll
                        self._write(
                            Kind.OUTCOME,
                            attempt,
                            Status.UNKNOWN,
                            reason="the counterparty says pending"
                            if tag == "ok"
                            else f"the {op} query failed: {error_info(answer)['message']}",
                            answer="pending" if tag == "ok" else "no answer",
                            poll_at=poll_at,
                            **({"ref": ref} if ref is not None else {}),
                        )
                        continue
                    rounds += 1
                    limit = retry.reconcile_rounds
                    if limit is not None and rounds >= limit:
                        raise self._attention(f"the counterparty still could not say after {rounds} queries")
                    yield ("sleep", retry.delay(rounds))

    def _expired(self, intent_at: float) -> bool:
        window = self.tool.dedup_window
        return window is not None and self.exe.clock() - intent_at > window

    def _books(self, result: Any, ref: Any = None) -> dict[str, Any]:
        """What the effect ledger keeps with a confirmed outcome, in the same row (so the two are
        written atomically): the counterparty's own reference, and how to undo the effect."""
        books: dict[str, Any] = {}
        if ref is not None:
            books["ref"] = ref
        elif self.tool.reference is not None:
            with contextlib.suppress(Exception):  # a result without the reference keeps none
                books["ref"] = self.tool.reference(result)
        if self.tool.inverse is not None:
            books["compensation"] = {"tool": self.tool.inverse.name, "key": f"comp/{self.key}"}
        return books

    def _window_error(self, window: float, age: float) -> DedupWindowExpired:
        return DedupWindowExpired(
            self.exe.run_id,
            f"run {self.exe.run_id!r} step {self.step} {self.tool.name!r} (key {self.key!r}): a "
            f"re-send is needed, but the counterparty forgets keys after {window:g}s and the "
            f"intent is {age:.1f}s old, so the key no longer protects a re-send. Ask the "
            f"counterparty by its reference, then `daybook resolve {self.exe.run_id} {self.step} "
            "--confirmed JSON | --failed MESSAGE | --absent` and resume",
        )


def _call_with_timeout(fn: Callable[[], Any], timeout: float) -> Any:
    if not timeout:
        return fn()
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["ok"] = fn()
        except BaseException as exc:
            box["err"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise TimeoutError(f"no answer within {timeout:g}s")
    if "err" in box:
        raise box["err"]
    return box["ok"]


class Context:
    """What a workflow gets as `ctx`: every non-deterministic read and every effect goes through it."""

    def __init__(self, exe: Execution) -> None:
        self._exe = exe
        self.budget = Budget(self)

    @property
    def run_id(self) -> str:
        return self._exe.run_id

    def key(self, decision: Decision[Any], kind: str, i: int = 0) -> str:
        """The idempotency key `<decision id>/<kind>/<i>`: names the decision, not its inputs."""
        return decision.key(kind, i)

    def held(self, owner: object, *, take: bool = False) -> list[Any]:
        """What `owner` (a bufferable adapter: staged files, SQL statements, an outbox) holds for
        this execution until its commit step; `take=True` returns it and starts a new list. Not
        journaled: the steps that fill it replay in order, so a resumed run rebuilds it."""
        if take:
            return self._exe.held.pop(owner, [])
        return self._exe.held.setdefault(owner, [])

    # -- decisions ----------------------------------------------------------------------------

    @overload
    def decide(
        self,
        name: str,
        fn: Callable[..., Coroutine[Any, Any, T]],
        *args: Any,
        why: Why | Callable[[Any], Why] | None = None,
        **kwargs: Any,
    ) -> Awaitable[Decision[T]]: ...

    @overload
    def decide(
        self,
        name: str,
        fn: Callable[..., T],
        *args: Any,
        why: Why | Callable[[Any], Why] | None = None,
        **kwargs: Any,
    ) -> Decision[T]: ...

    def decide(
        self,
        name: str,
        fn: Callable[..., Any],
        *args: Any,
        why: Why | Callable[[Any], Why] | None = None,
        **kwargs: Any,
    ) -> Any:
        """Run `fn(*args, **kwargs)` once and journal its value; replay returns the recorded value.

        Use it for anything non-deterministic: a model call, reading the world, a random choice.
        An `async def` fn makes this return an awaitable. `why=Why(policy=, version=,
        observation=, alternatives=)` (or a function of the value returning one) goes into the
        decision ledger with the value (`daybook why`);
        effects that follow link to this decision unless given another.
        """
        exe = self._exe
        step = exe.alloc()
        fp = _fingerprint({"args": list(args), "kwargs": kwargs}, step, name)
        recs = exe.expect(step, Kind.DECISION, name, fp)
        if recs is not None:
            if inspect.iscoroutinefunction(fn):
                # A recorded failure must surface at `await`, as it did live, not at the call.
                return self._replayed_async(step, name, recs[0])
            return self._replayed(step, name, recs[0])
        if exe.read_only:
            exe.append(Kind.DECISION, step, name)  # raises: a pure replay never runs fn
        if inspect.iscoroutinefunction(fn):
            return self._decide_async(step, name, fp, fn, args, kwargs, why)
        try:
            with strict.step():
                value = fn(*args, **kwargs)
        except Exception as exc:
            raise self._decision_failed(step, name, fp, exc) from exc
        return self._record(step, name, fp, value, why)

    async def _decide_async(
        self,
        step: int,
        name: str,
        fp: str,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        why: Why | Callable[[Any], Why] | None,
    ) -> Decision[Any]:
        try:
            with strict.step():
                value = await fn(*args, **kwargs)
        except Exception as exc:
            raise self._decision_failed(step, name, fp, exc) from exc
        return self._record(step, name, fp, value, why)

    def _record(
        self, step: int, name: str, fp: str, value: Any, why: Why | Callable[[Any], Why] | None = None
    ) -> Decision[Any]:
        _json(value, f"step {step} decision {name!r} value")
        data: dict[str, Any] = {"value": value}
        if why is not None:
            reasons = (why if isinstance(why, Why) else why(value)).as_dict()
            _json(reasons, f"step {step} decision {name!r} why")
            data["why"] = reasons
        self._exe.append(Kind.DECISION, step, name, status=Status.RECORDED.value, fp=fp, data=data)
        return self._made(Decision(id=f"{self.run_id}/{step}", name=name, value=value, step=step))

    def _made(self, decision: Decision[Any]) -> Decision[Any]:
        if decision.name not in _NOT_REASONS and ":" not in decision.name:
            self._exe.last_decision = decision.id
        return decision

    def _decision_failed(self, step: int, name: str, fp: str, exc: Exception) -> StepFailed:
        info = error_info(exc)
        self._exe.append(Kind.DECISION, step, name, status=Status.FAILED.value, fp=fp, data={"error": info})
        return StepFailed(f"step {step} decision {name!r} raised {info['type']}: {exc}", info)

    async def _replayed_async(self, step: int, name: str, ev: Event) -> Decision[Any]:
        return self._replayed(step, name, ev)

    def _replayed(self, step: int, name: str, ev: Event) -> Decision[Any]:
        if ev.status == Status.FAILED.value:
            info = ev.data.get("error") or {}
            raise StepFailed(
                f"step {step} decision {name!r} raised {info.get('type')}: {info.get('message')}",
                info,
            )
        return self._made(
            Decision(id=f"{self.run_id}/{step}", name=name, value=ev.data.get("value"), step=step)
        )

    # -- durable waits ------------------------------------------------------------------------

    def sleep(self, seconds: float) -> None:
        """A durable timer: the deadline is journaled, so a crash or a stop does not lose it and
        it fires once. Waits of up to a couple of seconds happen in this process; longer ones
        suspend the run (no thread, socket or process held) until a worker resumes it when due."""
        due = self._due(seconds)
        if due is not None:
            step, left = due
            if left > 0:
                self._exe.sleep(left)
            self._fire(step)

    async def sleep_async(self, seconds: float) -> None:
        """`sleep` for async workflows: the in-process part of the wait does not block the loop."""
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
        if left > self._exe.inline_wait:
            raise Suspend(self.run_id, fire_at, f"a timer (step {step})")
        return step, left

    def _timer(self, seconds: float) -> tuple[int, float] | None:
        if seconds < 0:
            raise ValueError(f"ctx.sleep({seconds}): seconds must be >= 0")
        exe = self._exe
        step = exe.alloc()
        fp = _fingerprint({"seconds": seconds}, step, "sleep")
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
                self._exe.sleep(next(polls))
        except StopIteration as done:
            result: Signal | None = done.value
            return result

    async def wait_for_async(self, name: str, timeout: float | None = None) -> Signal | None:
        """`wait_for` for async workflows."""
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
            if waited >= self._exe.inline_wait:
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
        fp = _fingerprint({"name": name, "timeout": timeout}, step, label)
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
            return step, None, Signal(name, d.get("payload"), str(d.get("sender")), float(d["at"]))
        if last.status == "timeout":
            return step, None, None
        deadline = recs[0].data.get("deadline")
        return step, None if deadline is None else float(deadline), _PENDING

    def _take(self, step: int, name: str, deadline: float | None) -> Signal | _Pending | None:
        """The next unconsumed signal (journaled as consumed); None on timeout; else _PENDING."""
        exe = self._exe
        for inbox_id, sig_name, payload_text, sender, at in exe.store.inbox(exe.run_id):
            if sig_name != name or inbox_id in exe.consumed:
                continue
            if deadline is not None and at > deadline:
                continue  # arrived after the deadline: late, and it does nothing
            payload = json.loads(payload_text)
            exe.append(
                Kind.SIGNAL,
                step,
                f"signal:{name}",
                status="received",
                data={"inbox_id": inbox_id, "payload": payload, "sender": sender, "at": at},
            )
            exe.consumed.add(inbox_id)
            return Signal(name, payload, sender, at)
        if deadline is not None and exe.clock() >= deadline:
            exe.append(Kind.SIGNAL, step, f"signal:{name}", status="timeout", data={})
            return None
        return _PENDING

    def gate(
        self,
        action: str,
        *,
        decision: Decision[Any] | None = None,
        approvers: Sequence[str] | None = None,
        timeout: float = 8 * 3600,
        on_timeout: str = "decline",
        precondition: Callable[[], bool] | None = None,
        notify: Callable[[dict[str, Any]], None] | None = None,
    ) -> Verdict:
        """Park the run until a person approves or declines `action` (durable: days are fine).

        The verdict is addressed to this gate's id (`decision.id` if given, else the gate's own
        step id) and only an authenticated approver (`daybook approvers add`) named in
        `approvers` (None: any) can give it (`daybook approve|deny RUN GATE`). After an approval
        `precondition` is re-checked, as a recorded step, because the world moves while a run
        waits. `on_timeout`: "decline" returns a `timed_out` verdict; "escalate" stops the run in
        `needs_attention`. A verdict that arrives after the timeout is recorded as late and does
        nothing. `notify(gate)` (a dict with run_id, gate_id, action, approvers, timeout) is
        called once when the gate opens, to tell the approvers."""
        if on_timeout not in ("decline", "escalate"):
            raise ValueError("on_timeout must be 'decline' or 'escalate'")
        proposal = self.decide(
            f"gate:{action}",
            lambda: {
                "action": action,
                "approvers": list(approvers) if approvers else None,
                "timeout": timeout,
                "decision": decision.id if decision else None,
            },
        )
        gate_id = decision.id if decision else proposal.id
        if notify is not None:
            # Tell the approvers (Slack, email, pager) once: a recorded step, never repeated.
            info = {"run_id": self.run_id, "gate_id": gate_id, **proposal.value}
            self.decide(f"notify:{gate_id}", lambda: notify(info))
        signal = self.wait_for(f"verdict:{gate_id}", timeout=timeout)
        if signal is None:
            if on_timeout == "escalate":
                raise Stop(
                    NeedsAttention(
                        self.run_id,
                        f"run {self.run_id!r}: gate {gate_id!r} ({action}) got no verdict within "
                        f"{timeout}s and is configured to escalate; approve or deny it with "
                        f"`daybook approve|deny {self.run_id} {gate_id}` (a late verdict is "
                        "recorded but does not act), or cancel the run",
                    ),
                    True,
                    journal=True,
                )
            return Verdict(gate_id, "timed_out")
        payload = signal.payload or {}
        reason = str(payload.get("reason", ""))
        if payload.get("outcome") != "approve":
            return Verdict(gate_id, "declined", signal.sender, reason)
        if precondition is not None and not self.decide(f"precondition:{action}", precondition).value:
            return Verdict(gate_id, "stale", signal.sender, reason)
        return Verdict(gate_id, "approved", signal.sender, reason)

    def compensate(
        self,
        *,
        on_stuck: Callable[[Compensation], None] | None = None,
        propose: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None,
        validate: Callable[[dict[str, Any], dict[str, Any]], bool] | None = None,
        approvers: Sequence[str] | None = None,
        gate_timeout: float = 8 * 3600,
    ) -> Compensation:
        """Undo this run's confirmed effects, newest first, each with its tool's registered inverse
        under its own key `comp/<key>`, once (a kill mid-unwind resumes it without repeats).

        If an inverse fails after its retries, or an effect has no inverse, the rest are still
        unwound, `on_stuck(report)` fires (once: it is a recorded step) and the run stops as
        `stuck`, listing exactly what remains. It is never reported compensated when it is not.

        Where no inverse is registered, `propose(effect)` (e.g. a model; recorded) may suggest
        `{"tool": NAME, "args": {...}}`: it must name a registered tool that is not irreversible,
        pass `validate(effect, plan)` (recorded) and an approval gate like any forward act
        (`approvers`, `gate_timeout`); the effect itself must not be irreversible. Otherwise the
        effect stays listed as having no inverse."""
        exe = self._exe
        upto = exe.next_step
        events = exe.store.load(exe.run_id)
        effects: dict[int, dict[str, Any]] = {}
        for ev in events:
            if ev.step is None or ev.step >= upto or (ev.key or "").startswith("comp/"):
                continue
            if ev.kind == Kind.INTENT:
                effects[ev.step] = {"name": ev.name, "key": ev.key, "args": ev.data.get("args")}
            elif ev.kind == Kind.OUTCOME and ev.step in effects:
                effects[ev.step]["status"] = ev.status
                effects[ev.step]["result"] = ev.data.get("result")
        report = Compensation()
        for step in sorted(effects, reverse=True):
            eff = effects[step]
            if eff.get("status") != Status.CONFIRMED:
                continue
            tool = lookup_tool(eff["name"])
            if tool is None or tool.inverse is None:
                if self._proposed_undo(eff, tool, propose, validate, approvers, gate_timeout):
                    report.compensated.append(str(eff["key"]))
                else:
                    report.no_inverse.append(str(eff["key"]))
                continue
            try:
                self.effect(
                    tool.inverse, key=f"comp/{eff['key']}", original=eff["args"], result=eff["result"]
                )
                report.compensated.append(str(eff["key"]))
            except EffectFailed:
                report.stuck.append(str(eff["key"]))
        if report.complete:
            return report
        if on_stuck is not None:
            self.decide("on_stuck", lambda: on_stuck(report))
        raise Stop(
            RunStuck(
                self.run_id,
                f"run {self.run_id!r} is stuck: compensated {report.compensated or 'nothing'}; "
                f"inverse failed for {report.stuck or 'none'}; no inverse for "
                f"{report.no_inverse or 'none'}. Undo what remains by hand, record it with "
                "`daybook resolve`, and close the run",
            ),
            True,
            journal=True,
            status="stuck",
        )

    def barrier(self, *, runs: Sequence[str] | None = None, poll: float = 5.0) -> None:
        """Hold a closing step (post to the ledger, file the report) until no effect's outcome is
        open: unknown, in flight or awaiting a retry, in `runs` (default: every other run in the
        book; this run's own effects are settled before it gets here). Each check is a recorded
        step, and the wait between checks a durable timer, so replay passes the same way."""
        if poll <= 0:
            raise ValueError(f"ctx.barrier(poll={poll}): poll must be > 0 seconds")
        scope = None if runs is None else sorted(set(runs))
        while True:
            still: list[dict[str, Any]] = self.decide("barrier", self._open_unknowns, scope).value
            if not still:
                return
            log.warning(
                "run %s: barrier waits for %d open effect(s): %s",
                self.run_id,
                len(still),
                ", ".join(str(u["key"]) for u in still[:5]),
            )
            self.sleep(poll)

    def _open_unknowns(self, scope: list[str] | None) -> list[dict[str, Any]]:
        found = []
        for ev in self._exe.store.open_effects():
            if ev.run_id == self.run_id or (scope is not None and ev.run_id not in scope):
                continue
            found.append({"run_id": ev.run_id, "step": ev.step, "key": ev.key, "tool": ev.name})
        return found

    def handle_update(
        self, name: str, fn: Callable[[Any], Any], timeout: float | None = None
    ) -> tuple[Any, Any] | None:
        """Serve the next update `name` sent with `book.update(run_id, name, args)`: a request
        with an answer, applied once. Waits like `wait_for` (durably), computes `fn(args)` as a
        recorded step whose value is the answer the caller receives, and returns (args, answer);
        None if `timeout` passed first."""
        request = self.wait_for(f"update:{name}", timeout)
        if request is None:
            return None
        body = request.payload if isinstance(request.payload, dict) else {}
        args = body.get("args")
        answer = self.decide(f"answer:{body.get('id')}", lambda: fn(args)).value
        return args, answer

    def continue_as_new(self, *args: JSON, **kwargs: JSON) -> NoReturn:
        """End this run here and go on as a new run of the same workflow with this input, so
        history does not grow without bound: the new run (id `<run id>~2`, then `~3`, ...) starts
        with an empty journal, and resuming it reads only its own. Carry forward whatever state
        the next segment needs as its arguments."""
        check_json({"args": list(args), "kwargs": kwargs}, "continue_as_new input")
        raise ContinueAsNew(self.run_id, args, kwargs)

    def obligation(
        self,
        kind: str,
        *,
        owner: str,
        due_in: float,
        about: JSON = None,
        decision: Decision[Any] | None = None,
    ) -> str:
        """Record something this run owes (a refund promised, a quote that expires, an approval
        pending): open until `fulfil`/`cancel`, shown as `breached` by `daybook obligations` once
        `due_in` seconds have passed. It outlives a suspend of days, and the run itself. Returns
        its id (`<run id>/<step>`)."""
        exe = self._exe
        step = exe.alloc()
        label = f"obligation:{kind}"
        fp = _fingerprint({"kind": kind, "owner": owner, "due_in": due_in, "about": about}, step, label)
        recs = exe.expect(step, Kind.OBLIGATION, label, fp)
        if recs is None:
            exe.append(
                Kind.OBLIGATION,
                step,
                label,
                status="open",
                fp=fp,
                data={
                    "kind": kind,
                    "owner": owner,
                    "due": exe.clock() + due_in,
                    "about": about,
                    "decision": decision.id if decision else exe.last_decision,
                },
            )
        return f"{self.run_id}/{step}"

    def fulfil(self, obligation_id: str, note: str = "") -> None:
        """Mark an obligation fulfilled (a new row; the open one stays as history)."""
        self._settle(obligation_id, "fulfilled", note)

    def cancel(self, obligation_id: str, note: str = "") -> None:
        """Mark an obligation cancelled (nothing is owed any more)."""
        self._settle(obligation_id, "cancelled", note)

    def _settle(self, obligation_id: str, status: str, note: str) -> None:
        exe = self._exe
        step = exe.alloc()
        label = f"obligation:{status}"
        fp = _fingerprint({"id": obligation_id, "note": note}, step, label)
        if exe.expect(step, Kind.OBLIGATION, label, fp) is None:
            exe.append(
                Kind.OBLIGATION,
                step,
                label,
                status=status,
                fp=fp,
                data={"obligation": obligation_id, "note": note},
            )

    def entity(self, name: str) -> Entity:
        """The coordination entity `name` on this run's store. Its operations act on shared
        state now; make a claim or a record part of the run's history by wrapping it in a step:
        `ctx.decide("claim", lambda: ctx.entity(name).claim(agent, ttl)).value`."""
        return Entity(self._exe.store, name)

    def patched(self, name: str) -> bool:
        """A versioning marker: True where new code runs (a fresh execution, or a history that
        recorded the marker), False when replaying a history from before the marker, so old runs
        keep the path they took. Guard new behaviour with it; drop it once `daybook versions`
        shows no unfinished run without it."""
        exe = self._exe
        label = f"patch:{name}"
        ahead = exe.steps.get(exe.next_step)
        if ahead and ahead[0].kind == Kind.DECISION and ahead[0].name == label:
            return bool(self.decide(label, lambda: True).value)
        if exe.next_step <= exe.recorded_steps:
            return False  # a history from before the marker: keep the old path, use no step
        return bool(self.decide(label, lambda: True).value)

    def _proposed_undo(
        self,
        eff: dict[str, Any],
        tool: Tool[Any] | None,
        propose: Callable[[dict[str, Any]], dict[str, Any] | None] | None,
        validate: Callable[[dict[str, Any], dict[str, Any]], bool] | None,
        approvers: Sequence[str] | None,
        gate_timeout: float,
    ) -> bool:
        # A model must never improvise the undo of an irreversible act (a sent email, a wire).
        if propose is None or tool is None or tool.irreversible:
            return False
        effect = {k: eff.get(k) for k in ("name", "key", "args", "result")}
        plan = self.decide(f"propose_compensation:{eff['key']}", lambda: propose(effect)).value
        if not isinstance(plan, dict):
            return False
        undo = lookup_tool(str(plan.get("tool")))
        if undo is None or undo.irreversible:
            return False
        checker = validate
        if (
            checker is None
            or not self.decide(
                f"validate_compensation:{eff['key']}", lambda: bool(checker(effect, plan))
            ).value
        ):
            return False
        verdict = self.gate(f"compensate:{undo.name}", approvers=approvers, timeout=gate_timeout)
        if not verdict.approved:
            return False
        try:
            self.effect(undo, key=f"comp/{eff['key']}", **dict(plan.get("args") or {}))
        except EffectFailed:
            return False
        return True

    def now(self) -> float:
        """Wall-clock time (epoch seconds), recorded once so replay sees the same instant."""
        value: float = self.decide("now", time.time).value
        return value

    def random(self) -> float:
        value: float = self.decide("random", _random.random).value
        return value

    def uuid(self) -> str:
        value: str = self.decide("uuid", lambda: str(_uuid.uuid4())).value
        return value

    def llm(
        self, client: LLMClient, prompt: str, *, why: Why | None = None, **params: JSON
    ) -> Decision[dict[str, JSON]]:
        """One recorded model call: replay returns the recorded completion, never re-samples.
        The decision ledger gets the model id and tokens with `why`."""

        def call(prompt: str, **params: JSON) -> dict[str, JSON]:
            return client.complete(prompt, **params).as_dict()

        def reasons(reply: dict[str, JSON]) -> Why:
            tokens = int(reply.get("input_tokens") or 0) + int(reply.get("output_tokens") or 0)
            return dataclasses.replace(why or Why(), model=str(reply.get("model")), tokens=tokens)

        return self.decide("llm", call, prompt, why=reasons, **params)

    # -- effects ------------------------------------------------------------------------------

    @overload
    def effect(
        self,
        tool: Tool[Coroutine[Any, Any, T]],
        /,
        *,
        key: str | None = ...,
        decision: Decision[Any] | None = ...,
        **args: JSON,
    ) -> Awaitable[T]: ...

    @overload
    def effect(
        self,
        tool: Tool[T],
        /,
        *,
        key: str | None = ...,
        decision: Decision[Any] | None = ...,
        **args: JSON,
    ) -> T: ...

    def effect(
        self,
        tool: Tool[Any],
        /,
        *,
        key: str | None = None,
        decision: Decision[Any] | None = None,
        **args: JSON,
    ) -> Any:
        """Perform `tool(**args)` with an intent journaled before it and the outcome after.

        The key is `key` if given; else `<decision id>/<tool>/<i>` when derived from a decision;
        else `<run id>/<step>`. It never depends on the argument values.
        """
        if not isinstance(tool, Tool):
            raise TypeError(f"ctx.effect needs a @daybook.tool, got {tool!r}")
        exe = self._exe
        step = exe.alloc()
        named = key is not None
        if key is None and decision is not None:
            n = exe.per_decision.get(decision.id, 0)
            exe.per_decision[decision.id] = n + 1
            key = decision.key(tool.name, n)
        # Derived keys are unique by construction; only keys the code names itself are tracked,
        # so memory does not grow with the run (the store's unique index backs this up).
        key = key or f"{exe.run_id}/{step}"
        owner = exe.keys.setdefault(key, step) if named else step
        if owner != step:
            raise Stop(
                DuplicateKey(
                    f"run {exe.run_id!r}: steps {owner} and {step} were both given key {key!r}; "
                    "each effect needs its own key (use ctx.key(decision, kind, i))"
                ),
                True,
            )
        fp = _fingerprint(args, step, tool.name, step not in exe.steps)
        recs = exe.expect(step, Kind.INTENT, tool.name, fp)
        if recs is not None and recs[0].key != key:
            raise Stop(
                NonDeterminismError(
                    f"run {exe.run_id!r} step {step} {tool.name!r}: its key changed from "
                    f"{recs[0].key!r} to {key!r}; keys must name the decision, not its inputs"
                ),
                True,
            )
        if recs is not None:
            last = recs[-1]
            if last.kind == Kind.OUTCOME and last.status == Status.CONFIRMED:
                # The replay fast path: a settled effect is a dictionary lookup.
                result = last.data.get("result")
                return _ready(result) if tool.is_async else result
        # An effect links to exactly one decision recorded before its intent (J7): the one given,
        # else the latest made in this run.
        source = decision.id if decision is not None else exe.last_decision
        machine = _Effect(exe, step, tool, key, args, fp, source, recs).flow()
        if tool.is_async:
            return self._drive_async(machine, tool, key, args)
        return self._drive(machine, tool, key, args)

    def _drive(
        self, machine: Generator[_Op, _Reply, Any], tool: Tool[Any], key: str, args: dict[str, Any]
    ) -> Any:
        reply: _Reply = None
        while True:
            try:
                op, arg = machine.send(reply)
            except StopIteration as done:
                return done.value
            reply = None
            if op == "sleep":
                self._exe.sleep(arg)
                continue
            try:
                with strict.step():
                    if op == "call":
                        reply = ("ok", _call_with_timeout(lambda: tool.fn(**args, idempotency_key=key), arg))
                    else:
                        reply = ("ok", _ask(op, tool, key, args, arg))
            except Exception as exc:
                reply = ("err", exc)

    async def _drive_async(
        self, machine: Generator[_Op, _Reply, Any], tool: Tool[Any], key: str, args: dict[str, Any]
    ) -> Any:
        reply: _Reply = None
        while True:
            try:
                op, arg = machine.send(reply)
            except StopIteration as done:
                return done.value
            reply = None
            if op == "sleep":
                if not self._exe.read_only:
                    await asyncio.sleep(arg)
                continue
            try:
                with strict.step():
                    result = await self._call_async(op, arg, tool, key, args)
                reply = ("ok", result)
            except Exception as exc:
                reply = ("err", exc)

    @staticmethod
    async def _call_async(op: str, arg: Any, tool: Tool[Any], key: str, args: dict[str, Any]) -> Any:
        # `arg` is the call's timeout for "call", the stored reference for the resolver's questions.
        if op == "call":
            pending = tool.fn(**args, idempotency_key=key)
            return await (asyncio.wait_for(pending, arg) if arg else pending)
        answer: Any = _ask(op, tool, key, args, arg)
        if inspect.isawaitable(answer):
            answer = await answer
        return answer


def _ask(op: str, tool: Tool[Any], key: str, args: dict[str, Any], ref: Any) -> Any:
    """Put the resolver's question to the counterparty: by key, by looking, or by its reference."""
    if op == "status":
        assert tool.reconcile is not None
        return tool.reconcile(key, args)
    if op == "verify":
        assert tool.verify is not None
        return tool.verify(args)
    assert tool.lookup is not None
    return tool.lookup(ref)


async def _ready(value: T) -> T:
    return value
