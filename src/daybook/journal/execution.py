"""The execution cursor: one process's execution of one run over its loaded journal.

It owns the recorded steps not yet replayed, the next step and sequence numbers, and the single
write path into the journal (`append`), which turns every store failure into a `Stop` the
runtime understands. Step arguments are fingerprinted here so replay can tell a changed call.

Deferred outcomes (one fsync per effect step, `RunSettings.defer_outcomes`): a confirmed outcome
whose tool settles its own unknown (a status query, an idempotent re-send) may be held back
(`append(defer=True)`) and committed with the run's next row (`store.append_batch`). The held
rows are the journal's tail: every later row carries them (the run's end row too), and any other
use of `exe.store` and every exit path writes them first (`flush`). A crash loses only them: an intent
without an outcome, which that profile settles on resume (docs/stores.md).

Only the journal writes the cursor's fields (`tests/test_shape.py`); the facets of `ctx` and the
runtime move it through its verbs, and the runner fixes how it behaves once, as `RunSettings`.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import (
    ConfigError,
    DaybookError,
    LeaseLost,
    NeedsAttention,
    NonDeterminismError,
    NotSerializable,
    TimedOut,
)
from ..records import MAX_PAYLOAD, Event, Kind, check_json, fingerprint, row_text, shown
from ..store import Store
from ..store.secrets import Concealer, concealer_for
from . import keys
from .failure import error_info as error_info  # where callers have long imported it from
from .stop import Pause, Stop, write_failed
from .turnstile import Turnstile

_SLEEP = time.sleep  # the original: strict mode may guard `time.sleep` for workflow bodies


# How a row is written: `store.append`, or a facet's store method that writes the row in one
# database transaction with a row of its own (a transaction header, `daybook.tx`).
Writer = Callable[[Event], Any]


class Liveness(Protocol):
    """What the cursor needs of a lease heartbeat: whether the lease was lost, the newest pause
    request seen in the run's inbox (inbox id, who asked), a hook for retractions, and to stop it."""

    @property
    def lost(self) -> bool: ...

    @property
    def pause(self) -> tuple[int, str] | None: ...

    # Set while a tool that declares `cancel` runs: handed the retractions (inbox id, target,
    # who) the heartbeat sees, to stop the call when one names it.
    in_flight: Callable[[list[tuple[int, str, str]]], None] | None
    # Set while a call with no timeout runs (tool, run, key, when it began): a hung one is logged.
    calling: tuple[str, str, str, float] | None

    def stop(self) -> None: ...


@dataclass(frozen=True)
class RunSettings:
    """How one execution of a run behaves, fixed when the runner builds it (the same for a `Rerun`)."""

    # Waits up to `inline_wait` seconds happen in this process, longer ones suspend the run; a
    # frontier wait (`tx.frontier`) suspends past `frontier_spin` (a worker's), None: waits here.
    inline_wait: float = 2.0
    frontier_spin: float | None = None
    # `Daybook(gate_irreversible=)`: the release policy of an irreversible call outside a block.
    gate_irreversible: bool | tuple[str, ...] = False
    # The run's parent (H8), and how to drive a child run here (the runner's, above us).
    parent_run: str | None = None
    spawn: Callable[[str, Any], None] | None = None
    # The run's execution deadline (`@workflow(timeout=)`): past it, no new step begins.
    deadline: float | None = None
    # How a wait in this process sleeps (replay: not at all).
    sleep: Callable[[float], None] = _SLEEP
    # `Daybook(defer_outcomes=)`: a confirmed outcome its tool settles by itself if lost is committed
    # with the run's next row (module docstring); off unless the runner turns it on (no flush elsewhere).
    defer_outcomes: bool = False
    # Called when the execution ends, however it ends: the environment's stop (`steering.environment`).
    closers: dict[str, Callable[[], None]] = field(default_factory=dict)


