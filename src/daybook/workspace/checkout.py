"""Checkout: a git work tree a run edits, with drift checked before every act and a snapshot
after every edit.

This module owns `Checkout`, the handle a workflow edits files through, and the tool
`workspace.edit`. The run keeps, per path it has looked at or edited, the blob it assumes the
file holds (its assumption, rebuilt on replay from the recorded looks and edits). Each edit is
one effect whose tool first compares the live files with the assumption: a file changed outside
the run (by a person, another process, while the run was down) makes the edit change nothing
and record the drift, and the checkout raises `ReplayDiverged`, or, with
`on_drift="redecide"`, decides again on the new state. An edit that goes through writes its
files (each atomically) and commits a snapshot on the run's hidden ref (`snapshot.py`). File
contents go into git objects; the journal holds blob ids only.

A lease on the checkout (a coordination entity named after the work tree) keeps a second run
out while one edits it; `worktree=True` gives each run a git worktree of its own instead.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..context import Context
from ..errors import CheckoutBusy, ConfigError, DaybookError, ReplayDiverged, WorkspaceConflict
from ..journal.decision import Decision
from ..journal.tool import Absent, Confirmed, ReconcileResult, tool
from . import snapshot
from .snapshot import clean

POLICIES = ("park", "redecide")
DEFAULT_TTL = 600.0
Files = dict[str, str | bytes | None]


def _bytes(content: str | bytes) -> bytes:
    return content.encode() if isinstance(content, str) else bytes(content)


def _edit_status(key: str, args: dict[str, Any]) -> ReconcileResult:
    """After a kill between the edit and its outcome row: the snapshot under this key says the
    edit happened; none means it did not finish, and doing it again finishes it."""
    found, _ = snapshot.find(str(args["root"]), str(args["run"]), key)
    if found is None:
        return Absent()
    return Confirmed(_done(str(args["root"]), found, args), ref=found)


def _done(root: str, commit: str, args: dict[str, Any]) -> dict[str, Any]:
    files: dict[str, str | None] = args["files"]
    return {
        "applied": True,
        "snapshot": commit,
        "after": files,
        "before": dict(args["assumed"]),
        "bytes": int(args["size"]),
        "live": snapshot.ignored_of(str(args["root"]), list(files)),
    }


@tool(
    name="workspace.unedit",
    idempotent=True,
    irreversible=False,
    effect_class="idempotent",
    certain=(DaybookError,),
)
def unedit(*, original: dict[str, Any], result: dict[str, Any], idempotency_key: str) -> dict[str, Any]:
    """Undo an edit (its compensation: `ctx.compensate`, `daybook cancel --compensate`, a
    recovery's undo): put back what each file held before it, and record that as a snapshot on
    the run's ref (tagged with the edit's step). Refuses, changing nothing, where a file was
    changed after the edit: that change is someone else's."""
    if not result.get("applied"):
        return {"undone": []}  # a drift: the edit wrote nothing
    root, run = str(original["root"]), str(original["run"])
    after: dict[str, str | None] = result["after"]
    before: dict[str, str | None] = result["before"]
    done, parent = snapshot.find(root, run, idempotency_key)
    if done is not None:
        return {"undone": sorted(after), "snapshot": done}
    now = snapshot.live_all(root, list(after))
    changed = [p for p in after if now[p] not in (after[p], before.get(p))]
    if changed:
        raise WorkspaceConflict(
            f"undo of the edit at step {original['step']} in {root}: {', '.join(changed)} changed after "
            "the edit (neither what it wrote nor what was there before), so nothing is undone; "
            "settle them by hand, then `daybook resolve` this step"
        )
    for path in after:
        snapshot.put(root, path, before.get(path))
    live = snapshot.ignored_of(root, list(after))
    back = {p: before.get(p) for p in after if p not in live}
    manifest = {"run": run, "step": original["step"], "key": idempotency_key, "decision": None, "bytes": 0}
    commit = snapshot.take(root, run, parent, back, before, dict(manifest, undoes=result.get("snapshot")))
    return {"undone": sorted(after), "snapshot": commit}


