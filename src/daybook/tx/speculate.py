"""`ctx.speculate(branches, choose=...)`: Best-of-K. K branches run concurrently (threads), each
in its own transaction; the choice is journaled; only the winner's effects persist.

Each branch gets its own cursor over the run's journal: branch i records its steps in its own
block of step numbers (`BLOCK` wide, after the `tx:speculate` row), so threads that interleave
in time still replay to the same steps. Journal writes take turns through one turnstile (the
run's sequence numbers stay one total order; journal/turnstile.py): a branch's `tx:*` rows let
the next branch through once they are in a group commit's line, so the K branches' begins, and
the K-1 losers' aborts, share commits instead of taking one each.

The Best-of-K circularity (spec §1.7) is resolved as the spec proposes: the branches of one
speculation are siblings (their transaction ids share a prefix) and do not block one another;
a branch counts as resolved once it finished and was chosen or aborted. So: every branch runs,
`choose(results)` picks a winner among those that finished without an exception, the losers are
aborted (staged calls dropped, held irreversible calls never released, calls that ran now
undone by their inverses, newest first), all at once, each on a thread of its own, then the
winner commits. The branches' threads are kept between speculations (tx/crew.py).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import ConfigError, DaybookError, TimedOut
from ..journal.act import TxMark
from ..journal.execution import Execution, step_fingerprint
from ..journal.turnstile import Turnstile
from ..records import Kind, Status
from ..store import handoff
from . import crew
from .atomix import EpochTransaction, Raw, drive_sync
from .scope import parse_all

BLOCK = 100_000
SPECULATE = "tx:speculate"
CUT = "tx:cut"


class BranchLost(DaybookError):
    """A speculative branch that was not chosen: its transaction is aborted."""


class _Latch:
    """Set once `count` threads have each counted down: the run's thread waits once for all the
    branches, not once per branch (each wake of a waiting thread costs a context switch)."""

    def __init__(self, count: int) -> None:
        self._left = count
        self._lock = threading.Lock()
        self.all = threading.Event()
        if count <= 0:
            self.all.set()

    def down(self) -> None:
        with self._lock:
            self._left -= 1
            last = self._left == 0
        if last:
            self.all.set()


class _Ctx(Protocol):
    """What a speculation needs of the `Transactions` facet it runs in."""

    _exe: Execution
    _tx: EpochTransaction | None

    def _effect_now(
        self, tool: Any, key: str | None, decision: Any, args: dict[str, Any], tx: TxMark | None
    ) -> Any: ...

    def _choose(self, name: str, fn: Callable[[], Any]) -> Any: ...

    def _branch(self, exe: Execution) -> tuple[Any, _Ctx]: ...


@dataclass
class _Branch:
    name: str
    ctx: Any  # the branch's full `ctx`, given to its function
    facet: _Ctx  # that ctx's transactions facet
    tx: EpochTransaction
    result: Any = None
    error: BaseException | None = None
    cut: bool = False  # cut at the deadline (recorded): its thread writes nothing
    block: int = 0  # the first step of its block
    done: threading.Event = field(default_factory=threading.Event)  # its body has finished
    finished: _Latch | None = None  # counted down with `done` (what the run's thread waits on)
    # Its thread waits, once its body finished, until the speculation settles, then does these
    # (its own abort, if it lost): the losers abort at once without a thread each to start.
    then: list[Callable[[], None]] = field(default_factory=list)
    go: threading.Event = field(default_factory=threading.Event)


def speculate(
    ctx: _Ctx,
    branches: Mapping[str, Callable[[Any], Any]],
    choose: Callable[[dict[str, Any]], str],
    scopes: Iterable[str] | None,
    wait: float | None,
    deadline: float | None = None,
) -> Any:
    """Run every branch, choose, abort the losers, commit the winner; return its result."""
    exe = ctx._exe
    names = _check(ctx, branches)
    parsed = parse_all(["**"] if scopes is None else scopes, "ctx.speculate scopes")
    step = exe.alloc()
    value = {"branches": names, "scopes": [s.text for s in parsed]}
    fp = step_fingerprint(value, step, SPECULATE)
    if exe.expect(step, Kind.DECISION, SPECULATE, fp) is None:
        exe.append(Kind.DECISION, step, SPECULATE, status=Status.RECORDED.value, fp=fp, data={"value": value})
    group = f"{exe.run_id}/spec/{step}/"
    lock = Turnstile()
    runs: list[_Branch] = []
    for i, name in enumerate(names):
        bexe = exe.branch(step + (i + 1) * BLOCK, lock)
        bctx, facet = ctx._branch(bexe)
        raw: Raw = facet._effect_now
        tx = EpochTransaction(bexe, raw, parsed, 0, wait, group)
        runs.append(_Branch(name, bctx, facet, tx, block=step + (i + 1) * BLOCK))
    cut_step = step + (len(names) + 1) * BLOCK
    recorded = _recorded_cut(exe, cut_step)
    for r in runs:
        r.cut = recorded is not None and r.name in recorded
    begins = handoff.Gathering(len(runs))
    finished = _Latch(len(runs))
    for r in runs:
        r.finished = finished
    threads = [crew.start(functools.partial(_run, r, branches[r.name], begins)) for r in runs]
    try:
        _join(finished, None if recorded is not None else deadline)
        if deadline is not None and recorded is None:
            with lock.pinned():  # no branch row is half written, none waits in line
                lock.drain()
                _cut_live(exe, cut_step, runs, threads, deadline)
        for r in runs:
            if r.cut:
                r.error = TimedOut(f"speculative branch {r.name!r} passed the speculation's deadline", {})
                # Its abort writes in the second half of its block, on a cursor of its own: the cut
                # thread (still running, or replaying) never shares a step number with it.
                aborting = exe.branch(r.block + BLOCK // 2, lock)
                r.tx.rebind(aborting, ctx._branch(aborting)[1]._effect_now)
        exe.jump_to(cut_step + 1)
        return _settle(ctx, runs, choose, lock)
    finally:
        for r in runs:
            r.go.set()  # a thread given nothing to do (a winner, a cut branch) ends


def _join(finished: _Latch, deadline: float | None) -> None:
    """Wait for every branch's body, or until `deadline` seconds have passed."""
    finished.all.wait(deadline)