class BranchCut(DaybookError):
    """A speculative branch past the speculation's deadline: it may not write another row."""


class Execution:
    """One process's execution of one run: the loaded journal and the next positions to write."""

    def __init__(
        self,
        store: Store,
        run_id: str,
        events: list[Event],
        heartbeat: Liveness | None,
        read_only: bool = False,
        settings: RunSettings | None = None,
    ) -> None:
        self._store = store
        # Confirmed outcomes held back for the run's next write (`append(defer=True)`).
        self._pending: list[Event] = []
        self._defers = bool(settings is not None and settings.defer_outcomes and not read_only)
        self.read_only = read_only
        self.run_id = run_id
        self.heartbeat = heartbeat
        self.settings = settings or RunSettings()
        self._deadline = self.settings.deadline  # read at every step: one lookup, not two
        self._steps: dict[int, list[Event]] = {}
        # Steps a fork shares with the run it branched from keep that run's ids and keys.
        self._id_owner: dict[int, str] = {}
        # When the run was paused, if it has taken no step since (for the resume primer).
        self._paused_at: float | None = None
        # Journal branches (`daybook.recovery`): superseded steps run again under keys suffixed
        # `~r<branch>`; soft ones (confirmed effects) replay if asked for as the same act.
        self.rebranched: dict[int, int] = {}
        self.soft: dict[int, int] = {}
        # The transaction the run left open on purpose, if its steps end there (a `tx_left`
        # row with no step after it): the next execution goes on with it rather than abort it.
        self.left_tx: str | None = None
        self._index(events)
        self._recorded_steps = max(self._steps, default=0)
        self._next_seq = (events[-1].seq if events else 0) + 1
        self._next_step = 1
        self.keys: dict[str, int] = {}
        self.per_decision: dict[str, int] = {}
        # The latest decision made or replayed: an effect with no explicit decision links to it.
        self.last_decision: str | None = None
        self.clock: Callable[[], float] = time.time
        self.consumed: set[int] = set()
        # Calls a retraction cancelled while they ran: key -> (its inbox id, who sent it).
        self.retracted: dict[str, tuple[int, str]] = {}
        # When this execution began: the startup grace of a liveness check counts from it (S7).
        self.started_at = time.time()
        # Called once, at the first step taken live (past the journal's end), or at `live_at`: a
        # transaction abandoned by a dead owner aborts there, on replay where it was (`at_live`).
        self._on_live: Callable[[], None] | None = None
        self._live_at: int | None = None
        self._released: str | None = None  # a gate just approved it: a fork may make it anew
        self.replayed: dict[str, float] = {}  # model calls replayed here (calls, usd, tokens): `_saved`
        # Writes rows outside the journal held for its next row (a stream's chunks, set by
        # `journal.stream`): called first, so no row seals an act ahead of its chunks.
        self.side: Callable[[], None] | None = None
        self._note_inbox(events)

    @property
    def store(self) -> Store:
        """The run's store. Whoever uses it may write or read what another process depends on,
        so the outcomes held back for the next row are written first (`flush`)."""
        if self._pending:
            self.flush()
        return self._store

    def cover(self) -> Concealer:
        """The store's concealer, without flushing held outcomes (the hot path conceals the next
        act's arguments before its intent, which carries them)."""
        return concealer_for(self._store)

    @property
    def steps(self) -> Mapping[int, list[Event]]:
        """The recorded steps not yet replayed, by step (the verbs move past them)."""
        return self._steps

    @property
    def next_step(self) -> int:
        """The step the next `alloc` hands out."""
        return self._next_step

    @property
    def recorded_steps(self) -> int:
        """The last step the loaded journal holds: steps past it are taken live."""
        return self._recorded_steps

    @property
    def next_seq(self) -> int:
        """The sequence number of the next journal row (a terminal row the runtime writes)."""
        return self._next_seq

    def _note_inbox(self, events: list[Event]) -> None:
        """The inbox messages the journal has consumed, and the calls retractions cancelled."""
        for ev in events:
            if ev.kind in (Kind.SIGNAL, Kind.RUN_PAUSED) and ev.data:
                if ev.data.get("inbox_id") is not None:
                    self.consumed.add(int(ev.data["inbox_id"]))  # a wait's signal, a pause
                self.consumed.update(int(i) for i in ev.data.get("inbox_ids") or ())
            elif ev.kind == Kind.OUTCOME and ev.key and ev.data.get("retracted") is not None:
                self.retracted[ev.key] = (int(ev.data["retracted"]), str(ev.data.get("by") or ""))
            elif ev.kind == Kind.OUTCOME and isinstance(ev.data.get("inbox_id"), int):
                self.consumed.add(ev.data["inbox_id"])  # a resolution sent to the live run

    def _index(self, events: list[Event]) -> None:
        """Group the loaded rows by step, and note what the rows without a step say."""
        for ev in events:
            if ev.kind == Kind.RUN_RETRIED and ev.data.get("supersede"):
                self._supersede(ev)
            elif ev.kind == Kind.RUN_STARTED and ev.data.get("supersede") is not None:
                self._supersede(ev, fork=True)
            elif ev.step is not None:
                if ev.step in self.soft:  # the re-run asked for another act: the old rows are history
                    self._steps.pop(ev.step, None)
                    self._rebranch(ev.step, self.soft.pop(ev.step))
                self._steps.setdefault(ev.step, []).append(ev)
                if ev.run_id != self.run_id:
                    self._id_owner[ev.step] = ev.run_id
                self._paused_at = None
                self.left_tx = None
            elif ev.kind == Kind.RUN_PAUSED:
                self._paused_at = ev.at
            elif ev.kind == Kind.TX_LEFT:
                self.left_tx = str(ev.data.get("tx_id"))

    def _supersede(self, ev: Event, fork: bool = False) -> None:
        """A journal branch: the steps listed run again (under keys suffixed `~r<branch>`), the
        soft ones replay if asked for as the same act. A fork's branch (its first row lists the
        parent's later steps, branch 0) runs them again as its own steps, under its own keys."""
        branch = 0 if fork else int(ev.data.get("branch") or 1)
        soft = {int(s) for s in ev.data.get("soft") or ()}
        for step in ev.data["supersede"]:
            if int(step) in soft and int(step) in self._steps:
                self.soft[int(step)] = branch
                continue
            self._steps.pop(int(step), None)
            self._rebranch(int(step), branch)

    def _rebranch(self, step: int, branch: int) -> None:
        if branch:
            self.rebranched[step] = branch
        else:  # a fork's own step now, no longer the parent's
            self._id_owner.pop(step, None)

    # -- journal writes -----------------------------------------------------------------------

    def append(
        self,
        kind: Kind,
        step: int | None,
        name: str,
        key: str | None = None,
        status: str | None = None,
        attempt: int = 0,
        fp: str | None = None,
        data: dict[str, Any] | None = None,
        *,
        write: Writer | None = None,
        defer: bool = False,
    ) -> Event:
        """Write one journal row. `write`: a facet's store method that writes it with a row of
        its own (the held outcomes are written first, on their own). `defer`: a confirmed
        outcome its tool's profile settles by itself if lost: held back and committed with the
        next row, when the runner allows it (`RunSettings.defer_outcomes`)."""
        if self.read_only:
            raise self._unsettled(step, kind, name)
        beat = self.heartbeat  # `_fenced`, inline: this runs for every row
        if beat is not None and beat.lost:
            self._fenced()
        if not isinstance(name, str) or not (key is None or isinstance(key, str)):
            raise _bad_name(self.run_id, step, name, key)
        if self.replayed:
            self._saved()
        # Positional: the row's fields in `Event`'s order (`.value` is a property, `_value_` not).
        ev = Event(self.run_id, self._next_seq, kind._value_, step, name, key, status, attempt, fp,
                   {} if data is None else data, self.clock())  # fmt: skip
        if self.side is not None:
            self.side()
        pending = self._pending
        if pending and write is not None:
            self.flush()
        if defer and self._defers and self._holdable(ev):
            pending.append(ev)
        elif pending:
            # The held outcomes and this row in one transaction (one fsync): all or none.
            self._written(ev, lambda row: self._store.append_batch([*pending, row]))
            pending.clear()
        else:
            try:  # `_written`, inline: this runs for every row
                (write or self._store.append)(ev)
            except Exception as exc:
                stop = write_failed(self.run_id, ev, exc)
                raise stop from (exc if stop.release else None)
        # Live rows are not kept: memory stays flat however long the run (a step's rows are
        # only ever read back by a later process, from the store).
        self._next_seq += 1
        return ev

    def _unsettled(self, step: int | None, kind: Kind, name: str) -> Stop:
        """A replay (read-only) asked to record a row: the journal does not settle the step."""
        return Stop(
            NonDeterminismError(
                f"run {self.run_id!r}: replay needs to record step {step} ({kind.value} "
                f"{name!r}), which the journal does not settle; the run has not finished "
                "that step, or the workflow code changed"
            ),
            True,
        )

    def flush(self, end: Callable[[list[Event]], None] | None = None) -> None:
        """Write the outcomes held back for the run's next row now, on their own (a use of the
        store, an exit path), or given `end` with the run's end row: `end(held)`, one commit (if
        it raises, they stay held). Fenced like any row (the heartbeat's word, the seq key)."""
        if self.side is not None:
            self.side()
        if self.replayed and not self.read_only:
            self._saved()
        if pending := self._pending:
            self._fenced()
        if end is not None and pending:  # a failed end leaves them unknowns, as a failed append
            self._written(pending[-1], lambda _row: end(list(pending)))
        elif end is not None:
            end([])
        elif len(pending) == 1:
            self._written(pending[0], self._store.append)
        elif pending:
            self._written(pending[-1], lambda _row: self._store.append_batch(list(pending)))
        pending.clear()

    def _saved(self) -> None:
        """What replay saved, as one row: a kill before it is written loses only that count."""
        tally = dict(self.replayed)
        self.replayed.clear()
        self.append(Kind.RUN_REPLAYED, None, "replayed", data=tally)

    def _holdable(self, ev: Event) -> bool:
        """Whether `ev` may be held for the next row: refused now if it cannot be journaled (at its
        step), written at once if large enough that a codec's envelope could take it over the limit."""
        size: list[int] = []
        self._written(ev, lambda row: size.append(len(row_text(row.data, row.run_id, row.seq))))
        return size[0] <= MAX_PAYLOAD // 2

    def _fenced(self) -> None:
        if self.heartbeat is not None and self.heartbeat.lost:
            raise Stop(LeaseLost(f"run {self.run_id!r}: lease lost; stopped before writing"), False)

    def _written(self, ev: Event, write: Writer) -> None:
        """`write(ev)`, a store failure turned into the `Stop` the runtime understands."""
        try:
            write(ev)
        except Exception as exc:
            stop = write_failed(self.run_id, ev, exc)
            raise stop from (exc if stop.release else None)

    def id_of(self, step: int) -> str:
        """The id of the decision (or the default key of the effect) made at `step`."""
        base = keys.step_key(self._id_owner.get(step, self.run_id), step)
        return keys.branched(base, self.rebranched[step]) if step in self.rebranched else base

    def alloc(self) -> int:
        step = self._next_step
        if self._on_live is not None and (step > self._recorded_steps or step == self._live_at):
            hook, self._on_live, self._live_at = self._on_live, None, None
            hook()
        if self._deadline is not None and step > self._recorded_steps and time.time() > self._deadline:
            raise TimedOut(
                f"run {self.run_id!r} passed its execution timeout before step {step}: it fails "
                "here, its journal kept; `daybook retry` would time out again unless the workflow's "
                "timeout is raised",
                {},
            )
        if step > self._recorded_steps and self.heartbeat is not None:
            asked = self.heartbeat.pause
            if asked is not None and asked[0] not in self.consumed:
                # A step boundary, live: everything before it is journaled, nothing after began.
                raise Pause(self.run_id, asked[1], asked[0])
        self._next_step += 1
        return step

    def expect(
        self,
        step: int,
        kind: Kind,
        name: str,
        fp: str,
        same_act: Callable[[Event], bool | None] | None = None,
    ) -> list[Event] | None:
        # Popped: a replayed step is never looked up again, so a resume frees as it goes.
        recs = self._steps.pop(step, None)
        if not recs:
            return None
        if step in self.soft:
            return self._soft(step, recs, kind, name, fp, same_act)
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

    def _soft(
        self,
        step: int,
        recs: list[Event],
        kind: Kind,
        name: str,
        fp: str,
        same_act: Callable[[Event], bool | None] | None,
    ) -> list[Event] | None:
        """A confirmed effect on a branch's re-run: replayed if asked for again as the same act
        (the same arguments, or what `same_act` accepts); run again if not. `same_act` returning
        None means it must not run again (an irreversible act asked for differently): parked."""
        branch = self.soft.pop(step)
        if recs[0].kind != kind or recs[0].name != name:
            verdict: bool | None = False
        else:
            verdict = recs[0].fp == fp or (same_act(recs[0]) if same_act is not None else False)
        if verdict:
            return recs  # the same act: replayed, never re-fired
        if verdict is None and not branch and self._released == name:
            verdict = False  # a fork's changed irreversible act that a person approved: made
        if verdict is None:
            who = "the re-run asks" if branch else "the fork asks, unlike the run it was forked from,"
            raise Stop(
                NeedsAttention(
                    self.run_id,
                    f"run {self.run_id!r} step {step}: {who} for {name!r} again with other "
                    f"arguments, but it is irreversible and was done (key {recs[0].key}) with the "
                    "first ones. It is not repeated; the run is parked: settle it by hand, then "
                    f"`daybook retry {self.run_id}` or cancel it",
                ),
                True,
            )
        self._rebranch(step, branch)
        return None

    def check_complete(self) -> None:
        done = self._next_step - 1
        # A fork that finished before the parent's later acts it left standing: they stay the
        # parent's (listed by `fork`), not steps this run skipped.
        left = [k for k in self._steps if k > done and self.soft.get(k) != 0]
        if left:
            first = self._steps[min(left)][0]
            raise Stop(
                NonDeterminismError(
                    f"run {self.run_id!r}: the workflow finished after step {done}, but the "
                    f"journal holds step {done + 1} ({first.kind} {first.name!r}); the workflow "
                    "code changed under a live run: restore the code it started with"
                ),
                True,
            )

    # -- moving the cursor (the verbs the facets and the runtime use; nothing else writes it) ---

    def skip_through(self, end: int) -> None:
        """Go on after step `end`, not replaying the steps up to it (an attempt aborted for a retry)."""
        for skipped in range(self._next_step, end + 1):
            self._steps.pop(skipped, None)
        self._next_step = end + 1

    def jump_to(self, step: int) -> None:
        """Go on at `step`: the steps before it were written by a speculation's branches."""
        self._next_step = step

    def start_at(self, first: int) -> None:
        """Begin at step `first`, as if the journal began there (a cancelled run's unwind runs
        after the run's own steps): the steps before it are not replayed."""
        self._steps = {step: rows for step, rows in self._steps.items() if step >= first}
        self._recorded_steps = max(self._steps, default=0)
        self._next_step = first

    @contextlib.contextmanager
    def revisit(self, step: int, rows: list[Event]) -> Iterator[None]:
        """Replay `step` from `rows` once more (an unsettled undo, at its own step), then go back."""
        saved = self._next_step
        self._steps[step] = rows
        self._next_step = step
        try:
            yield
        finally:
            self._next_step = saved

    def at_live(self, hook: Callable[[], None], step: int | None = None) -> None:
        """Call `hook` once, at the first step taken live or at `step`, whichever comes first."""
        self._on_live, self._live_at = hook, step

    def drop_live(self, hook: Callable[[], None]) -> None:
        """Forget `hook` (`at_live`) if it has not been called yet."""
        if self._on_live == hook:
            self._on_live = self._live_at = None

    def release(self, name: str | None) -> None:
        """While set, a fork's changed irreversible act `name` may be made anew: a person just
        approved it at a gate (None: no act is)."""
        self._released = name

    def take_paused_at(self) -> float | None:
        """When the run was paused, if it has taken no step since; None from then on."""
        at, self._paused_at = self._paused_at, None
        return at

    def consume(self, inbox_ids: Iterable[int]) -> None:
        """The inbox messages a step just journaled as read: never read again."""
        self.consumed.update(inbox_ids)

    def branch(self, first_step: int, lock: Turnstile) -> Execution:
        """A speculation's branch: a cursor over the same journal (recorded steps, keys and inbox
        shared), writing its own steps from `first_step`, its rows in turn through `lock`."""
        self.flush()  # the branches write their rows in parallel: none carries this cursor's
        twin = object.__new__(_Branch)
        twin.__dict__.update(self.__dict__)
        twin._pending, twin._defers = [], False
        twin._next_step = first_step
        twin._parent = self
        twin._lock = lock
        twin._cut_thread = None
        return twin

    def cut(self, thread: int | None) -> None:
        """A branch cut at its speculation's deadline: nothing `thread` writes from now on lands."""
        raise TypeError(f"run {self.run_id!r}: only a speculation's branch cursor can be cut")


