"""Rewind: put a run's checkout back to its snapshot after a step, on a journal branch.

A rewind is the journal branch recovery and forks use (`run_retried` with `supersede`, read by
`Execution`): nothing in the journal is edited or deleted; the steps after STEP run again under
keys suffixed `~r<branch>` (decisions are made again: "forward" means redo), and the confirmed
effects among them outside the workspace replay if asked for as the same act (soft), so nothing
outside the checkout happens twice. Before the branch row, the files the run touched are put
back as they were after STEP (`snapshot.py`), and the run's ref moves to that snapshot (the
reflog keeps the way back). Only the run's own paths are restored: a path changed since the
run's last edit (another run, a person) is someone else's, and the rewind refuses
(`WorkspaceConflict`) unless forced. Ignored paths (dependencies, `.env`, build output) are
live state: reported, never restored.

Crash-safe by recomputation: the plan is a function of the journal and the snapshots, and
restoring a file already restored is a no-op, so a second call after a kill finishes the job.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ..books.cost import CostLine
from ..coordination.entity import Entity
from ..errors import CheckoutBusy, ConfigError, RunNotFound, WorkspaceConflict
from ..journal.execution import Execution
from ..records import JSON, Event, Kind, RunStatus, Status
from ..runtime import operator
from ..runtime.claim import Claims
from ..runtime.fork import expand
from ..store import Store
from . import snapshot
from .checkout import lease_name

REWINDABLE = (
    RunStatus.FAILED,
    RunStatus.NEEDS_ATTENTION,
    RunStatus.STUCK,
    RunStatus.PAUSED,
    RunStatus.SUSPENDED,
)
EDIT = "workspace.edit"
UNEDIT = "workspace.unedit"


@dataclass(frozen=True)
class Rewind:
    """What a rewind did (or, `dry_run`, would do). `snapshot`: the commit restored (per
    checkout: `checkouts`); `restored`/`removed`: paths written back / deleted; `live`: ignored
    paths not restored (live state); `superseded`: steps that run again; `soft`: confirmed
    effects outside the workspace among them, replayed rather than repeated; `exact`: False when
    the snapshot the journal names for STEP was compacted off the ref and since pruned by git
    (restored instead: the newest snapshot kept up to STEP, its step in `checkouts`)."""

    run_id: str
    to: int
    branch: int
    restored: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    live: list[str] = field(default_factory=list)
    superseded: list[int] = field(default_factory=list)
    soft: list[int] = field(default_factory=list)
    checkouts: dict[str, dict[str, JSON]] = field(default_factory=dict)
    exact: bool = True
    dry_run: bool = False

    def as_dict(self) -> dict[str, JSON]:
        return dataclasses.asdict(self)


@dataclass
class _Plan:
    root: str
    target: snapshot.Snapshot
    latest: snapshot.Snapshot
    want: dict[str, str | None]
    conflicts: dict[str, str | None]
    live: list[str]
    exact: bool  # False: the journal's snapshot is gone (compacted, then pruned by git gc)


def rewind(
    store: Store,
    claims: Claims,
    run_id: str,
    to: int,
    *,
    by: str,
    force: bool = False,
    dry_run: bool = False,
    identity: dict[str, Any] | None = None,
) -> Rewind:
    """Rewind `run_id`'s checkout to after step `to` and open the journal branch (see module)."""
    if isinstance(to, bool) or not isinstance(to, int) or to < 0:
        raise ConfigError(
            f"rewind {run_id!r}: --to takes a step number (0: before the first edit), got {to!r}"
        )
    _rewindable(store, run_id)
    if dry_run:
        return _rewind(store, run_id, to, by=by, force=force, dry_run=True, identity=identity)
    # One operator's act on the run at a time (a recovery, a retry, another rewind): the run's
    # lease, keeping its status; RunLeased names who holds it.
    if not claims.hold(run_id, tuple(s.value for s in REWINDABLE)):
        _rewindable(store, run_id)  # it changed meanwhile: say how
        raise ConfigError(f"run {run_id!r} changed while it was being rewound; try again")
    try:
        return _rewind(store, run_id, to, by=by, force=force, dry_run=False, identity=identity)
    finally:
        claims.let_go(run_id)


def _rewindable(store: Store, run_id: str) -> None:
    """Nothing if the run may be rewound now; else the error saying why not and what to do."""
    info = store.get_run(run_id)
    if info is None:
        raise RunNotFound(run_id, store.url)
    if info.status in REWINDABLE:
        return
    can = ", ".join(s.value for s in REWINDABLE)
    extra = " (`daybook pause` it first)" if info.status in (RunStatus.RUNNING, RunStatus.PENDING) else ""
    raise ConfigError(
        f"run {run_id!r} is {info.status}: only a run that is {can} is rewound{extra}; "
        "a completed run is not taken back: fork it (`daybook fork`) to try another way"
    )


