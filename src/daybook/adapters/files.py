"""The `files` adapter: file writes under one root directory, staged by a run and published
together by an atomic rename on commit, undone by compensation.

It owns the scratch area `<root>/.daybook/`:

    staging/<run>/<key>            a staged file: the whole content a write will publish
    staging/<run>/<key>.partial    a staged file being written (renamed into place once whole)
    backup/<run>/<commit key>/<i>.prev | <i>.absent
                                   what entry i's target held before the commit (or that it did
                                   not exist), taken before entry i is renamed into place

`ws.write` / `ws.delete` stage (nothing visible changes); `ws.commit` publishes everything this
run staged since its last commit, in order, one `os.replace` per file; `ctx.compensate()` puts the
previous contents back and removes files the commit created. Every tool takes its whole context
(root, run, paths, content) as arguments, so any process can resume or undo from the journal.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import time
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import Any

from daybook import Absent, ConfigError, Confirmed, Context, DaybookError, ReconcileResult, tool

SCRATCH = ".daybook"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


# -- names and paths ----------------------------------------------------------------------------


def _safe(name: str) -> str:
    """A file name for a run id or key: readable, and unique through the hash (ids hold `/`)."""
    digest = hashlib.sha256(name.encode()).hexdigest()[:16]
    return f"{_UNSAFE.sub('_', name)[:80]}-{digest}"


def _clean(path: str) -> str:
    """`path` as a normalised relative POSIX path inside the root, or ConfigError."""
    if not isinstance(path, str) or not path.strip():
        raise ConfigError(f"files: path {path!r} is empty; give a path relative to the workspace root")
    pure = PurePosixPath(path.replace(os.sep, "/"))
    if pure.is_absolute() or os.path.isabs(path) or re.match(r"^[A-Za-z]:", path):
        raise ConfigError(f"files: path {path!r} is absolute; give a path relative to the workspace root")
    parts = [p for p in pure.parts if p not in ("", ".")]
    if not parts or ".." in parts:
        raise ConfigError(
            f"files: path {path!r} leaves the workspace root (it uses '..' or names the root "
            "itself); give a path to a file below the root"
        )
    if parts[0] == SCRATCH:
        raise ConfigError(
            f"files: path {path!r} is inside {SCRATCH}/, the adapter's scratch area; choose another path"
        )
    return "/".join(parts)


def _base(root: str) -> Path:
    base = Path(root)
    if not base.is_absolute() or not base.is_dir():
        raise ConfigError(f"files: root {root!r} is not an existing directory given by absolute path")
    return base


def _target(base: Path, rel: str) -> Path:
    target = base / _clean(rel)
    # A symlinked directory on the way could point anywhere; the file must land under the root.
    real = os.path.realpath(target.parent)
    home = os.path.realpath(base)
    if real != home and not real.startswith(home + os.sep):
        raise ConfigError(
            f"files: path {rel!r} resolves to {real}, outside the workspace root {home} (a "
            "symlink on the way); write below the root only"
        )
    return target


def _staging(base: Path, run: str) -> Path:
    return base / SCRATCH / "staging" / _safe(run)


def _backups(base: Path, run: str, key: str) -> Path:
    return base / SCRATCH / "backup" / _safe(run) / _safe(key)


# -- durable file primitives --------------------------------------------------------------------


def _sha(path: Path) -> str | None:
    """sha256 of a file's bytes, None if it does not exist."""
    try:
        with open(path, "rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()
    except FileNotFoundError:
        return None


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_whole(path: Path, data: bytes) -> None:
    """`path` holds `data` or is untouched: a fixed temp name (so a re-run overwrites its own
    leftover instead of orphaning it), fsync, rename, fsync the directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    with open(partial, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(partial, path)
    _fsync_dir(path.parent)


def _copy_whole(src: Path, dst: Path) -> None:
    partial = dst.with_name(dst.name + ".partial")
    shutil.copyfile(src, partial)
    shutil.copymode(src, partial)
    with open(partial, "rb") as f:
        os.fsync(f.fileno())
    os.replace(partial, dst)
    _fsync_dir(dst.parent)


def _prune(path: Path, stop: Path) -> None:
    """Remove `path` and its parents up to `stop` (exclusive) while they are empty."""
    while path != stop and stop in path.parents:
        try:
            path.rmdir()
        except OSError:
            return
        path = path.parent


# -- staging ------------------------------------------------------------------------------------


def _staged_result(base: Path, path: str, staged: Path, sha: str, size: int) -> dict[str, Any]:
    return {
        "path": path,
        "op": "write",
        "staged": staged.relative_to(base).as_posix(),
        "sha256": sha,
        "bytes": size,
    }


def _write_status(key: str, args: dict[str, Any]) -> ReconcileResult:
    base = _base(args["root"])
    data = str(args["content"]).encode()
    staged = _staging(base, args["run"]) / _safe(key)
    sha = hashlib.sha256(data).hexdigest()
    if _sha(staged) == sha:
        return Confirmed(_staged_result(base, _clean(args["path"]), staged, sha, len(data)), ref=sha)
    # Not staged (or a stale copy): staging again under the same key overwrites it.
    return Absent()


@tool(name="files.unstage", idempotent=True, irreversible=False, effect_class="idempotent")
def unstage(*, original: dict[str, Any], result: dict[str, Any], idempotency_key: str) -> dict[str, Any]:
    """Undo a staged write: drop the staged file if the commit did not already consume it."""
    base = _base(original["root"])
    staged = result.get("staged")
    if not staged:
        return {"removed": False}
    path = base / staged
    removed = path.exists()
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    if removed:
        _fsync_dir(path.parent)
    _prune(path.parent, base / SCRATCH)
    return {"removed": removed}


@tool(
    name="files.write",
    scopes="fs:{root}/{path}",
    idempotent=True,
    status=_write_status,
    inverse=unstage,
    reference=lambda r: r["sha256"],
    effect_class="compensable",
    bufferable=True,
    # Inside ctx.transaction staging a file is invisible already: it runs now, and its inverse
    # removes the staged file on abort (publishing, `files.commit`, is what is deferred).
    in_transaction="now",
    certain=(DaybookError,),  # refused before any file changed
)
def write(*, root: str, run: str, path: str, content: str, idempotency_key: str) -> dict[str, Any]:
    """Stage `content` for `path` under the run's staging directory; nothing visible changes."""
    base = _base(root)
    rel = _clean(path)
    _target(base, rel)
    data = content.encode()
    staged = _staging(base, run) / _safe(idempotency_key)
    _write_whole(staged, data)
    return _staged_result(base, rel, staged, hashlib.sha256(data).hexdigest(), len(data))


@tool(
    name="files.delete",
    scopes="fs:{root}/{path}",
    idempotent=True,
    inverse=unstage,
    effect_class="compensable",
    bufferable=True,
    in_transaction="now",  # as `files.write`: only stages
)
def delete(*, root: str, run: str, path: str, idempotency_key: str) -> dict[str, Any]:
    """Stage the removal of `path` (it is removed at commit; nothing is written now)."""
    base = _base(root)
    rel = _clean(path)
    _target(base, rel)
    return {"path": rel, "op": "delete"}


# -- commit and restore -------------------------------------------------------------------------


def _collapse(entries: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The entries to publish (the last one for each path, in the order of those last touches)
    and the ones they supersede (staged, never published)."""
    last = {str(e["path"]): i for i, e in enumerate(entries)}
    final = [e for i, e in enumerate(entries) if last[str(e["path"])] == i]
    superseded = [e for i, e in enumerate(entries) if last[str(e["path"])] != i]
    return final, superseded


def _backup_state(backups: Path, i: int) -> tuple[bool, str | None]:
    """(taken, sha256 of the previous content or None if the target did not exist)."""
    prev = backups / f"{i}.prev"
    if prev.exists():
        return True, _sha(prev)
    return (backups / f"{i}.absent").exists(), None


def _take_backup(backups: Path, i: int, target: Path) -> None:
    # Taken once: after entry i's rename the target holds the new content, and a re-run must
    # keep the copy made before it.
    if _backup_state(backups, i)[0]:
        return
    if target.is_file():
        _copy_whole(target, backups / f"{i}.prev")
    else:
        _write_whole(backups / f"{i}.absent", b"")


def _applied(base: Path, entry: dict[str, Any]) -> bool:
    target = base / str(entry["path"])
    if entry["op"] == "delete":
        return not target.exists()
    return not (base / str(entry["staged"])).exists() and _sha(target) == entry["sha256"]


def _commit_result(base: Path, backups: Path, final: list[dict[str, Any]]) -> dict[str, Any]:
    published = []
    for i, entry in enumerate(final):
        published.append(
            {
                "path": entry["path"],
                "op": entry["op"],
                "sha256": entry.get("sha256"),
                "previous": _backup_state(backups, i)[1],
            }
        )
    return {"published": published, "backup": backups.relative_to(base).as_posix()}


def _commit_status(key: str, args: dict[str, Any]) -> ReconcileResult:
    base = _base(args["root"])
    backups = _backups(base, args["run"], key)
    final, superseded = _collapse(list(args["entries"]))
    published = all(_backup_state(backups, i)[0] and _applied(base, e) for i, e in enumerate(final))
    dropped = not any((base / str(e["staged"])).exists() for e in superseded if e["op"] == "write")
    if published and dropped:
        result = _commit_result(base, backups, final)
        return Confirmed(result, ref=result["backup"])
    # Not started, or stopped half-way: committing again under the same key finishes it.
    return Absent()


@tool(name="files.restore", idempotent=True, irreversible=False, effect_class="idempotent")
def restore(*, original: dict[str, Any], result: dict[str, Any], idempotency_key: str) -> dict[str, Any]:
    """Undo a commit: put back each file's previous content, remove the files it created, newest
    first. Refuses (and changes nothing more) where a file was changed after the commit."""
    base = _base(original["root"])
    backups = base / str(result["backup"])
    published = list(result["published"])
    restored = []
    for i in reversed(range(len(published))):
        item = published[i]
        target = _target(base, str(item["path"]))
        now, before = _sha(target), item["previous"]
        if now == before:
            continue  # restored already (a re-run after a crash), or the commit changed nothing
        if now != item["sha256"]:
            raise DaybookError(
                f"files.restore: {item['path']} was changed after the commit (it holds sha256 "
                f"{now}, neither what the commit wrote nor what was there before), so it is left "
                f"as it is; its previous content is in {backups / f'{i}.prev'} if it existed. "
                "Settle it by hand, then `daybook resolve` this step"
            )
        if before is None:
            target.unlink()
        else:
            os.replace(backups / f"{i}.prev", target)
        _fsync_dir(target.parent)
        restored.append(item["path"])
    shutil.rmtree(backups, ignore_errors=True)
    _prune(backups.parent, base / SCRATCH)
    return {"restored": restored[::-1]}


@tool(
    name="files.commit",
    scopes=lambda root, entries, **_: [f"fs:{root}/{e['path']}" for e in entries],
    idempotent=True,
    status=_commit_status,
    inverse=restore,
    reference=lambda r: r["backup"],
    effect_class="compensable",
    # Publishing: inside ctx.transaction it is deferred to the transaction's commit.
    in_transaction="buffered",
    certain=(DaybookError,),  # refused before any file changed
)
def commit(*, root: str, run: str, entries: list[dict[str, Any]], idempotency_key: str) -> dict[str, Any]:
    """Publish staged entries in order: back up each target, then rename the staged file over it
    (or remove it, for a delete). Safe to re-run after a crash anywhere: a backup is taken once,
    and a rename already done shows as the staged file gone and the target holding its sha256."""
    base = _base(root)
    backups = _backups(base, run, idempotency_key)
    final, superseded = _collapse(list(entries))
    targets = [_target(base, str(e["path"])) for e in final]
    # All or nothing: a staged file that is gone (swept) and not already published by this
    # commit stops it before any file changes.
    for i, entry in enumerate(final):
        gone = entry["op"] == "write" and not (base / str(entry["staged"])).exists()
        if gone and not (_backup_state(backups, i)[0] and _sha(targets[i]) == entry["sha256"]):
            raise DaybookError(
                f"files.commit: the staged file {entry['staged']} for {entry['path']} is gone: "
                "it was swept or removed before the commit, so nothing was published. Write "
                "the files again in a new run, and sweep only runs that are gone"
            )
    backups.mkdir(parents=True, exist_ok=True)
    for entry in superseded:
        if entry["op"] == "write":
            with contextlib.suppress(FileNotFoundError):
                (base / str(entry["staged"])).unlink()
    for i, (entry, target) in enumerate(zip(final, targets, strict=True)):
        _take_backup(backups, i, target)
        if entry["op"] == "delete":
            if target.exists():
                target.unlink()
                _fsync_dir(target.parent)
            continue
        staged = base / str(entry["staged"])
        if staged.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_file():
                shutil.copymode(target, staged)  # a rewritten file keeps its permissions
            os.replace(staged, target)
            _fsync_dir(target.parent)
    _prune(_staging(base, run), base / SCRATCH)
    return _commit_result(base, backups, final)


# -- the workspace --------------------------------------------------------------------------------


def _read(root: str, path: str, pending: dict[str, Any] | None) -> str | None:
    base = _base(root)
    if pending is not None:
        if pending["op"] == "delete":
            return None
        return (base / str(pending["staged"])).read_bytes().decode()
    target = _target(base, path)
    try:
        return target.read_bytes().decode()
    except FileNotFoundError:
        return None


class Workspace:
    """Files under `root` (an existing directory), written by runs through staging and commit.

    A Workspace may be shared by runs: what each run has staged is kept per execution of the run
    (its `ctx`), and a resumed run rebuilds it from its replayed writes, so the commit's
    arguments are the same on every replay."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        path = os.path.abspath(os.fspath(root))
        if not os.path.isdir(path):
            raise ConfigError(f"files: workspace root {path!r} is not a directory; create it first")
        self.root = path

    def write(self, ctx: Context, path: str, content: str) -> dict[str, Any]:
        """Stage `content` for `path` (relative to the root). Not visible until `commit`.
        Returns `{"path", "op", "staged", "sha256", "bytes"}`."""
        if not isinstance(content, str):
            raise ConfigError(f"files: content for {path!r} must be str, got {type(content).__name__}")
        result: dict[str, Any] = ctx.effect(
            write, root=self.root, run=ctx.run_id, path=_clean(path), content=content
        )
        ctx.held(self).append(result)
        return result

    def delete(self, ctx: Context, path: str) -> dict[str, Any]:
        """Stage the removal of `path`; it disappears at `commit` (a missing file is fine)."""
        result: dict[str, Any] = ctx.effect(delete, root=self.root, run=ctx.run_id, path=_clean(path))
        ctx.held(self).append(result)
        return result

    def commit(self, ctx: Context) -> dict[str, Any]:
        """Publish everything this run staged since its last commit, in order, as one effect.
        Returns `{"published": [{"path", "op", "sha256", "previous"}], "backup"}`; `previous` is
        the sha256 the file had before (None: it did not exist)."""
        entries = [
            {k: e[k] for k in ("path", "op", "staged", "sha256") if k in e} for e in ctx.held(self, take=True)
        ]
        result: dict[str, Any] = ctx.effect(commit, root=self.root, run=ctx.run_id, entries=entries)
        return result

    def read(self, ctx: Context, path: str) -> str | None:
        """The content of `path` as this run sees it (its own staged write or delete since the
        last commit, else the file), None if absent; recorded, so replay sees the same."""
        rel = _clean(path)
        pending = None
        for entry in ctx.held(self):
            if entry["path"] == rel:
                pending = {k: entry[k] for k in ("op", "staged") if k in entry}
        value: str | None = ctx.decide("files.read", _read, self.root, rel, pending).value
        return value

    def sweep(
        self, *, runs: Iterable[str] = (), older_than: float | None = None, backups: bool = False
    ) -> list[str]:
        """Remove staging leftovers (files a run staged and never committed, and half-written
        `.partial` files) of the `runs` named, and of any run when older than `older_than`
        seconds. Only for runs that are gone: a live run's commit needs its staged files.
        `backups=True` also removes those runs' commit backups, after which their commits can no
        longer be compensated. Returns the removed paths, relative to the root."""
        if older_than is None and not runs:
            raise ConfigError("files: sweep() needs runs=[...] (runs that are gone) or older_than=SECONDS")
        base = Path(self.root)
        scratch = base / SCRATCH
        named = {_safe(r) for r in runs}
        cutoff = None if older_than is None else time.time() - older_than
        removed: list[str] = []
        areas = [scratch / "staging"] + ([scratch / "backup"] if backups else [])
        for area in areas:
            if not area.is_dir():
                continue
            for run_dir in sorted(p for p in area.iterdir() if p.is_dir()):
                for path in sorted(p for p in run_dir.rglob("*") if p.is_file()):
                    if run_dir.name in named or (cutoff is not None and path.stat().st_mtime < cutoff):
                        with contextlib.suppress(FileNotFoundError):
                            path.unlink()
                        removed.append(path.relative_to(base).as_posix())
                for sub in sorted((p for p in run_dir.rglob("*") if p.is_dir()), reverse=True):
                    _prune(sub, area)
                _prune(run_dir, area)
        return removed