class _Branch(Execution):
    """A speculation's branch cursor (`Execution.branch`)."""

    _parent: Execution
    _lock: Turnstile
    _cut_thread: int | None

    def cut(self, thread: int | None) -> None:
        self._cut_thread = thread

    def append(
        self,
        kind: Kind,
        step: int | None,
        name: str,
        *row: Any,
        write: Writer | None = None,
        defer: bool = False,
        **fields: Any,
    ) -> Event:
        if self._cut_thread is not None and threading.get_ident() == self._cut_thread:
            raise BranchCut(f"run {self.run_id!r}: a speculative branch past its deadline stops here")
        handed = write is not None and kind == Kind.DECISION and name.startswith("tx:")  # no key
        return self._lock.through(
            self._parent, self, write, handed,
            lambda w: super(_Branch, self).append(kind, step, name, *row, write=w, defer=defer, **fields),
        )  # fmt: skip


def step_fingerprint(value: Any, step: int, name: str, check: bool = True) -> str:
    try:
        return fingerprint(value, "", check)
    except NotSerializable as exc:
        # The message is built only here: the hot path never formats it.
        raise Stop(NotSerializable(f"step {step} {name!r} arguments{exc}"), True) from None


def check_step_json(value: Any, what: str) -> None:
    try:
        check_json(value, what)
    except NotSerializable as exc:
        # Refused at the step that produced it, before it is written: the run is parked.
        raise Stop(exc, True) from None


def _bad_name(run_id: str, step: int | None, name: object, key: object) -> Stop:
    """A step name or key that is not text: the code's fault, not the store's, so the run is
    parked rather than retried for ever (`ctx` refuses these first; this is the last line)."""
    return Stop(
        ConfigError(
            f"run {run_id!r} step {step}: a step name and key must be strings, got name "
            f"{shown(name)} and key {shown(key)}; fix the workflow code"
        ),
        True,
    )