def _rewind(
    store: Store,
    run_id: str,
    to: int,
    *,
    by: str,
    force: bool,
    dry_run: bool,
    identity: dict[str, Any] | None,
) -> Rewind:
    own = store.load(run_id)
    view = Execution(store, run_id, expand(store, own), None, read_only=True)
    steps = dict(view.steps)
    edits = {s: rows for s, rows in steps.items() if _edit(rows) is not None}
    marks = {s: m for s, rows in steps.items() if (m := _mark(rows)) is not None}
    if not edits:
        raise ConfigError(
            f"run {run_id!r} has no workspace edits to rewind (no confirmed `{EDIT}` step on its "
            "current branch); rewind is for runs that edit a daybook.Checkout"
        )
    if to and to not in steps:
        raise ConfigError(
            f"run {run_id!r} has no step {to} (its steps are 1..{max(steps)}; its edits are at steps "
            f"{sorted(edits)}); `daybook show {run_id}` lists them, and --to 0 goes back to before "
            "the first edit"
        )
    roots = sorted({_root(rows) for rows in edits.values()})
    for root in roots:
        _not_leased_by_another(store, root, run_id)
    plans = [
        _plan(root, run_id, to, force, {s: c for s, (r, c) in marks.items() if r == root}) for root in roots
    ]
    later = sorted(s for s in steps if s > to)
    # Effects outside the workspace replay if asked for again; the workspace's own (edits and
    # their undos) run again, on the files put back.
    soft = [s for s in later if s not in marks and _confirmed_effect(steps[s])]
    branch = 1 + sum(1 for ev in own if ev.kind == Kind.RUN_RETRIED and ev.data.get("supersede"))
    report = _report(run_id, to, branch, plans, later, soft, dry_run)
    if dry_run:
        return report
    for plan in plans:
        for path, blob in plan.want.items():
            snapshot.put(plan.root, path, blob)
    data: dict[str, Any] = {"supersede": later, "soft": soft, "branch": branch, "rewind": report.as_dict()}
    if identity:
        data["identity"] = identity
    operator.retry(store, run_id, by, data, REWINDABLE)
    for plan in plans:
        snapshot.move(plan.root, run_id, plan.target.commit, f"rewind to step {to} (journal branch {branch})")
    return report


def _edit(rows: list[Event]) -> dict[str, Any] | None:
    """The result of a confirmed, applied workspace edit in this step's rows, else None."""
    if not rows or rows[0].kind != Kind.INTENT or rows[0].name != EDIT:
        return None
    last = rows[-1]
    if last.kind != Kind.OUTCOME or last.status != Status.CONFIRMED:
        return None
    result = last.data.get("result")
    return result if isinstance(result, dict) and result.get("applied") else None


def _mark(rows: list[Event]) -> tuple[str, str] | None:
    """(checkout, snapshot) a confirmed workspace act in this step's rows left: an edit that
    went through, or an edit's undo (a compensation); else None."""
    if not rows or rows[0].kind != Kind.INTENT or rows[0].name not in (EDIT, UNEDIT):
        return None
    last = rows[-1]
    result = (
        last.data.get("result") if last.kind == Kind.OUTCOME and last.status == Status.CONFIRMED else None
    )
    if not isinstance(result, dict) or not result.get("snapshot"):
        return None
    args = rows[0].data.get("args") or {}
    root = args.get("root") if rows[0].name == EDIT else (args.get("original") or {}).get("root")
    return str(root), str(result["snapshot"])


def _root(rows: list[Event]) -> str:
    return str((rows[0].data.get("args") or {}).get("root"))


def _confirmed_effect(rows: list[Event]) -> bool:
    return bool(rows) and rows[0].kind == Kind.INTENT and rows[-1].status == Status.CONFIRMED


def _not_leased_by_another(store: Store, root: str, run_id: str) -> None:
    """A checkout another run holds the lease of is being edited now: a restore would race it."""
    view = Entity(store, lease_name(root)).view()
    if view.state == "held" and view.holder not in (None, run_id):
        raise CheckoutBusy(
            f"checkout {root} is leased by run {view.holder!r}, which may be editing it now; a rewind of "
            f"run {run_id!r} would race it. Wait for that run to release it (or its lease to lapse), "
            "then rewind again"
        )


