"""Snapshots: a run's workspace states, kept as commits on the run's hidden git ref.

This module owns the git side of a checkout: the blob id of a live file, file contents written
as git objects (never into the journal, which holds their ids), one snapshot commit per edit on
`refs/daybook/runs/<run>` (its reflog a second journal of every move: each edit, each rewind,
each compaction), and putting a snapshot's files back. A snapshot's tree holds the present
files among those the run has touched, as they were after that edit; its message holds the
manifest (JSON): the step and key of the edit, its decision, the journal seq it follows, the
bytes it touched, and for each touched path the blob it had before the run first touched it
(None: absent), so a rewind can also put back what the run created or deleted. Blobs, trees
and commits are content-addressed: a snapshot costs the bytes its edit touched.

Files are plain (mode 100644); symlinks and executable bits are not snapshotted.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import subprocess
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from ..errors import ConfigError, DaybookError

REF_PREFIX = "refs/daybook/runs/"
RECENT = 8
SUBJECT = "daybook snapshot"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
# Inherited from a parent git process (a hook), these would point git at another repository.
_FOREIGN_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_NAMESPACE", "GIT_PREFIX")
_WHO = {
    "GIT_AUTHOR_NAME": "daybook",
    "GIT_AUTHOR_EMAIL": "daybook@localhost",
    "GIT_COMMITTER_NAME": "daybook",
    "GIT_COMMITTER_EMAIL": "daybook@localhost",
}


class SnapshotError(DaybookError):
    """git refused or could not do what a snapshot needed; the message carries git's words."""


def git(root: str, *args: str, stdin: bytes | None = None, index: str | None = None) -> bytes:
    """Run `git -C root ARGS` and return its stdout, or raise SnapshotError with its stderr."""
    env = {k: v for k, v in os.environ.items() if k not in _FOREIGN_ENV}
    env.update(_WHO, GIT_LITERAL_PATHSPECS="1")
    if index is not None:
        env["GIT_INDEX_FILE"] = index
    try:
        proc = subprocess.run(
            ["git", "-C", root, *args], input=stdin, capture_output=True, env=env, check=False
        )
    except FileNotFoundError:
        raise ConfigError(
            "workspace snapshots need the `git` command; install git or put it on PATH"
        ) from None
    if proc.returncode != 0:
        raise SnapshotError(
            f"`git {' '.join(args[:3])}` in {root} failed (exit {proc.returncode}): "
            f"{proc.stderr.decode(errors='replace').strip()}"
        )
    return proc.stdout


def top(path: str | os.PathLike[str]) -> str:
    """The work tree top of the git checkout at `path`, or ConfigError saying how to make one."""
    where = os.path.abspath(os.fspath(path))
    if not os.path.isdir(where):
        raise ConfigError(f"checkout {where!r} is not a directory; create it and `git init` it first")
    try:
        out = git(where, "rev-parse", "--show-toplevel")
    except SnapshotError:
        raise ConfigError(
            f"{where!r} is not inside a git work tree: a checkout's snapshots are git objects; "
            f"run `git init {where}` first"
        ) from None
    return out.decode().strip()


def ref_for(run_id: str) -> str:
    """The run's hidden ref: readable, and unique through the hash (run ids may hold `/`)."""
    digest = hashlib.sha256(run_id.encode()).hexdigest()[:12]
    return f"{REF_PREFIX}{_UNSAFE.sub('_', run_id)[:60].strip('.')}-{digest}"


def clean(path: str) -> str:
    """`path` as a normalised relative POSIX path inside the checkout, or ConfigError."""
    if not isinstance(path, str) or not path.strip():
        raise ConfigError(f"checkout path {path!r} is empty; give a path relative to the checkout")
    pure = PurePosixPath(path.replace(os.sep, "/"))
    parts = [p for p in pure.parts if p not in ("", ".")]
    if pure.is_absolute() or not parts or ".." in parts or parts[0] == ".git":
        raise ConfigError(
            f"checkout path {path!r} is not a file below the checkout (absolute, '..', or inside "
            ".git); give a path relative to the checkout"
        )
    return "/".join(parts)


