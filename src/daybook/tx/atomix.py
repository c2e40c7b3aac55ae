"""`ctx.transaction(scopes=..., retries=...)`: Atomix transactions, durable and across processes.

One attempt of a transaction is journaled as decision rows of the run (names hold a colon, so
they are bookkeeping, never an effect's "why"), each written in one database transaction with
the store's header row for the attempt (`daybook_transactions`), so the frontier the header
implies never disagrees with the journal:

    tx:begin   {tx_id, scopes, retries, attempt} + epoch    header: open (a fresh epoch)
    tx:stage   {tx_id, tool, key, treatment, epoch, attempt}   a buffered or held call
               + args (concealed)
    ...        the body's own steps (decisions, effects run now)
    tx:commit  {tx_id, status: committing}                  header: committing (decided)
    ...        the staged calls, flushed as ordinary effects under their keys
    tx:end     {tx_id, status: committed}                   header: committed (frontier moves)
 or
    tx:abort   {tx_id, status: aborting, error}             header: aborting
    ...        inverses of the calls that ran now, newest first, under `comp/<key>`
    tx:end     {tx_id, status: aborted | stuck, retry}      header: aborted | stuck

Isolation: blocking. `tx:begin` waits until no transaction with a smaller epoch on an
overlapping scope is open, so the body (its reads included) runs only once every earlier
conflicting transaction has ended: conflicting transactions are serialized in epoch order,
disjoint ones run in parallel. Once the rule holds it holds for good (frontier.py), so it is
checked again before `tx:commit` only by an execution that did not see it hold at `tx:begin`.
A transaction with nothing staged writes `tx:commit` and `tx:end` in one database transaction,
one with nothing to undo `tx:abort` and `tx:end` (both rows or neither: a crash leaves it open,
hence abandoned, as one before its decision does).

Held rows (`Execution.append(defer=)`): a `tx:stage` row is held for the run's next row, and so
is the confirmed outcome of a call (run now, flushed or undone) whose tool settles its own
unknown. A header change writes the held rows first, in a commit of their own, so the body's
rows are durable before the decision and the last outcome before the end. Lost in a crash, a
stage row leaves an undecided attempt that never ran the call (abandoned: aborted and retried),
an outcome an intent without one (settled as any unknown).

Replay reproduces every decision: a resumed run re-enters the block, finds its rows, and goes on
from where the journal ends (a decided commit is flushed to the end, a decided abort is unwound
to the end). An attempt that ended in an abort with a retry is skipped by replay, and the next
attempt runs under a fresh epoch (`Rerun`: a `with` block cannot run its body twice, so the
runtime replays the workflow up to it).

An attempt still open (no `tx:commit`, no `tx:abort`) where the journal ends was abandoned: its
process died or lost its lease mid-body. Whoever takes the run over aborts it (`Transaction-
Abandoned`): the body replays up to the journal's end (an act in flight is reconciled as any
unknown, so its outcome is known), and at its first live step it aborts like any exception:
staged calls dropped, calls that ran undone newest first, held calls never released, the
abort journaled, the frontier released, then a fresh epoch while `retries` last. A run that
stopped on purpose inside the block (suspended at a gate or a long wait, paused, parked) is
not abandoned: it journals `tx_left` on the way out and its next execution goes on with it
(so does a wait for the frontier past its spin: the run suspends with the attempt open).
The takeover's abort replays like any: the body is cut again at the step where the abort was
journaled, and the unwind goes on from where a kill left it. An attempt released outside the
run (an operator, or the run ended: store/tx_release.py) is aborted the same way by the run's
next execution, its rows journaled without the header (already `aborted`).
Speculation branches are not aborted this way: a replay settles them as it always did.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Generator, Sequence
from typing import Any

from ..errors import (
    ConfigError,
    EffectFailed,
    FrontierTimeout,
    ReleaseDeclined,
    RunStuck,
    ScopeViolation,
    TransactionAbandoned,
)
from ..journal import keys
from ..journal.act import Act, TxMark, act_of
from ..journal.execution import Execution, error_info, step_fingerprint
from ..journal.stop import Pause, Rerun, Stop, Suspend
from ..journal.tool import Tool, gate_terms
from ..records import Event, Kind, Status
from ..store.tx_rows import OPEN
from .frontier import RESUMED_SPIN, blockers, wait_until_clear
from .scope import Scope, for_call, outside

BEGIN, STAGE, COMMIT, ABORT, END = "tx:begin", "tx:stage", "tx:commit", "tx:abort", "tx:end"
LEFT = "tx:left"  # the name of a `tx_left` row
# How long a transaction waits for its frontier by default (`wait=`), across suspensions,
# counted from when it took its epoch; then FrontierTimeout.
DEFAULT_WAIT = 600.0

# What a call inside a transaction is (buffered, held, or run now) is its effect class's
# (`Tool.effect.in_transaction`, journal/effect_class.py): adapters declare it on their tools.


# The effect path under the transaction layer: (tool, key, decision, live args, the attempt).
Raw = Callable[[Tool[Any], str | None, Any, dict[str, Any], TxMark | None], Any]


class EpochTransaction:
    """One `ctx.transaction(...)` block: use as `with` or `async with`. After the block,
    `epoch` is the committed attempt's epoch, `attempt` its number (1 = first) and `results`
    maps each buffered or held call's key to what its tool returned at the flush."""

    def __init__(
        self,
        exe: Execution,
        raw: Raw,
        scopes: tuple[Scope, ...],
        retries: int,
        wait: float | None,
        group: str | None = None,
        gate: bool | Sequence[str] = False,
        gate_fn: Callable[..., Any] | None = None,
    ) -> None:
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ConfigError(f"ctx.transaction(retries={retries!r}): use an int >= 0")
        if wait is not None and (
            isinstance(wait, bool) or not isinstance(wait, int | float) or not 0 <= wait < float("inf")
        ):
            raise ConfigError(
                f"ctx.transaction(wait={wait!r}): use seconds >= 0 (default {DEFAULT_WAIT:g}), or None "
                "for no limit"
            )
        self._exe = exe
        self._raw = raw
        self.scopes = scopes
        self.retries = retries
        self.wait = wait
        # A speculation's branches: ids share this prefix and do not block each other.
        self.group = group
        # The release policy for held irreversible calls: False (released at commit), True (an
        # approval gate, any approver) or the approvers' names; `gate_fn` is ctx.gate.
        self.gate = gate
        self._gate = gate_fn
        self.tx_id = ""
        self.epoch = 0
        self.attempt = 0
        self.status = "new"
        self.results: dict[str, Any] = {}
        self._staged: list[Act] = []
        self._done: list[Act] = []
        # The journal shows this attempt abandoned by a dead owner: it aborts, never commits.
        self._abandoned = False
        # The header was released (it ended outside this run's journal): rows without it.
        self._freed = False
        self._begun_at = 0.0  # when the attempt took its epoch: its wait= counts from there
        # This execution saw the commit rule hold (it holds for good from then on).
        self._clear = False

    def rebind(self, exe: Execution, raw: Raw) -> None:
        """Go on over another cursor (and its context's raw effect): a speculation's branch cut at
        its deadline aborts on a cursor of its own."""
        self._exe = exe
        self._raw = raw

    # -- entering -------------------------------------------------------------------------------

    def begin(self) -> None:
        """Open the next attempt (skipping attempts the journal shows aborted with a retry),
        then wait until no earlier transaction on an overlapping scope is open."""
        exe = self._exe
        attempt = 1
        while True:
            step = exe.alloc()
            value = {"scopes": [s.text for s in self.scopes], "retries": self.retries, "attempt": attempt}
            fp = step_fingerprint(value, step, BEGIN)
            recs = exe.expect(step, Kind.DECISION, BEGIN, fp)
            ev = recs[0] if recs is not None else self._open(step, fp, value)
            self.tx_id, self.epoch, self.attempt = ev.data["value"]["tx_id"], int(ev.data["epoch"]), attempt
            # The open headers below the epoch, as the begin's own database transaction saw them.
            seen = exe.store.tx_seen(self.tx_id) if recs is None else None
            self._begun_at = ev.at
            end = self._recorded(END)
            if end is None or not end[1].get("retry"):
                break
            exe.skip_through(end[0])
            attempt += 1
        self.status = "open"
        if recs is not None:
            self._note_abandoned(end is None)
        # The commit rule held when the epoch was drawn (the store read every smaller open epoch
        # in that database transaction), and once it holds it holds for good: no look.
        clear = seen is not None and not blockers(
            exe.store, self.scopes, self.epoch, self.tx_id, self.group, seen
        )
        if clear:
            self._clear = True
            return
        self._wait(end)

    def _note_abandoned(self, undecided: bool) -> None:
        """A replayed attempt that was abandoned aborts where it was aborted: at its first live
        step if it is still undecided (its owner died), or at the very step where a takeover
        journaled its abort (which may have been cut by a kill mid-unwind), so the replay reaches
        the same abort and finishes its unwind instead of asking the journal for a body step."""
        exe = self._exe
        self._freed = self._released()
        aborted = self._recorded(ABORT)
        if aborted is not None and (aborted[1].get("error") or {}).get("type") == "TransactionAbandoned":
            self._abandoned = True
            exe.at_live(self._abandon, aborted[0])
        elif undecided and (self._freed or self._orphaned()):
            self._abandoned = True
            exe.at_live(self._abandon)

    def _released(self) -> bool:
        """The header ended while the journal does not say so: the attempt was released (an
        operator, or its run ended; store/tx_release.py). Its rows are then journaled without
        the header, which stays `aborted`."""
        exe = self._exe
        if exe.read_only or self.group is not None or self._recorded(END) is not None:
            return False
        rows = [r for r in exe.store.tx_rows(run_id=exe.run_id) if r[0] == self.tx_id]
        return bool(rows) and rows[0][4] not in OPEN

    def _orphaned(self) -> bool:
        """This replayed attempt was left undecided by an execution that did not stop on purpose
        (no `tx_left` row ends the journal): its owner died or lost its lease."""
        exe = self._exe
        if exe.read_only or self.group is not None or exe.left_tx == self.tx_id:
            return False
        return self._recorded(COMMIT) is None and self._recorded(ABORT) is None

    def _abandon(self) -> None:
        """The first live step of an abandoned attempt: abort it there (`Execution.at_live`)."""
        raise self._abandon_error()

    def _abandon_error(self) -> TransactionAbandoned:
        if self._freed:
            return TransactionAbandoned(
                f"transaction {self.tx_id} (epoch {self.epoch}, attempt {self.attempt}) was released "
                f"(`daybook tx release`, or run {self._exe.run_id!r} ended) while it was open; it "
                "is aborted and compensated here, then retried under a fresh epoch while its "
                "retries last"
            )
        return TransactionAbandoned(
            f"transaction {self.tx_id} (epoch {self.epoch}, attempt {self.attempt}) was left open "
            f"by a process that stopped without deciding it (killed, or its lease lapsed); run "
            f"{self._exe.run_id!r} was taken over, and the transaction is aborted and compensated "
            "here, then retried under a fresh epoch while its retries last"
        )

    def _leave(self, stop: BaseException) -> None:
        """The run stops on purpose with this attempt open (a suspension, a pause, a parked
        step): journal `tx_left`, so its next execution goes on with it instead of aborting it.
        A lease loss or a store failure journals nothing: the next owner aborts the attempt."""
        exe = self._exe
        on_purpose = isinstance(stop, Suspend | Pause) or (isinstance(stop, Stop) and stop.attention)
        if not on_purpose or self._abandoned or exe.read_only or self.group is not None:
            return
        if self.status not in ("open", "committing", "aborting"):
            return
        try:
            exe.append(Kind.TX_LEFT, None, LEFT, data={"tx_id": self.tx_id})
        except BaseException:
            # Not written (the store failed as the run stopped): the run's next execution then
            # aborts the attempt as abandoned, which is always safe; the stop itself goes on.
            return

    def _wait(self, end: tuple[int, dict[str, Any]] | None) -> None:
        """Wait for the commit rule before the body, unless the journal settled it: a decided
        attempt replays without waiting, and one that timed out waiting times out again."""
        if self._recorded(COMMIT) is not None or self._recorded(ABORT) is not None or self._abandoned:
            return  # decided, or to be aborted at its first live step: nothing to wait for
        if end is not None:  # ended before its body: it gave up waiting
            recorded = self._mark(END, "aborted")
            raise FrontierTimeout(
                str((recorded.get("error") or {}).get("message", "frontier wait timed out"))
            )
        until = None if self.wait is None else self._begun_at + self.wait
        exe = self._exe
        spin = None  # the execution's own (`RunSettings.frontier_spin`)
        if exe.left_tx == self.tx_id and exe.settings.frontier_spin is not None:
            spin = min(exe.settings.frontier_spin, RESUMED_SPIN)  # resumed after a suspension: look briefly
        try:
            wait_until_clear(exe, self.scopes, self.epoch, self.tx_id, until, self.group, spin)
            self._clear = True
        except FrontierTimeout as exc:
            self._mark(END, "aborted", retry=False, error=error_info(exc))
            raise
        except Stop as stop:
            self._leave(stop)  # a wait past the spin suspends the run with the attempt open
            raise

    def _open(self, step: int, fp: str, value: dict[str, Any]) -> Event:
        exe = self._exe
        tx_id = f"{self.group or f'{exe.run_id}/tx/'}{step}"
        scopes = json.dumps(value["scopes"])

        def write(ev: Event) -> int:
            store = exe.store
            attempt, retries, group = value["attempt"], self.retries, self.group or ""
            return store.tx_begin(tx_id, exe.run_id, scopes, attempt, retries, ev, ev.at, group)

        data = {"value": {"tx_id": tx_id, **value}}
        return exe.append(
            Kind.DECISION, step, BEGIN, status=Status.RECORDED.value, fp=fp, data=data, write=write
        )

    def _recorded(self, name: str) -> tuple[int, dict[str, Any]] | None:
        """The step and value of this attempt's `name` row, if the journal still holds it."""
        for step, recs in self._exe.steps.items():
            first = recs[0]
            if first.kind == Kind.DECISION and first.name == name:
                value = first.data.get("value") or {}
                if value.get("tx_id") == self.tx_id:
                    return step, value
        return None

    def _mark(self, name: str, status: str, **extra: Any) -> dict[str, Any]:
        """Journal a state change of this attempt with its header change, or replay it."""
        exe = self._exe
        step = exe.alloc()
        fp = step_fingerprint({"tx_id": self.tx_id, "status": status}, step, name)
        recs = exe.expect(step, Kind.DECISION, name, fp)
        self.status = status
        if recs is not None:
            recorded: dict[str, Any] = recs[0].data.get("value") or {}
            return recorded
        value = {"tx_id": self.tx_id, "status": status, **extra}
        tx_id = self.tx_id

        def write(ev: Event) -> None:
            if not exe.store.tx_mark(tx_id, status, ev, ev.at):
                raise ConfigError(
                    f"transaction {tx_id} has already ended (another process settled it); "
                    f"this run cannot record it as {status}. Check `daybook tx {exe.run_id}`"
                )

        exe.append(
            Kind.DECISION,
            step,
            name,
            status=Status.RECORDED.value,
            fp=fp,
            data={"value": value},
            write=None if self._freed else write,
        )
        return value

    # -- the body's calls -----------------------------------------------------------------------

    def call(self, tool: Tool[Any], key: str | None, decision: Any, args: dict[str, Any]) -> Any:
        """A tool call inside the body: checked against the scopes, then staged, held or run."""
        used = for_call(tool.scopes, args, tool.name)
        bad = outside(self.scopes, used)
        if bad:
            raise ScopeViolation(
                f"transaction {self.tx_id}: {tool.name} would touch {[s.text for s in bad]}, outside "
                f"the declared scopes {[s.text for s in self.scopes]}; it was not run. Declare "
                "the scope in ctx.transaction(scopes=...) or call it outside the transaction"
            )
        if key is not None:
            key = keys.attempt_key(key, self.attempt)  # each attempt's acts are new acts
        how = tool.effect.in_transaction
        if how == "now":
            self._done.append(Act(tool, key, {}, args, step=self._exe.next_step, tx=self.mark))
            return self._raw(tool, key, decision, args, self.mark)
        return self._stage(tool, key, args, how)

    @property
    def mark(self) -> TxMark:
        """This attempt, as every row of an act inside it names it."""
        return TxMark(self.tx_id, self.epoch, self.attempt)

    def _stage(self, tool: Tool[Any], key: str | None, args: dict[str, Any], how: str) -> Any:
        exe = self._exe
        step = exe.alloc()
        # Concealed as ctx.effect conceals its intent: the staged row never holds a secret.
        act = act_of(exe, tool, key or keys.step_key(exe.run_id, step), args, step=step, tx=self.mark)
        fp = step_fingerprint({"tool": tool.name, "key": act.key, "args": act.stored}, step, STAGE)
        if exe.expect(step, Kind.DECISION, STAGE, fp) is None:
            value = {**self.mark.data(), "tool": tool.name, "key": act.key, "treatment": how}
            data = {"value": value, "args": act.stored}
            # Held for the run's next row (`Execution.append(defer=)`): lost in a crash, it is an
            # undecided attempt that never ran the call, which the run's takeover aborts.
            recorded = Status.RECORDED.value
            exe.append(Kind.DECISION, step, STAGE, status=recorded, fp=fp, data=data, defer=True)
        self._staged.append(act)
        if tool.is_async:
            return _ready(None)
        return None

    # -- leaving --------------------------------------------------------------------------------

    def end(self, exc: BaseException | None) -> Generator[Any, Any, bool]:
        """Commit, or abort (then retry, give up, or report stuck). Yields each flush or inverse
        call's return value (an awaitable for an async tool) and is sent its result."""
        self._exe.drop_live(self._abandon)  # the block ends here, whatever it ran live
        raised = exc
        if self._abandoned and exc is None:
            exc = self._abandon_error()  # the body replayed to its end: nothing live yet, abort
        try:
            if exc is None:
                yield from self._commit()
            elif isinstance(exc, Exception):
                yield from self._abort(exc)
                if raised is None:
                    raise exc  # no retry left: the block must not end as if it committed
            else:
                self._leave(exc)  # a Stop leaves the attempt open (on purpose: journaled)
        except Stop as stop:
            self._leave(stop)
            raise
        return False

    def _approved(self) -> Generator[Any, Any, None]:
        """The release policy: with `gate` set, every held irreversible call passes an approval
        gate before the commit decision (recorded steps, replayed like any); a call not approved
        aborts the transaction (no retry) and raises ReleaseDeclined."""
        if self.gate is False or self._gate is None:
            return
        approvers = None if self.gate is True else list(self.gate)
        for c in self._staged:
            if not c.tool.effect.held:
                continue
            about = {"tool": c.tool.name, "key": c.key, "args": c.stored, "tx_id": self.tx_id}
            terms = gate_terms(c.tool, c.live)
            verdict = self._gate(f"tx:release:{c.tool.name}", approvers=approvers, about=about, **terms)
            if not verdict.approved:
                declined = ReleaseDeclined(
                    f"transaction {self.tx_id}: the release of {c.tool.name} (key {c.key}) was "
                    f"{verdict.outcome} at gate {verdict.gate_id}; the transaction was aborted"
                )
                yield from self._abort(declined)
                raise declined

    def _commit(self) -> Generator[Any, Any, None]:
        yield from self._approved()
        if not self._clear and self._recorded(COMMIT) is None and self._recorded(END) is None:
            wait_until_clear(self._exe, self.scopes, self.epoch, self.tx_id, None, self.group)
        if not self._staged and not self._freed:
            self._decided(COMMIT, "committing", {}, "committed", {})
            return
        self._mark(COMMIT, "committing")
        try:
            for c in self._staged:
                self.results[str(c.key)] = yield self._raw(c.tool, c.key, None, c.live, self.mark)
        except Exception as exc:
            self._mark(END, "stuck", retry=False, error=error_info(exc))
            raise self._stuck(
                f"the flush of a committed transaction failed ({exc}); what was flushed before it stays"
            ) from exc
        self._mark(END, "committed")

    def _decided(
        self, name: str, status: str, extra: dict[str, Any], final: str, tail: dict[str, Any]
    ) -> None:
        """Decide an attempt with nothing to run between its decision and its end (nothing staged
        to flush, nothing done to undo): the decision row (`name`, `status`) and the end row
        (`final`) in one write, the same two rows at the same steps as when something runs
        between them; or replayed."""
        exe = self._exe
        step = exe.alloc()
        fp = step_fingerprint({"tx_id": self.tx_id, "status": status}, step, name)
        self.status = status
        if exe.expect(step, Kind.DECISION, name, fp) is not None:
            self._mark(END, final, **tail)  # recorded alone (by an older daybook): the end may be too
            return
        # Both steps taken before anything is held, so nothing (a pause asked at a step
        # boundary) can stop the run between the two rows.
        end = exe.alloc()
        end_fp = step_fingerprint({"tx_id": self.tx_id, "status": final}, end, END)
        self.status = final
        if exe.expect(end, Kind.DECISION, END, end_fp) is not None:
            return  # pragma: no cover - an end is never journaled without its decision
        tx_id = self.tx_id
        held: list[Event] = []

        def write(ev: Event) -> None:
            if not exe.store.tx_mark(tx_id, final, ev, ev.at, held[0]):
                raise ConfigError(
                    f"transaction {tx_id} has already ended (another process settled it); "
                    f"this run cannot record it as {final}. Check `daybook tx {exe.run_id}`"
                )

        # The decision row is held, not written: it goes with the end row, in the next seq
        # (nothing else writes to the run's journal in between: the run's own thread, or a
        # speculation settling after its branches stopped).
        recorded = Status.RECORDED.value
        data = {"value": {"tx_id": tx_id, "status": status, **extra}}
        exe.append(Kind.DECISION, step, name, status=recorded, fp=fp, data=data, write=held.append)
        data = {"value": {"tx_id": tx_id, "status": final, **tail}}
        exe.append(Kind.DECISION, end, END, status=recorded, fp=end_fp, data=data, write=write)

    def _abort(self, exc: Exception) -> Generator[Any, Any, None]:
        # A refused scope, a bad configuration or a declined release would fail again: no retry.
        final = isinstance(exc, ScopeViolation | ConfigError | ReleaseDeclined)
        if not self._done and not self._freed:
            retry = self.attempt <= self.retries and not final
            tail = {"retry": retry, "stuck": []}
            self._decided(ABORT, "aborting", {"error": error_info(exc)}, "aborted", tail)
            if retry:
                raise Rerun()
            return
        self._mark(ABORT, "aborting", error=error_info(exc))
        stuck: list[str] = []
        if self._done:
            settled = _settled(self._exe)
            for c in reversed(self._done):
                problem = yield from self._undo(c, settled.get(c.step or 0))  # set when it ran now
                if problem:
                    stuck.append(problem)
        retry = not stuck and self.attempt <= self.retries and not final
        self._mark(END, "stuck" if stuck else "aborted", retry=retry, stuck=stuck)
        if stuck:
            raise self._stuck(f"its abort could not undo: {stuck}")
        if retry:
            raise Rerun()

    def _undo(self, c: Act, effect: dict[str, Any] | None) -> Generator[Any, Any, str | None]:
        """Run the inverse of one call that ran now (up to its inverse's retries, 3 by default);
        None when it is undone or there was nothing to undo, else what remains."""
        if effect is None or effect["status"] == Status.FAILED:
            return None  # it never happened (or its intent was never written)
        key = str(effect["key"])
        if effect["status"] != Status.CONFIRMED:
            return f"{key} ({c.tool.name}: outcome {effect['status']})"
        undo = c.tool.inverse
        if c.tool.effect.on_rollback != "undo" or not undo:
            return f"{key} ({c.tool.name}: no inverse)"
        try:
            args = {"original": effect["args"], "result": effect["result"]}
            yield self._raw(undo, keys.compensation_key(key), None, args, self.mark)
        except EffectFailed as exc:
            return f"{key} ({c.tool.name}: inverse failed: {exc})"
        return None

    def _stuck(self, what: str) -> Stop:
        run_id = self._exe.run_id
        return Stop(
            RunStuck(
                run_id,
                f"run {run_id!r} is stuck: transaction {self.tx_id} (epoch {self.epoch}) {what}. "
                "Undo what remains by hand, record it with `daybook resolve`, and close the run",
            ),
            True,
            journal=True,
            status="stuck",
        )