def _plan(root: str, run_id: str, to: int, force: bool, marks: dict[int, str]) -> _Plan:
    chain = [snapshot.read(root, c) for c in snapshot.chain(root, run_id)]
    if not chain:
        raise ConfigError(
            f"run {run_id!r}: the checkout {root} holds no snapshots of it (ref {snapshot.ref_for(run_id)} "
            "is gone: another clone, or deleted by hand); it cannot be rewound from here"
        )
    latest = chain[-1]
    target, exact = _target(root, chain, to, marks)
    live = snapshot.ignored(root)
    want: dict[str, str | None] = {}
    conflicts: dict[str, str | None] = {}
    for path in sorted(latest.touched):
        if _under(path, live):
            continue
        goal = target.files.get(path) if path in target.touched else latest.touched[path]
        now = snapshot.live(root, path)
        if now not in (latest.files.get(path), goal) and not force:
            conflicts[path] = now
        want[path] = goal
    if conflicts:
        raise WorkspaceConflict(
            f"rewind of run {run_id!r} would overwrite {', '.join(conflicts)} in {root}: changed after "
            "the run's last edit (another run, or a person), so not the run's own. Nothing was "
            "restored; commit or move those changes and rewind again, or rewind with --force"
        )
    return _Plan(root, target, latest, want, conflicts, live, exact)


def _target(
    root: str, chain: list[snapshot.Snapshot], to: int, marks: dict[int, str]
) -> tuple[snapshot.Snapshot, bool]:
    """The snapshot the journal says the checkout was in after step `to`: the one the last
    edit (or undo) up to it made, else the run's base. Compaction takes old snapshots off the
    ref, but git keeps them while its reflog names them; one git has pruned since is replaced
    by the newest on the ref up to that step (not exact)."""
    made = [c for s, c in sorted(marks.items()) if s <= to]
    if not made:
        return chain[0], True
    try:
        return snapshot.read(root, made[-1]), True
    except snapshot.SnapshotError:
        return next(s for s in reversed(chain) if s.step <= to), False


def _under(path: str, live: list[str]) -> bool:
    return any(path == p.rstrip("/") or (p.endswith("/") and path.startswith(p)) for p in live)


def _report(
    run_id: str, to: int, branch: int, plans: list[_Plan], later: list[int], soft: list[int], dry_run: bool
) -> Rewind:
    restored: list[str] = []
    removed: list[str] = []
    unchanged: list[str] = []
    live: list[str] = []
    checkouts: dict[str, dict[str, JSON]] = {}
    exact = True
    for plan in plans:
        for path, blob in plan.want.items():
            now = snapshot.live(plan.root, path)
            (unchanged if now == blob else removed if blob is None else restored).append(path)
        live.extend(plan.live)
        exact = exact and plan.exact
        checkouts[plan.root] = {
            "snapshot": plan.target.commit,
            "step": plan.target.step,
            "ref": snapshot.ref_for(run_id),
        }
    return Rewind(
        run_id=run_id,
        to=to,
        branch=branch,
        restored=restored,
        removed=removed,
        unchanged=unchanged,
        live=sorted(set(live)),
        superseded=later,
        soft=soft,
        checkouts=checkouts,
        exact=exact,
        dry_run=dry_run,
    )


def snapshots_of(store: Store, run_id: str, checkout: str, lines: list[CostLine]) -> list[dict[str, JSON]]:
    """The snapshots of `run_id` in `checkout`, oldest first (step 0: the base, before its
    edits), each with what the steps since the previous snapshot cost (`lines`: the run's cost
    ledger): model tokens, USD, and the wall time between the two snapshots."""
    if store.get_run(run_id) is None:
        raise RunNotFound(run_id, store.url)
    root = snapshot.top(checkout)
    out: list[dict[str, JSON]] = []
    prev: snapshot.Snapshot | None = None
    for commit in snapshot.chain(root, run_id):
        snap = snapshot.read(root, commit)
        since = [ln for ln in lines if prev is not None and prev.step < ln.step <= snap.step]
        out.append(
            {
                "step": snap.step,
                "commit": commit,
                "key": snap.key,
                "decision": snap.decision,
                "bytes": snap.bytes,
                "files": len(snap.files),
                "tokens": sum(ln.input_tokens + ln.output_tokens for ln in since),
                "usd": round(sum(ln.usd for ln in since), 6),
                "seconds": round(snap.at - prev.at, 3) if prev is not None and snap.at and prev.at else 0.0,
            }
        )
        prev = snap
    return out