def inside(root: str, path: str) -> str:
    """`path` (already `clean`) if it lands inside the checkout; a symlinked directory on the way
    could point anywhere, so the real path of its folder must be under the real root."""
    home = os.path.realpath(root)
    real = os.path.realpath(os.path.join(root, os.path.dirname(path)))
    if real != home and not real.startswith(home + os.sep):
        raise ConfigError(
            f"checkout path {path!r} resolves to {real}, outside the checkout {home} (a symlink on "
            "the way); edit files below the checkout only"
        )
    return path


def blob_id(data: bytes) -> str:
    """The git blob id of `data` (what `git hash-object` prints, with no filters)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def live(root: str, path: str) -> str | None:
    """The blob id of the file at `path` now, None if it does not exist."""
    try:
        data = (Path(root) / path).read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None
    return blob_id(data)


def live_all(root: str, paths: list[str]) -> dict[str, str | None]:
    return {p: live(root, p) for p in paths}


_OBJECTS: dict[str, Path] = {}


def _objects(root: str) -> Path:
    """The repository's object directory (asked of git once per checkout and process)."""
    objects = _OBJECTS.get(root)
    if objects is None:
        found = git(root, "rev-parse", "--git-path", "objects").decode().strip()
        objects = _OBJECTS[root] = Path(root, found) if not os.path.isabs(found) else Path(found)
    return objects


def store_blob(root: str, data: bytes) -> str:
    """Write `data` as a loose git object of the checkout's repository and return its id: the
    object git itself would write (zlib of `blob <size>\\0<data>`, renamed into place whole),
    without a `git` process per file."""
    blob = blob_id(data)
    target = _objects(root) / blob[:2] / blob[2:]
    if target.exists():
        return blob
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix="tmp_obj_")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(zlib.compress(b"blob %d\0" % len(data) + data))
        os.chmod(tmp, 0o444)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return blob


def read_blob(root: str, blob: str) -> bytes:
    """The content of `blob`: read from its loose object when there is one (the objects daybook
    writes are), else through `git cat-file` (packed by a `git gc` since)."""
    loose = _objects(root) / blob[:2] / blob[2:]
    try:
        raw = zlib.decompress(loose.read_bytes())
    except (FileNotFoundError, zlib.error):
        return git(root, "cat-file", "blob", blob)
    header, _, data = raw.partition(b"\0")
    if header != b"blob %d" % len(data) or blob_id(data) != blob:
        return git(root, "cat-file", "blob", blob)
    return data


def put(root: str, path: str, blob: str | None) -> None:
    """Make the file at `path` hold `blob` (None: absent), atomically (a temporary file renamed
    into place), so a kill leaves the old content or the new, never half a file."""
    target = Path(root) / path
    if blob is None:
        with contextlib.suppress(FileNotFoundError):
            target.unlink()
        return
    if live(root, path) == blob:
        return
    data = read_blob(root, blob)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".daybook")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def ignored(root: str) -> list[str]:
    """The untracked-and-ignored paths of the checkout (dependencies, `.env`, build output, a
    local database): live state, never snapshotted nor restored."""
    out = git(root, "ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory")
    return sorted(p for p in out.decode().split("\0") if p)


def ignored_of(root: str, paths: list[str]) -> list[str]:
    """Which of `paths` git ignores (one `git check-ignore` for all of them)."""
    if not paths:
        return []
    env = {k: v for k, v in os.environ.items() if k not in _FOREIGN_ENV}
    stdin = "".join(f"{p}\0" for p in paths).encode()
    proc = subprocess.run(
        ["git", "-C", root, "check-ignore", "-z", "--stdin"],
        input=stdin,
        capture_output=True,
        env=env,
        check=False,
    )
    if proc.returncode not in (0, 1):  # 1: none of them is ignored
        raise SnapshotError(
            f"`git check-ignore` in {root} failed: {proc.stderr.decode(errors='replace').strip()}"
        )
    hits = set(proc.stdout.decode().split("\0"))
    return [p for p in paths if p in hits]


