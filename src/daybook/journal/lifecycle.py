"""An effect's lifecycle: the state machine from intent to a settled outcome.

One object per effect step. It is a generator of operations (`call`, `status`, `verify`,
`lookup`, `sleep`) so the sync and async drivers (`driver.py`) share it; every state is a small
method, and this table is every transition:

    start    no rows yet                    -> write intent                  -> call
             intent/attempt, no outcome     -> write unknown (crash window)  -> resolve
             last outcome confirmed         -> done (the recorded result)
             last outcome failed, final     -> raise EffectFailed
             last outcome failed, transient -> retry
             last outcome unknown           -> resend (a person said absent) | resolve
    call     the tool answers               -> write confirmed               -> done
             it refused, nothing doubtful   -> write failed (final)          -> raise EffectFailed
             it refused, may have landed    -> write unknown                 -> resolve
             transient (did not arrive)     -> write failed (not final)      -> retry
             timeout, dropped connection    -> write unknown (+ ref)         -> resolve
    retry,   past the dedup window          -> needs attention (DedupWindowExpired)
    resend   out of attempts                -> needs attention
             otherwise                      -> back off, write attempt       -> call
    resolve  ask status(key) | verify(args) | lookup(ref); idempotent, no question -> resend;
             no way to ask                  -> needs attention
             confirmed                      -> write confirmed (resolved_by) -> done
             absent                         -> resend (lookup: needs attention)
             pending, `poll` declared       -> write unknown (poll_at), durable timer, ask again
             pending, no `poll`             -> back off, ask again; out of rounds: needs attention

Past the dedup window the key proves nothing, so a question goes by the counterparty's own
reference (`lookup`) when one is known, and nothing is re-sent on a guess.

A confirmed outcome of a tool whose unknown settles itself (it has a status query, or is
idempotent: re-sent under the same key) is written with `defer`: the cursor may commit it with
the run's next row (`Execution.append`). Lost in a crash, it is the `start` row above: an
intent without an outcome, settled by that same status query or re-send (inside a transaction
too: its next row, a header change included, carries it). Never a failed outcome (a lost
failure could be re-sent and succeed).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from ..errors import (
    DaybookError,
    DedupWindowExpired,
    EffectFailed,
    NeedsAttention,
    NotSerializable,
    StepRetracted,
)
from ..records import JSON, Event, Kind, Status, check_json, is_plain
from ..store.secrets import SEALED, Secret, concealer_for, reveal_all, withheld
from . import keys, resolution
from .act import Act
from .execution import Execution, check_step_json, error_info
from .failure import classify, is_certain
from .stop import Stop, Suspend
from .tool import Confirmed, NotFound, StillUnknown, cost_of

log = logging.getLogger("daybook")

# What the machine asks its driver to do, and what it gets back: ("ok", value) | ("err", exc).
Op = tuple[str, Any]
Reply = tuple[str, Any] | None
Steps = Generator[Op, Reply, "str | Done"]


@dataclass(frozen=True)
class Done:
    """The effect is settled: `value` is what the tool returned (or the counterparty confirmed)."""

    value: Any


class EffectLifecycle:
    """The state machine of one effect step (see the module docstring for the transitions)."""

    # One per effect step, its fields set in `__init__`: slots, not a dict per step.
    __slots__ = (
        "args", "attempt", "decision", "defers", "doubtful", "exe", "fp", "intent_at", "key",
        "operator_absent", "poll_at", "recs", "ref", "step", "tool", "tx",
    )  # fmt: skip

    def __init__(
        self,
        exe: Execution,
        act: Act,
        fp: str,
        recs: list[Event] | None,
    ) -> None:
        self.exe = exe
        self.step = int(act.step or 0)
        self.tool = act.tool
        self.key = str(act.key)
        self.args = act.stored
        self.fp = fp
        self.decision = act.decision
        # Inside a transaction every row of the act names its attempt and epoch.
        self.tx = act.tx.data() if act.tx is not None else None
        self.recs = recs or []
        # Once any attempt's outcome was unknown, the act may have happened: from then on a
        # re-send must respect the dedup window and running out of attempts is a question for a
        # person, never a certain failure.
        self.doubtful = bool(recs) and any(
            e.kind == Kind.OUTCOME and e.status == Status.UNKNOWN for e in self.recs
        )
        # A person's `resolve --absent` is evidence: it overrides the attempt limit and the dedup
        # window, which exist to stop the runtime from guessing.
        self.operator_absent = False
        # The counterparty's own id for the act, once any answer carried one; and when the next
        # status round is due, if one was scheduled.
        self.ref: Any = (
            next((e.data["ref"] for e in reversed(self.recs) if "ref" in e.data), None) if recs else None
        )
        self.poll_at: float | None = None
        self.attempt = 1
        self.intent_at = 0.0
        # Whether a confirmed outcome may ride with the run's next row (the module docstring).
        self.defers = act.tool.reconcile is not None or act.tool.idempotent

    def flow(self, state: str | Done | None = None) -> Generator[Op, Reply, Any]:
        """Run the machine from wherever the journal left this effect (or from `state`, where
        `first` and `answered` left it) to a settled outcome."""
        if state is None:
            state = self._start()
        while not isinstance(state, Done):
            if state == "call":
                state = yield from self._call()
            elif state == "resolve":
                state = yield from self._resolve()
            else:  # retry | resend
                state = yield from self._again(state)
        return state.value

    # -- states -------------------------------------------------------------------------------

    def _start(self) -> str | Done:
        if not self.recs:
            ev = self._write(Kind.INTENT, 1, args=self.args, decision=self.decision)
            self.intent_at = ev.at
            return "call"
        self.intent_at = self.recs[0].at
        last = self.recs[-1]
        self.attempt = last.attempt
        if last.kind in (Kind.INTENT, Kind.ATTEMPT):
            # The crash window: an intent without an outcome may or may not have happened.
            self._write(
                Kind.OUTCOME,
                self.attempt,
                Status.UNKNOWN,
                reason="in flight when the process that sent it stopped",
            )
            self.doubtful = True
            return "resolve"
        return self._from_last(last)

    def _from_last(self, last: Event) -> str | Done:
        """Where a settled, failed or unknown last outcome row leaves the effect."""
        if last.status == Status.CONFIRMED:
            return Done(replayed_result(last))
        if last.status == Status.FAILED:
            if last.data.get("retracted") is not None:
                raise self._step_retracted(
                    int(last.data["retracted"]), str(last.data.get("by") or ""), last.data.get("error") or {}
                )
            if last.data.get("final", True):
                raise self._effect_failed(last.data.get("error") or {})
            return "retry"
        self.operator_absent = last.data.get("resolution") == "absent"
        if self.operator_absent:
            return "resend"
        if "poll_at" in last.data:
            self.poll_at = float(last.data["poll_at"])
        return "resolve"

    def _again(self, state: str) -> Steps:
        """retry | resend: send again under the same key, if the key still protects it."""
        retry = self.tool.retry
        if not self.operator_absent:
            window = self.tool.dedup_window
            age = self.exe.clock() - self.intent_at
            if self.doubtful and window is not None and age > window:
                raise self._attention("dedup window expired", self._window_error(window, age))
            if not retry.allows(self.attempt + 1):
                raise self._attention(f"all {self.attempt} attempts are used")
        yield ("sleep", retry.delay(self.attempt))
        self.attempt += 1
        self._write(Kind.ATTEMPT, self.attempt, reason=self._again_reason(state))
        self.operator_absent = False
        return "call"

    def _call(self) -> Steps:
        reply = yield ("call", self.tool.retry.timeout or 0.0)
        assert reply is not None
        return self.answered(reply)

    # -- the hot path: a fresh effect whose call the caller makes itself, no driver ------------

    def first(self) -> None:
        """A fresh effect's first move (`start` with no rows): its intent is written; the call
        comes next."""
        self.intent_at = self._write(Kind.INTENT, 1, args=self.args, decision=self.decision).at

    def answered(self, reply: tuple[str, Any]) -> str | Done:
        """What the call's reply (`("ok", value)` or `("err", exc)`) settles, or the state to
        go on from (`flow(state)`)."""
        tag, value = reply
        if tag == "ok":
            return self._confirmed(value)
        return self._refused(value)

    def _resolve(self) -> Steps:
        op = self._question()
        if op is None:
            return "resend"
        rounds = 0
        while True:
            # A person's resolution, sent while this process holds the run, settles it first
            # (before a suspension, and after an inline wait for the next round).
            told = self._told()
            if told is not None:
                return told
            yield from self._await_poll()
            told = self._told()
            if told is not None:
                return told
            reply = yield (op, self.ref)
            assert reply is not None
            settled = self._answered(op, *reply)
            if settled is not None:
                return settled
            if self.tool.poll is not None:
                self._schedule_poll(op, *reply)
                continue
            rounds += 1
            limit = self.tool.retry.reconcile_rounds
            if limit is not None and rounds >= limit:
                raise self._attention(f"the counterparty still could not say after {rounds} queries")
            yield ("sleep", self.tool.retry.delay(rounds))

    # -- what each state decides --------------------------------------------------------------

    def _confirmed(self, value: Any) -> Done:
        # The hot path: plain JSON holds no Secret, and the walk that found none checked it.
        plain = not self.tool.secret_result and is_plain(value)
        seal: dict[str, bool] = {}
        if plain:
            stored = value
        else:
            value, stored, seal = self._sealed(value)
        try:
            if not plain:
                check_json(stored, f"step {self.step} {self.tool.name!r} result")
            tool = self.tool
            # Nothing for the ledger (the hot path) needs no call to say so.
            books = (
                self._books(value if plain else reveal_all(value))
                if tool.reference is not None or tool.inverse is not None or tool.cost is not None
                else {}
            )
            self._write(
                Kind.OUTCOME,
                self.attempt,
                Status.CONFIRMED,
                result=stored,
                defer=self.defers,
                **seal,
                **books,
            )
        except NotSerializable as exc:
            raise self._unjournalable(exc) from None
        except Stop as stop:
            if isinstance(stop.error, NotSerializable):  # over the size limit, say
                raise self._unjournalable(stop.error) from None
            raise
        return Done(value)

    def _unjournalable(self, exc: NotSerializable) -> Stop:
        """The tool answered, but with a value the journal cannot hold: the act happened, so
        its outcome is recorded as unknown (with why), and the run is parked for a person."""
        self._write(
            Kind.OUTCOME,
            self.attempt,
            Status.UNKNOWN,
            reason=f"the tool answered with a value daybook cannot journal: {exc}",
        )
        return Stop(exc, True)

    def _refused(self, exc: BaseException) -> str:
        """The call raised: failed for certain, transient (did not arrive), or unknown."""
        if self.key in self.exe.retracted and not self.doubtful:
            raise self._retracted_call(exc)
        verdict = self._verdict(exc)
        if verdict == "failed":
            if not self.doubtful:
                raise self._failed(exc)
            # An earlier attempt may have landed: a refusal now proves nothing.
            self._write(
                Kind.OUTCOME,
                self.attempt,
                Status.UNKNOWN,
                error=error_info(exc),
                reason="refused, but an earlier attempt may have happened",
            )
            return "resolve"
        if verdict == "transient":
            if not self.tool.retry.allows(self.attempt + 1) and not self.doubtful:
                raise self._failed(exc)
            self._write(Kind.OUTCOME, self.attempt, Status.FAILED, error=error_info(exc), final=False)
            return "retry"
        carried = getattr(exc, "ref", None)
        if carried is not None:
            self.ref = carried
        self._write(
            Kind.OUTCOME,
            self.attempt,
            Status.UNKNOWN,
            error=error_info(exc),
            reason="the request may have reached the counterparty but no answer came",
            **self._ref(),
        )
        self.doubtful = True
        return "resolve"

    def _verdict(self, exc: BaseException) -> str:
        """How to read the exception: a tool that can ask the counterparty reads anything not
        declared certain as unknown, and asks, rather than guess that nothing happened."""
        tool = self.tool
        if is_certain(exc, tool.certain):
            return "failed"  # declared certain: whatever it wraps, the tool knows it did not happen
        verdict = classify(exc)
        if verdict == "failed" and (tool.reconcile or tool.verify):
            return "unknown"
        return verdict

    def _question(self) -> str | None:
        """Which question to put to the counterparty; None: no question, re-send (idempotent)."""
        tool = self.tool
        expired = self.doubtful and self._expired()
        if expired and tool.lookup is not None and self.ref is not None:
            return "lookup"  # past the window the key proves nothing: ask by its own id
        if tool.reconcile is not None:
            return "status"
        if tool.verify is not None:
            return "verify"
        if tool.lookup is not None and self.ref is not None:
            return "lookup"
        if tool.idempotent:
            return None
        raise self._attention(
            "the tool has no status query or verify hook to ask the counterparty and is "
            "not declared idempotent, so daybook will not send it again on a guess"
        )

    def _told(self) -> str | Done | None:
        """Apply a resolution waiting in the run's inbox (`resolution`): journal it as this
        effect's outcome row, naming the message so it is applied once, and go on from it."""
        found = resolution.waiting(self.exe, self.key)
        if found is None:
            return None
        self.exe.consumed.add(found.inbox_id)
        row = self._write(Kind.OUTCOME, self.attempt, found.status, **found.data, inbox_id=found.inbox_id)
        return self._from_last(row)

    def _await_poll(self) -> Generator[Op, Reply, None]:
        """Wait for a scheduled status round: in process if short, else suspend (durable)."""
        if self.poll_at is None:
            return
        left = self.poll_at - self.exe.clock()
        if left > self.exe.settings.inline_wait:
            # A durable timer: the next round's time is in the journal; the run holds no process
            # and a worker resumes it when due.
            raise Suspend(self.exe.run_id, self.poll_at, f"the counterparty's answer (step {self.step})")
        if left > 0:
            yield ("sleep", left)
        self.poll_at = None

    def _answered(self, op: str, tag: str, answer: Any) -> str | Done | None:
        """Settle on a confirmed or absent answer; None: still pending (or the query failed)."""
        if tag == "ok" and isinstance(answer, Confirmed):
            value, stored, seal = self._sealed(answer.result)
            check_step_json(stored, f"step {self.step} reconciled result")
            ref = answer.ref if answer.ref is not None else self.ref
            self._write(
                Kind.OUTCOME,
                self.attempt,
                Status.CONFIRMED,
                result=stored,
                resolved_by=op,
                defer=self.defers,
                **seal,
                **self._books(reveal_all(value), ref),
            )
            return Done(value)
        if tag == "ok" and isinstance(answer, NotFound):
            if op == "lookup":
                raise self._attention(
                    f"the counterparty has no record under its own reference {self.ref!r} "
                    "and the dedup window has passed, so a re-send is unprotected"
                )
            return "resend"
        if tag == "ok" and not isinstance(answer, StillUnknown):
            raise self._attention(
                f"{op} returned {answer!r}; expected Confirmed, Absent (NotFound) or Pending (StillUnknown)"
            )
        if isinstance(answer, StillUnknown) and answer.ref is not None:
            self.ref = answer.ref
        return None

    def _schedule_poll(self, op: str, tag: str, answer: Any) -> None:
        """Declared polling: unlimited rounds, each answer a row in the effect's status history,
        the wait between them a durable timer."""
        self.poll_at = self.exe.clock() + (self.tool.poll or 0.0)
        self._write(
            Kind.OUTCOME,
            self.attempt,
            Status.UNKNOWN,
            reason="the counterparty says pending"
            if tag == "ok"
            else f"the {op} query failed: {error_info(answer)['message']}",
            answer="pending" if tag == "ok" else "no answer",
            poll_at=self.poll_at,
            **self._ref(),
        )

    # -- helpers ------------------------------------------------------------------------------

    def _again_reason(self, state: str) -> str:
        if state == "retry":
            return "retry after a transient failure, same key"
        if self.operator_absent:
            why = "a person recorded that it never arrived"
        elif self.tool.reconcile:
            why = "the counterparty has no record of it"
        elif self.tool.verify:
            why = "verify found no trace of it"
        else:
            why = "the tool is idempotent"
        return "sent again under the same key: " + why

    def _ref(self) -> dict[str, Any]:
        return {"ref": self.ref} if self.ref is not None else {}

    def _expired(self) -> bool:
        window = self.tool.dedup_window
        return window is not None and self.exe.clock() - self.intent_at > window

    def _sealed(self, value: Any) -> tuple[Any, JSON, dict[str, bool]]:
        """A confirmed result as the workflow gets it (a `Secret` for a `secret_result` tool),
        as the journal keeps it (secrets as digests), and the row's mark when it holds one."""
        if self.tool.secret_result and not isinstance(value, Secret):
            value = Secret(value)
        stored, hidden = self.exe.cover().conceal(value)
        return value, stored, ({SEALED: True} if hidden else {})

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
            books["compensation"] = {"tool": self.tool.inverse.name, "key": keys.compensation_key(self.key)}
        if self.tool.cost is not None:
            # The fee or quota the act spent, kept with its outcome (the with-cost class: an
            # undo does not give it back).
            try:
                books["cost"] = cost_of(self.tool.cost, self.args, result)
            except Exception as exc:
                books["cost"] = {"unknown": f"cost= raised {type(exc).__name__}: {exc}"}
        return books

    def _write(
        self, kind: Kind, attempt: int, status: Status | None = None, defer: bool = False, **data: Any
    ) -> Event:
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
                concealer_for(self.exe.store).scrub(data.get("reason") or data.get("error", "")),
            )
        # The row's columns positionally (the hot path); `_value_`: `.value` is a slower property.
        return self.exe.append(
            kind,
            self.step,
            self.tool.name,
            self.key,
            status._value_ if status else None,
            attempt,
            self.fp,
            data if self.tx is None else {**data, "tx": self.tx},
            defer=defer,
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

    def _failed(self, exc: BaseException) -> EffectFailed:
        info = error_info(exc)
        self._write(Kind.OUTCOME, self.attempt, Status.FAILED, error=info, final=True)
        return self._effect_failed(info)

    def _retracted_call(self, exc: BaseException) -> StepRetracted:
        """The call raised after a retraction asked it to stop: it applied nothing, it is
        final (never retried), and the row says which retraction stopped it."""
        inbox_id, who = self.exe.retracted[self.key]
        info = error_info(exc)
        self._write(
            Kind.OUTCOME, self.attempt, Status.FAILED, error=info, final=True, retracted=inbox_id, by=who
        )
        return self._step_retracted(inbox_id, who, info)

    def _step_retracted(self, inbox_id: int, who: str, info: dict[str, str]) -> StepRetracted:
        info = concealer_for(self.exe.store).scrub(info)
        return StepRetracted(
            f"step {self.step} {self.tool.name!r} (key {self.key!r}) was cancelled while it ran "
            f"by retraction {inbox_id} from {who or 'someone'}; it applied nothing and is not "
            "retried",
            info,
        )

    def _effect_failed(self, info: dict[str, str]) -> EffectFailed:
        # The error goes up to the caller (and its logs): a secret the tool quoted stays out.
        info = concealer_for(self.exe.store).scrub(info)
        return EffectFailed(
            f"step {self.step} {self.tool.name!r} (key {self.key!r}) failed: "
            f"{info.get('type')}: {info.get('message')}",
            info,
        )

    def _window_error(self, window: float, age: float) -> DedupWindowExpired:
        rid = self.exe.run_id
        return DedupWindowExpired(
            rid,
            f"run {rid!r} step {self.step} {self.tool.name!r} (key {self.key!r}): a "
            f"re-send is needed, but the counterparty forgets keys after {window:g}s and the "
            f"intent is {age:.1f}s old, so the key no longer protects a re-send. Ask the "
            f"counterparty by its reference, then `daybook resolve {rid} {self.step} "
            "--confirmed JSON | --failed MESSAGE | --absent` and resume",
        )


def replayed_result(ev: Event) -> Any:
    """A confirmed outcome's result as replay returns it: secrets in it come back withheld (the
    journal holds their digests only)."""
    result = ev.data.get("result")
    return withheld(result) if ev.data.get(SEALED) else result