@tool(
    name="workspace.edit",
    idempotent=True,
    status=_edit_status,
    reference=lambda r: r.get("snapshot"),
    inverse=unedit,
    irreversible=False,
    effect_class="compensable",
)
def edit_files(
    *,
    root: str,
    run: str,
    files: dict[str, str | None],
    assumed: dict[str, str | None],
    step: int,
    decided: str | None,
    size: int,
    keep: int | None,
    idempotency_key: str,
) -> dict[str, Any]:
    """Write `files` (path -> blob id, None: remove) if each still holds what the run assumed;
    else change nothing and return the drift. Then commit the snapshot on the run's ref."""
    done, parent = snapshot.find(root, run, idempotency_key)
    if done is not None:
        return _done(root, done, locals())
    now = snapshot.live_all(root, list(files))
    # A file already holding the edit's content is this edit's own earlier attempt (killed
    # before its outcome row), not an outside change.
    drift = {p: now[p] for p in files if now[p] != assumed.get(p) and now[p] != files[p]}
    if drift:
        return {"applied": False, "drift": {p: {"assumed": assumed.get(p), "live": drift[p]} for p in drift}}
    for path, blob in files.items():
        if now[path] is not None and now[path] != blob:
            # The content the run replaces goes into git first, so a rewind can put it back.
            snapshot.store_blob(root, (Path(root) / path).read_bytes())
    live = snapshot.ignored_of(root, list(files))
    for path, blob in files.items():
        snapshot.put(root, path, blob)
    kept = {p: b for p, b in files.items() if p not in live}
    manifest = {"run": run, "step": step, "key": idempotency_key, "decision": decided, "bytes": size}
    commit = snapshot.take(root, run, parent, kept, assumed, manifest)
    if keep:
        snapshot.compact(root, run, keep)
    return {
        "applied": True,
        "snapshot": commit,
        "after": files,
        "before": assumed,
        "bytes": size,
        "live": live,
    }