@dataclass(frozen=True)
class Snapshot:
    """One snapshot commit and its manifest."""

    commit: str
    step: int
    key: str
    decision: str | None
    seq: int | None
    bytes: int
    touched: dict[str, str | None]  # path -> blob before the run first touched it (None: absent)
    files: dict[str, str] = field(default_factory=dict)  # present touched path -> blob after
    at: float = 0.0  # when it was taken (epoch seconds)

    def after(self, path: str) -> str | None:
        return self.files.get(path)


def take(
    root: str,
    run_id: str,
    parent: str | None,
    changes: dict[str, str | None],
    before: dict[str, str | None],
    manifest: dict[str, Any],
) -> str:
    """Commit the snapshot after an edit (`changes`: path -> blob, None for removed) on top of
    `parent` (the run's previous snapshot), record it on the run's ref (with a reflog entry),
    and return its id. `before`: each changed path's blob before this edit, kept for the paths
    the run touches for the first time."""
    if parent is None:
        parent = _base(root, run_id)
    touched: dict[str, str | None] = dict(_manifest(root, parent).get("touched") or {})
    for path in changes:
        touched.setdefault(path, before.get(path))
    body = dict(manifest, touched=touched, at=time.time())
    fd, index = tempfile.mkstemp(prefix="daybook-index-")
    os.close(fd)
    os.unlink(index)  # git wants to create the index itself
    try:
        if parent:
            git(root, "read-tree", f"{parent}^{{tree}}", index=index)
        else:
            git(root, "read-tree", "--empty", index=index)
        lines = []
        for path, blob in changes.items():
            lines.append(f"0 {'0' * 40}\t{path}" if blob is None else f"100644 {blob}\t{path}")
        git(root, "update-index", "--index-info", stdin=("\n".join(lines) + "\n").encode(), index=index)
        tree = git(root, "write-tree", index=index).decode().strip()
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(index)
    message = f"{SUBJECT} {manifest.get('key')}\n\n{json.dumps(body, sort_keys=True)}\n"
    commit = git(root, "commit-tree", tree, "-p", parent, "-F", "-", stdin=message.encode()).decode().strip()
    what = "undo of the edit at" if manifest.get("undoes") else "edit"
    move(root, run_id, commit, f"{what} step {manifest.get('step')} key {manifest.get('key')}")
    return commit


def _base(root: str, run_id: str) -> str:
    """The run's first snapshot, step 0: no file touched yet (what `rewind --to 0` restores)."""
    empty = git(root, "mktree", stdin=b"").decode().strip()
    fields = {
        "run": run_id,
        "step": 0,
        "key": "",
        "decision": None,
        "bytes": 0,
        "touched": {},
        "at": time.time(),
    }
    body = json.dumps(fields)
    message = f"{SUBJECT} base\n\n{body}\n"
    return git(root, "commit-tree", empty, "-F", "-", stdin=message.encode()).decode().strip()


def move(root: str, run_id: str, commit: str, why: str) -> None:
    """Point the run's ref at `commit`, with `why` in its reflog."""
    git(root, "update-ref", "--create-reflog", "-m", f"daybook: {why}", ref_for(run_id), commit)


def _manifest(root: str, commit: str) -> dict[str, Any]:
    raw = git(root, "cat-file", "commit", commit).decode()
    body = raw.split("\n\n", 1)[1].split("\n", 2)
    manifest: dict[str, Any] = json.loads(body[2] if len(body) > 2 else "{}")
    return manifest