def _settled(exe: Execution) -> dict[int, dict[str, Any]]:
    """This run's effects by step: key, args, latest status and result (from the store)."""
    effects: dict[int, dict[str, Any]] = {}
    for ev in exe.store.load(exe.run_id):
        if ev.step is None:
            continue
        if ev.kind == Kind.INTENT:
            effects[ev.step] = {"key": ev.key, "args": ev.data.get("args"), "status": None, "result": None}
        elif ev.kind == Kind.OUTCOME and ev.step in effects:
            effects[ev.step].update(status=ev.status, result=ev.data.get("result"))
    return effects


async def _ready(value: Any) -> Any:
    return value


def drive_sync(gen: Generator[Any, Any, bool]) -> bool:
    """Run `end()` for a `with` block: every yielded call must be synchronous."""
    try:
        value = next(gen)
        while True:
            if inspect.isawaitable(value):
                _close(value)
                raise ConfigError(
                    "an async tool was staged in a `with ctx.transaction(...)` block; use "
                    "`async with ctx.transaction(...)` in an async workflow"
                )
            value = gen.send(value)
    except StopIteration as stop:
        return bool(stop.value)


async def drive_async(gen: Generator[Any, Any, bool]) -> bool:
    """Run `end()` for an `async with` block, awaiting each async call."""
    try:
        value = next(gen)
        while True:
            if inspect.isawaitable(value):
                try:
                    value = await value
                except Exception as exc:
                    value = gen.throw(exc)
                    continue
            value = gen.send(value)
    except StopIteration as stop:
        return bool(stop.value)


def _close(value: Awaitable[Any]) -> None:
    close = getattr(value, "close", None)
    if close is not None:
        close()


__all__ = ["EpochTransaction", "drive_async", "drive_sync"]