class Checkout:
    """A git work tree edited by runs, one snapshot per edit, drift checked before each act.

    `on_drift`: what a change made outside the run does to the act that finds it: "park"
    (`ReplayDiverged` is raised; uncaught, the run parks for a person) or "redecide" (`act`
    decides again on the new state; `edit` adopts it and raises `ReplayDiverged` for the
    workflow to catch and decide again). `keep`: compact the run's snapshots to the K most
    recent (and one per older decision). `lease`: hold the checkout's lease while the run
    edits it (another run is refused with `CheckoutBusy`); `worktree=True`: each run edits a
    git worktree of its own (under the repository's git dir), so runs never share files."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        on_drift: str = "park",
        keep: int | None = None,
        lease: bool = True,
        ttl: float = DEFAULT_TTL,
        worktree: bool = False,
    ) -> None:
        if on_drift not in POLICIES:
            raise ConfigError(f"Checkout(on_drift={on_drift!r}): choose one of {', '.join(POLICIES)}")
        if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 1):
            raise ConfigError(f"Checkout(keep={keep!r}): keep is a number of snapshots, 1 or more")
        self.repo = snapshot.top(path)
        self.on_drift = on_drift
        self.keep = keep
        self.lease = lease and not worktree
        self.ttl = ttl
        self.worktree = worktree

    def __repr__(self) -> str:
        return f"Checkout({self.repo!r})"

    # -- where and who ----------------------------------------------------------------------

    def root(self, ctx: Context) -> str:
        """The work tree this run edits: the checkout, or with `worktree=True` its own."""
        if not self.worktree:
            return self.repo
        return worktree_for(self.repo, ctx.run_id)

    def _state(self, ctx: Context) -> dict[str, str | None]:
        """The run's assumptions (path -> blob) for this execution, rebuilt by replay."""
        state: dict[str, str | None] = self._held(ctx)[0]
        return state

    def _held(self, ctx: Context) -> list[Any]:
        """[assumptions, the ids of the checkout's own looks, the agent's last decision]: per
        execution, rebuilt by replay like everything `ctx.held` keeps."""
        held = ctx.held(self)
        if not held:
            held.extend([{}, set(), None])
        return held

    def _observed(self, ctx: Context, decision: Decision[Any]) -> Any:
        """Note a look of the checkout's own (not a decision of the agent's) and return its value."""
        self._held(ctx)[1].add(decision.id)
        return decision.value

    def _agent_decision(self, ctx: Context) -> str | None:
        """The decision the workflow made last, the checkout's own looks and reads left out:
        what a snapshot is tagged with."""
        held = self._held(ctx)
        last = ctx._exe.last_decision
        if last is not None and last not in held[1]:
            held[2] = last
        agent: str | None = held[2]
        return agent

    def _hold(self, ctx: Context) -> None:
        """Take (or renew) the checkout's lease for this run before a live act."""
        if not self.lease or not _live(ctx):
            return
        entity = ctx.entity(lease_name(self.repo))
        if not entity.claim(ctx.run_id, self.ttl):
            view = entity.view()
            holder = view.holder or "another run"
            left = max(0.0, (view.deadline or view.read_at) - view.read_at)
            raise CheckoutBusy(
                f"checkout {self.repo} is leased by run {holder!r} ({left:.0f}s left): two runs "
                "editing one checkout overwrite each other's files. Wait for it to finish (or its "
                "lease to lapse), or give each run its own worktree: daybook.Checkout(path, worktree=True)"
            )

    def release(self, ctx: Context) -> None:
        """Give the checkout's lease back (at the end of the run's edits); else it lapses
        after `ttl` seconds."""
        if self.lease and _live(ctx):
            ctx.entity(lease_name(self.repo)).release(ctx.run_id)

    # -- looking ----------------------------------------------------------------------------

    def look(self, ctx: Context, *paths: str) -> dict[str, str | None]:
        """Record the blob each path holds now (None: absent) as what the run assumes."""
        rels = [clean(p) for p in paths]
        root = self.root(ctx)
        self._agent_decision(ctx)  # noted before the look becomes the latest decision
        seen: dict[str, str | None] = self._observed(
            ctx, ctx.decide("workspace.look", snapshot.live_all, root, rels)
        )
        self._state(ctx).update(seen)
        return seen

    def read(self, ctx: Context, path: str) -> str | None:
        """The file's text now (None: absent), recorded as its blob id (the content goes into
        git, not the journal); the run assumes the file holds it until its next act."""
        rel = clean(path)
        root = self.root(ctx)
        self._agent_decision(ctx)
        blob: str | None = self._observed(ctx, ctx.decide("workspace.read", _store_live, root, rel))
        self._state(ctx)[rel] = blob
        return None if blob is None else snapshot.read_blob(root, blob).decode()

    # -- acting -----------------------------------------------------------------------------

    def write(self, ctx: Context, path: str, content: str | bytes | None) -> dict[str, Any]:
        """Edit one file (None: remove it). See `edit`."""
        return self.edit(ctx, {path: content})

    def edit(self, ctx: Context, files: Files) -> dict[str, Any]:
        """Write `files` (path -> text or bytes, None: remove) as one effect: checked against
        what the run assumes each holds (its last look, read or edit; a path it never saw is
        looked at first), written, and snapshotted. Returns `{"applied", "snapshot", "after",
        "before", "bytes", "live"}` (`live`: ignored paths written but not snapshotted).
        Raises `ReplayDiverged` on a change made outside the run."""
        if not files:
            raise ConfigError("Checkout.edit needs at least one path to write or remove")
        root = self.root(ctx)
        data = {clean(p): None if c is None else _bytes(c) for p, c in files.items()}
        blobs = {p: None if d is None else snapshot.blob_id(d) for p, d in data.items()}
        size = sum(len(d) for d in data.values() if d is not None)
        return self._apply(ctx, root, blobs, size, data)

    def act(
        self,
        ctx: Context,
        name: str,
        paths: list[str],
        decide: Callable[[dict[str, str | None]], Files],
        *,
        attempts: int = 3,
    ) -> dict[str, Any]:
        """Decide an edit from the files' current text and make it: `decide(current)` (path ->
        text, None: absent) returns the files to write, recorded as a decision named `name`
        (blob ids in the journal, contents in git). If the files change outside the run
        between the decision and the act, `on_drift="redecide"` decides again on the new
        text (up to `attempts` times); "park" raises `ReplayDiverged`."""
        rels = [clean(p) for p in paths]
        root = self.root(ctx)
        for attempt in range(1, attempts + 1):
            chosen = ctx.decide(name, lambda: _decided(root, rels, decide)).value
            self._state(ctx).update(chosen["seen"])
            try:
                return self._apply(ctx, root, chosen["files"], int(chosen["bytes"]))
            except ReplayDiverged:
                if self.on_drift != "redecide" or attempt == attempts:
                    raise
        raise AssertionError("unreachable")  # the loop returns or raises

    def _apply(
        self,
        ctx: Context,
        root: str,
        blobs: dict[str, str | None],
        size: int,
        data: dict[str, bytes | None] | None = None,
    ) -> dict[str, Any]:
        for path in blobs:
            snapshot.inside(root, path)
        state = self._state(ctx)
        exe = ctx._exe  # the step an edit is tagged with (the journal's own)
        decided = self._agent_decision(ctx)
        unseen = [p for p in blobs if p not in state]
        if unseen:
            self.look(ctx, *unseen)
        self._hold(ctx)
        if data and _live(ctx):
            # The contents go into git before the intent row names their ids, so whichever
            # process does the edit (this one, or a resume after a kill) finds them. A replay
            # of a recorded edit needs nothing written.
            for blob, content in ((blobs[p], d) for p, d in data.items()):
                if content is not None and snapshot.store_blob(root, content) != blob:
                    raise ConfigError(
                        f"checkout {root}: git hashed a file differently from daybook (a sha256 repository?)"
                    )
        result: dict[str, Any] = ctx.effect(
            edit_files,
            root=root,
            run=ctx.run_id,
            files=blobs,
            assumed={p: state.get(p) for p in blobs},
            step=exe.next_step,
            decided=decided,
            size=size,
            keep=self.keep,
        )
        if result["applied"]:
            state.update(blobs)
            return result
        drift: dict[str, dict[str, str | None]] = result["drift"]
        assumed = {p: d["assumed"] for p, d in drift.items()}
        now = {p: d["live"] for p, d in drift.items()}
        if self.on_drift == "redecide":
            state.update(now)  # the new state is what the next decision sees
        step = exe.next_step - 1
        raise ReplayDiverged(
            f"run {ctx.run_id!r} step {step}: {', '.join(sorted(drift))} changed outside the run "
            f"since it decided (in {root}); nothing was written. Put the change back and "
            f"`daybook retry {ctx.run_id}`, or `daybook rewind {ctx.run_id} --to STEP`; or let the "
            "workflow decide again (Checkout(on_drift='redecide'))",
            step=step,
            assumed=assumed,
            live=now,
        )