def read(root: str, commit: str) -> Snapshot:
    """The snapshot `commit`: its manifest and its files."""
    manifest = _manifest(root, commit)
    listing = git(root, "ls-tree", "-r", "-z", commit).decode()
    files: dict[str, str] = {}
    for entry in listing.split("\0"):
        if entry:
            meta, path = entry.split("\t", 1)
            files[path] = meta.split()[2]
    return Snapshot(
        commit=commit,
        step=int(manifest.get("step") or 0),
        key=str(manifest.get("key") or ""),
        decision=manifest.get("decision"),
        seq=manifest.get("seq"),
        bytes=int(manifest.get("bytes") or 0),
        touched={str(k): v for k, v in (manifest.get("touched") or {}).items()},
        files=files,
        at=float(manifest.get("at") or 0.0),
    )


def tip(root: str, run_id: str) -> str | None:
    """The commit the run's ref points at, None if the run has no snapshot here."""
    try:
        return git(root, "rev-parse", "--verify", "-q", ref_for(run_id)).decode().strip() or None
    except SnapshotError:
        return None


def chain(root: str, run_id: str) -> list[str]:
    """The run's snapshot commits, oldest first (the ref's first-parent history)."""
    head = tip(root, run_id)
    if head is None:
        return []
    out = git(root, "rev-list", "--first-parent", "--reverse", head).decode()
    return out.split()


def find(root: str, run_id: str, key: str) -> tuple[str | None, str | None]:
    """(the snapshot an edit under `key` made, if it made one; the ref's tip), in one git call:
    an edit's status after a kill between the edit and its outcome row, and the parent of the
    snapshot it is about to take. A run's edits are steps, one after another, so an edit that
    made its snapshot and was killed before its outcome row left it at the tip: only the
    `RECENT` newest are searched (a constant cost however long the run)."""
    env = {k: v for k, v in os.environ.items() if k not in _FOREIGN_ENV}
    proc = subprocess.run(
        ["git", "-C", root, "log", "--first-parent", f"-{RECENT}", "--format=%H %s", ref_for(run_id), "--"],
        capture_output=True,
        env=env,
        check=False,
    )
    if proc.returncode != 0:  # no ref yet: the run has no snapshot here
        return None, None
    lines = proc.stdout.decode().splitlines()
    wanted = f"{SUBJECT} {key}"
    for line in lines:
        commit, _, subject = line.partition(" ")
        if subject == wanted:
            return commit, lines[0].split(" ", 1)[0]
    return None, lines[0].split(" ", 1)[0] if lines else None


def reflog(root: str, run_id: str) -> list[str]:
    """The run ref's reflog, newest first: every edit, rewind and compaction, in git's words."""
    try:
        out = git(root, "reflog", "show", "--format=%H %gs", ref_for(run_id))
    except SnapshotError:
        return []
    return out.decode().splitlines()


def compact(root: str, run_id: str, keep: int) -> list[str]:
    """Keep the `keep` most recent snapshots fine, and of the older ones only the last of each
    decision (a decision boundary): the kept commits are chained anew (same trees and
    manifests) and the ref moves to the new chain; the reflog still names the old one. Returns
    the new chain, oldest first."""
    old = chain(root, run_id)
    if keep < 1 or len(old) <= keep:
        return old
    snaps = [read(root, c) for c in old]
    head, recent = snaps[:-keep], snaps[-keep:]
    kept = [s for i, s in enumerate(head) if i + 1 == len(head) or head[i + 1].decision != s.decision]
    if len(kept) == len(head):
        return old
    parent: str | None = None
    new: list[str] = []
    for snap in [*kept, *recent]:
        raw = git(root, "cat-file", "commit", snap.commit).decode()
        message = raw.split("\n\n", 1)[1]
        args = ["commit-tree", f"{snap.commit}^{{tree}}", *(["-p", parent] if parent else []), "-F", "-"]
        parent = git(root, *args, stdin=message.encode()).decode().strip()
        new.append(parent)
    assert parent is not None
    move(root, run_id, parent, f"compact: kept {len(kept)} of {len(head)} older snapshots and {keep} recent")
    return new