def _recorded_cut(exe: Execution, cut_step: int) -> list[str] | None:
    recs = exe.steps.get(cut_step)
    return None if not recs else list(recs[0].data["value"])


def _cut_live(
    exe: Execution, cut_step: int, runs: list[_Branch], threads: list[int], deadline: float
) -> None:
    """Cut the branches still running at the deadline: journaled (a replay cuts the same ones
    before they write), and each one's thread may write nothing more; it is aborted as a loser."""
    cut = [r.name for r in runs if not r.done.is_set()]
    for r, t in zip(runs, threads, strict=True):
        if r.name in cut:
            r.cut = True
            r.facet._exe.cut(t)
    fp = step_fingerprint({"deadline": deadline}, cut_step, CUT)
    exe.append(Kind.DECISION, cut_step, CUT, status=Status.RECORDED.value, fp=fp, data={"value": cut})


def _check(ctx: _Ctx, branches: Mapping[str, Callable[[Any], Any]]) -> list[str]:
    if ctx._tx is not None:
        raise ConfigError(
            "ctx.speculate inside ctx.transaction: speculate outside it (transactions do not nest)"
        )
    if not isinstance(branches, Mapping) or not branches:
        raise ConfigError("ctx.speculate(branches, choose=...): give a dict of name -> fn(ctx), at least one")
    for name, fn in branches.items():
        if not isinstance(name, str) or not callable(fn):
            raise ConfigError(f"ctx.speculate: branch {name!r} must be a str name mapped to a fn(ctx)")
    return list(branches)


def _run(branch: _Branch, fn: Callable[[Any], Any], begins: handoff.Gathering) -> None:
    if branch.cut:  # cut in the run's first life: on replay it writes nothing at all
        branch.facet._exe.cut(threading.get_ident())
    try:
        with handoff.joining(begins):  # the K begins: one commit
            branch.tx.begin()
        branch.facet._tx = branch.tx
        branch.result = fn(branch.ctx)
    except BaseException as exc:  # reported to the run's own thread by _settle
        branch.error = exc
    finally:
        branch.facet._tx = None
        branch.done.set()
        if branch.finished is not None:
            branch.finished.down()
    branch.go.wait()
    for job in branch.then:
        job()


def _settle(ctx: _Ctx, runs: list[_Branch], choose: Callable[[dict[str, Any]], str], lock: Turnstile) -> Any:
    for r in runs:
        if r.error is not None and not isinstance(r.error, Exception):
            raise r.error  # a Stop (lease lost, a crash-like store failure): resume goes on
    finished = {r.name: r.result for r in runs if r.error is None}
    winner: str | None = None
    if finished:
        winner = ctx._choose("tx:choose", lambda: choose(dict(finished)))
        if winner not in finished:
            raise ConfigError(f"ctx.speculate: choose returned {winner!r}, not one of {sorted(finished)}")
    _abort_losers([r for r in runs if r.name != winner and r.tx.tx_id], winner, lock)
    if winner is None:
        first = next(r.error for r in runs if r.error is not None)
        raise first
    best = next(r for r in runs if r.name == winner)
    drive_sync(best.tx.end(None))
    return best.result


def _abort_losers(losers: list[_Branch], winner: str | None, lock: Turnstile) -> None:
    """Abort every loser at once, each on its own thread (a cut one's may still be running: it
    gets a new one): their rows share commits (a loser's abort waits for its own rows only, and
    the order among losers is free: each writes in its own block). The first failure, in the
    branches' order, is raised once all are done."""
    failed: list[BaseException | None] = [None] * len(losers)
    ended = _Latch(len(losers))
    aborts = handoff.Gathering(len(losers))  # their first rows: one commit

    def abort(i: int) -> None:
        r = losers[i]
        lost = r.error or BranchLost(f"branch {r.name!r} lost to {winner!r}")
        try:
            with handoff.joining(aborts), lock.pinned():  # its decision and end rows: consecutive seqs
                drive_sync(r.tx.end(lost))
        except BaseException as exc:  # raised below, in the run's own thread
            failed[i] = exc
        finally:
            ended.down()

    for i, r in enumerate(losers):
        if r.cut:
            crew.start(functools.partial(abort, i))
        else:
            r.then.append(functools.partial(abort, i))
            r.go.set()
    ended.all.wait()
    for exc in failed:
        if exc is not None:
            raise exc