def _live(ctx: Context) -> bool:
    """Whether the run's next step runs now rather than replaying a recorded one."""
    exe = ctx._exe
    return exe.next_step not in exe.steps


def _store_live(root: str, path: str) -> str | None:
    try:
        data = (Path(root) / path).read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None
    return snapshot.store_blob(root, data)


def _decided(root: str, paths: list[str], decide: Callable[[dict[str, str | None]], Files]) -> dict[str, Any]:
    """Run the workflow's decision on the files' current text; keep blob ids only."""
    seen = {p: _store_live(root, p) for p in paths}
    current = {p: None if b is None else snapshot.read_blob(root, b).decode() for p, b in seen.items()}
    files = {clean(p): c for p, c in decide(current).items()}
    blobs = {p: None if c is None else snapshot.store_blob(root, _bytes(c)) for p, c in files.items()}
    for path in files:
        seen.setdefault(path, _store_live(root, path))
    size = sum(len(_bytes(c)) for c in files.values() if c is not None)
    return {"seen": seen, "files": blobs, "bytes": size}


def lease_name(repo: str) -> str:
    """The coordination entity whose lease guards the checkout `repo`."""
    return f"checkout:{os.path.realpath(repo)}"


def worktree_for(repo: str, run_id: str) -> str:
    """The run's own git worktree of `repo` (made from HEAD the first time)."""
    common = snapshot.git(repo, "rev-parse", "--git-common-dir").decode().strip()
    base = os.path.join(repo, common) if not os.path.isabs(common) else common
    where = os.path.join(base, "daybook-worktrees", snapshot.ref_for(run_id).rsplit("/", 1)[1])
    if not os.path.isdir(where):
        try:
            snapshot.git(repo, "worktree", "add", "--detach", where, "HEAD")
        except snapshot.SnapshotError as exc:
            raise ConfigError(
                f"checkout {repo}: cannot make run {run_id!r} a worktree ({exc}); a worktree starts "
                "from HEAD, so the repository needs a first commit"
            ) from None
    return where
