"""The git adapter: commits on a working branch as journaled effects, undone by revert commits.

This module owns the tools `git.commit` and `git.revert` and `Repo`, the handle a workflow uses to
call them. A commit is built with git plumbing (objects, a private index file, `commit-tree`) and
published by one compare-and-swap of the branch ref, so the user's checkout, index and HEAD are
never touched and a crash leaves either no commit on the branch or the whole commit. The run's
idempotency key travels in the commit message as a `Daybook-Key: <key>` trailer: the branch
history is the counterparty's own record, searched by key to answer status queries and to make a
second call under one key return the first commit instead of making another.
"""

from __future__ import annotations

import os
import posixpath
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from daybook import Absent, ConfigError, Confirmed, Context, DaybookError, Decision, ReconcileResult, tool

DEFAULT_BRANCH = "daybook/work"
KEY_TRAILER = "Daybook-Key"
REVERTS_TRAILER = "Daybook-Reverts"
DEFAULT_AUTHOR = ("daybook", "daybook@localhost")

# Another writer moving the branch between our read of its tip and our swap makes us rebuild on
# the new tip; this many lost races in a row means something is hammering the branch.
_CAS_ATTEMPTS = 8
# Inherited from a parent git process (a hook, `git rebase -x`), these would point every command
# at some other repository or index than the one the args name.
_FOREIGN_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_NAMESPACE", "GIT_PREFIX")
_FIELD = "\x1f"


class GitError(DaybookError):
    """git refused or could not do what was asked; the message carries git's own words."""


@dataclass(frozen=True)
class _Who:
    name: str
    email: str


def _env(who: _Who | None, index: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _FOREIGN_ENV}
    if who is not None:
        # Set here so commits never depend on (or fail for lack of) the user's git config.
        env.update(
            GIT_AUTHOR_NAME=who.name,
            GIT_AUTHOR_EMAIL=who.email,
            GIT_COMMITTER_NAME=who.name,
            GIT_COMMITTER_EMAIL=who.email,
        )
    if index is not None:
        env["GIT_INDEX_FILE"] = index
    # Paths are names, never patterns: 'notes[1].md' must not match 'notes1.md'.
    env["GIT_LITERAL_PATHSPECS"] = "1"
    return env


def _git(
    repo: str,
    *args: str,
    stdin: bytes | None = None,
    who: _Who | None = None,
    index: str | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[bytes]:
    try:
        proc = subprocess.run(
            ["git", "-C", repo, *args],
            input=stdin,
            capture_output=True,
            env=_env(who, index),
            check=False,
        )
    except FileNotFoundError:
        raise ConfigError("the git adapter needs the `git` command; install git or put it on PATH") from None
    if check and proc.returncode != 0:
        raise GitError(
            f"`git {' '.join(args)}` in {repo} failed (exit {proc.returncode}): "
            f"{proc.stderr.decode(errors='replace').strip()}"
        )
    return proc


def _out(
    repo: str, *args: str, stdin: bytes | None = None, who: _Who | None = None, index: str | None = None
) -> str:
    return _git(repo, *args, stdin=stdin, who=who, index=index).stdout.decode().strip()


# -- validation -------------------------------------------------------------------------------


def _locate(path: str | os.PathLike[str]) -> str:
    """The absolute path every later command runs in: the worktree top, or the bare git dir."""
    where = os.path.abspath(os.fspath(path))
    if not os.path.isdir(where):
        raise ConfigError(f"git repository {where!r} does not exist; create it with `git init` first")
    proc = _git(where, "rev-parse", "--is-bare-repository", "--absolute-git-dir", check=False)
    if proc.returncode != 0:
        raise ConfigError(f"{where!r} is not inside a git repository; point Repo at one (or `git init` it)")
    bare, git_dir = proc.stdout.decode().splitlines()[:2]
    if bare == "true":
        return git_dir
    return _out(where, "rev-parse", "--show-toplevel")


def _check_branch(repo: str, branch: str) -> None:
    if not isinstance(branch, str) or not branch:
        raise ConfigError("a git branch name must be a non-empty string, e.g. 'daybook/work'")
    valid = _git(repo, "check-ref-format", "--branch", branch, check=False).returncode == 0
    if not valid or branch.startswith("-"):
        raise ConfigError(f"{branch!r} is not a valid git branch name; see `git check-ref-format --help`")
    # Moving a checked-out branch's ref would leave that worktree showing the commit reversed as
    # uncommitted changes: git itself refuses this for pushes (receive.denyCurrentBranch).
    listing = _out(repo, "worktree", "list", "--porcelain")
    for line in listing.splitlines():
        if line == f"branch refs/heads/{branch}":
            raise ConfigError(
                f"branch {branch!r} is checked out in a worktree of {repo}; daybook commits to it "
                "without touching any checkout, so check out another branch there or give Repo "
                "another branch name"
            )


def _check_key(key: str) -> None:
    # git strips and splits trailer values: a key that does not survive that round trip could
    # never be found again, and every retry would make another commit.
    if not isinstance(key, str) or not key or key != key.strip() or "\n" in key or "\r" in key:
        raise ConfigError(
            f"idempotency key {key!r} cannot be a git trailer: use a non-empty single line "
            "without leading or trailing spaces"
        )


def _check_path(path: str) -> str:
    if not isinstance(path, str) or not path or "\0" in path:
        raise ConfigError(f"file path {path!r}: give a non-empty path relative to the repository root")
    parts = path.split("/")
    if path.startswith("/") or posixpath.normpath(path) != path or ".." in parts:
        raise ConfigError(
            f"file path {path!r} is not inside the repository: give a normalized path relative to "
            "its root, like 'docs/notes.md' (no leading '/', no '..', no '.' or empty parts)"
        )
    if any(p.lower() == ".git" for p in parts):
        raise ConfigError(f"file path {path!r} is inside .git; daybook commits only tracked content")
    return path


def _check_files(files: Any) -> dict[str, str | None]:
    if not isinstance(files, Mapping) or not files:
        raise ConfigError("files must be a non-empty dict of path -> text (None deletes the path)")
    checked: dict[str, str | None] = {}
    for path, text in files.items():
        if text is not None and not isinstance(text, str):
            raise ConfigError(f"file {path!r}: content must be text (str) or None to delete it")
        checked[_check_path(path)] = text
    return checked


def _check_message(message: Any) -> str:
    # The first paragraph is the subject, never a trailer block: without one the key is lost.
    if not isinstance(message, str) or not message.strip():
        raise ConfigError("a commit message must be non-empty text")
    return message.rstrip()


# -- reading the branch -----------------------------------------------------------------------


def _resolve(repo: str, rev: str) -> str | None:
    proc = _git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", check=False)
    if proc.returncode != 0:
        return None
    return proc.stdout.decode().strip() or None


def _find(repo: str, branch: str, key: str) -> dict[str, Any] | None:
    """The commit on `branch` whose trailer carries exactly `key`, as the tool's result."""
    ref = f"refs/heads/{branch}"
    if _resolve(repo, ref) is None:
        return None
    fmt = _FIELD.join(
        [
            "%H",
            "%P",
            f"%(trailers:key={KEY_TRAILER},valueonly)",
            f"%(trailers:key={REVERTS_TRAILER},valueonly)",
        ]
    )
    # --grep narrows the walk cheaply; the exact match on the parsed trailer rules out keys that
    # merely contain this one ('run/1' inside 'run/12').
    out = _git(
        repo,
        "log",
        "--no-show-signature",
        "-z",
        f"--format={fmt}",
        "--fixed-strings",
        f"--grep={KEY_TRAILER}: {key}",
        ref,
        "--",
    ).stdout.decode()
    for record in filter(None, out.split("\0")):
        sha, parents, keys, reverts = record.split(_FIELD)
        if key in [k.strip() for k in keys.splitlines()]:
            found: dict[str, Any] = {
                "sha": sha,
                "branch": branch,
                "parent": parents.split()[0] if parents else None,
            }
            if reverts.strip():
                found["reverts"] = reverts.strip().splitlines()[0].strip()
            return found
    return None


# -- writing a commit -------------------------------------------------------------------------


def _zero(repo: str) -> str:
    return "0" * (64 if _out(repo, "rev-parse", "--show-object-format") == "sha256" else 40)


# One index line: (mode, object id, path); mode "0" removes the path.
_Entry = tuple[str, str, str]


def _publish(
    repo: str,
    branch: str,
    key: str,
    message: str,
    who: _Who,
    change: Callable[[str | None], list[_Entry]],
    reverts: str | None = None,
) -> dict[str, Any]:
    """Commit `change(parent)` on top of the branch tip under `key`, once. A commit creates the
    branch from HEAD when it is missing; a revert (`reverts`) needs the branch to exist."""
    ref = f"refs/heads/{branch}"
    trailers = ([f"{REVERTS_TRAILER}: {reverts}"] if reverts else []) + [f"{KEY_TRAILER}: {key}"]
    body = message + "\n\n" + "".join(f"{t}\n" for t in trailers)
    last_error = ""
    for _ in range(_CAS_ATTEMPTS):
        # Checked first on every round: a second call under one key, or a resend after a crash
        # that already published, finds the commit instead of making another.
        found = _find(repo, branch, key)
        if found is not None:
            return found
        tip = _resolve(repo, ref)
        if tip is None and reverts:
            raise GitError(f"branch {branch!r} in {repo} is gone; there is nothing to revert {reverts} on")
        parent = tip if tip is not None else _resolve(repo, "HEAD")  # a new branch starts at HEAD
        entries = change(parent)
        with tempfile.TemporaryDirectory(prefix="daybook-git-") as tmp:
            # A private index: the user's own index and working tree are never read or written.
            index = os.path.join(tmp, "index")
            _git(repo, "read-tree", *([parent] if parent else ["--empty"]), index=index)
            if entries:
                lines = "".join(f"{mode} {oid}\t{path}\0" for mode, oid, path in entries)
                _git(repo, "update-index", "-z", "--index-info", stdin=lines.encode(), index=index)
            tree = _out(repo, "write-tree", index=index)
        parents = ["-p", parent] if parent else []
        sha = _out(repo, "commit-tree", tree, *parents, stdin=body.encode(), who=who)
        # The one step that makes the commit visible, and a compare-and-swap: it lands only if the
        # branch still points where we built on (or, for a new branch, does not exist yet).
        swap = _git(
            repo, "update-ref", "-m", f"daybook: {key}", ref, sha, tip or _zero(repo), who=who, check=False
        )
        if swap.returncode == 0:
            made: dict[str, Any] = {"sha": sha, "branch": branch, "parent": parent}
            if reverts:
                made["reverts"] = reverts
            return made
        last_error = swap.stderr.decode(errors="replace").strip()
    raise GitError(
        f"branch {branch!r} in {repo} moved under every one of {_CAS_ATTEMPTS} attempts to commit "
        f"key {key!r} (last: {last_error}); stop the other writer and resume the run"
    )


def _blobs(repo: str, files: dict[str, str | None], parent: str | None) -> list[_Entry]:
    entries: list[_Entry] = []
    zero = ""
    # Rewriting a script's content must not drop its executable bit.
    modes = _tree_entries(repo, parent, list(files)) if parent else {}
    for path, text in files.items():
        if text is None:
            zero = zero or _zero(repo)
            entries.append(("0", zero, path))
        else:
            oid = _out(repo, "hash-object", "-w", "--stdin", stdin=text.encode())
            mode = "100755" if modes.get(path, ("",))[0] == "100755" else "100644"
            entries.append((mode, oid, path))
    return entries


def _tree_entries(repo: str, rev: str, paths: list[str]) -> dict[str, tuple[str, str]]:
    """path -> (mode, object id) at `rev` for those of `paths` that exist there."""
    if not paths:
        return {}
    out = _git(repo, "ls-tree", "-z", "--full-tree", rev, "--", *paths).stdout.decode()
    found: dict[str, tuple[str, str]] = {}
    for record in filter(None, out.split("\0")):
        meta, path = record.split("\t", 1)
        mode, _kind, oid = meta.split()
        found[path] = (mode, oid)
    return found


def _undo_entries(repo: str, sha: str, key: str) -> Callable[[str | None], list[_Entry]]:
    """What a revert of `sha` writes, checked against the tip it will be built on."""
    base = _resolve(repo, f"{sha}^")  # the first parent: what a merge's own change is against
    against = [base, sha] if base else ["--root", sha]
    out = _git(repo, "diff-tree", "-r", "-z", "--no-renames", "--no-commit-id", *against).stdout
    changes: list[tuple[str, str, str, str, str]] = []  # old mode, old oid, new mode, new oid, path
    fields = iter(out.decode().split("\0"))
    for meta in fields:
        if meta.startswith(":"):
            old_mode, new_mode, old_oid, new_oid, _status = meta[1:].split()
            changes.append((old_mode, old_oid, new_mode, new_oid, next(fields)))

    def entries(tip: str | None) -> list[_Entry]:
        assert tip is not None  # _publish never builds a revert on a missing branch
        now = _tree_entries(repo, tip, [c[4] for c in changes])
        moved = [
            path
            for _om, _oo, new_mode, new_oid, path in changes
            if now.get(path) != ((new_mode, new_oid) if set(new_oid) != {"0"} else None)
        ]
        if moved:
            # Restoring the old content now would silently throw away a later writer's change.
            raise GitError(
                f"cannot revert {sha} (key {key!r}): {', '.join(moved)} changed after it on the "
                "branch. Revert it by hand (`git revert` on a checkout of the branch), then record "
                "that with `daybook resolve`"
            )
        return [
            (old_mode if set(old_oid) != {"0"} else "0", old_oid, path)
            for old_mode, old_oid, _nm, _no, path in changes
        ]

    return entries


# -- the tools --------------------------------------------------------------------------------


def _sha(result: Any) -> Any:
    return result["sha"]


def _revert_target(original: Mapping[str, Any], result: Mapping[str, Any]) -> tuple[str, str, str, _Who]:
    try:
        repo, branch, sha = str(original["repo"]), str(original["branch"]), str(result["sha"])
    except (KeyError, TypeError):
        raise ConfigError(
            "git.revert needs original={'repo': PATH, 'branch': NAME, ...} and result={'sha': SHA}, "
            "as git.commit journals them"
        ) from None
    who = _Who(
        str(original.get("author_name", DEFAULT_AUTHOR[0])),
        str(original.get("author_email", DEFAULT_AUTHOR[1])),
    )
    return _locate(repo), branch, sha, who


def _revert_status(key: str, args: dict[str, Any]) -> ReconcileResult:
    repo, branch, _, _ = _revert_target(args.get("original") or {}, args.get("result") or {})
    found = _find(repo, branch, key)
    return Confirmed(found, ref=found["sha"]) if found is not None else Absent()


@tool(
    name="git.revert",
    idempotent=True,
    status=_revert_status,
    reference=_sha,
    # An undo: re-sent safely under its `comp/<key>`; nothing undoes it in turn (it has no inverse,
    # so it is not "compensable", which promises one).
    effect_class="idempotent",
    irreversible=False,
    certain=(DaybookError,),  # GitError, ConfigError: refused before any change
)
def revert_commit(
    *, original: dict[str, Any], result: dict[str, Any], idempotency_key: str
) -> dict[str, Any]:
    """Undo the commit `result["sha"]` with a new commit on its branch, under `idempotency_key`.

    The revert restores, for each path the commit touched, the content of its parent; it refuses
    (GitError) when a later commit changed one of those paths, or the commit is not on the
    branch, rather than overwrite someone's work."""
    _check_key(idempotency_key)
    repo, branch, sha, who = _revert_target(original, result)
    found = _find(repo, branch, idempotency_key)
    if found is not None:
        return found
    tip = _resolve(repo, f"refs/heads/{branch}")
    if tip is None or _git(repo, "merge-base", "--is-ancestor", sha, tip, check=False).returncode != 0:
        raise GitError(
            f"commit {sha} is not on branch {branch!r} in {repo} (reset or rewritten?), so "
            f"key {idempotency_key!r} cannot revert it there; check the branch and record what "
            "happened with `daybook resolve`"
        )
    _check_branch(repo, branch)
    subject = _out(repo, "log", "--no-show-signature", "-1", "--format=%s", sha)
    message = f'Revert "{subject}"\n\nThis reverts commit {sha}.'
    undo = _undo_entries(repo, sha, idempotency_key)
    return _publish(repo, branch, idempotency_key, message, who, undo, reverts=sha)


def _commit_status(key: str, args: dict[str, Any]) -> ReconcileResult:
    found = _find(_locate(str(args["repo"])), str(args["branch"]), key)
    return Confirmed(found, ref=found["sha"]) if found is not None else Absent()


@tool(
    name="git.commit",
    idempotent=True,
    status=_commit_status,
    reference=_sha,
    inverse=revert_commit,
    effect_class="compensable",
    bufferable=False,
    certain=(DaybookError,),  # GitError, ConfigError: refused before any change
)
def commit_files(
    *,
    repo: str,
    branch: str,
    files: dict[str, str | None],
    message: str,
    author_name: str = DEFAULT_AUTHOR[0],
    author_email: str = DEFAULT_AUTHOR[1],
    idempotency_key: str,
) -> dict[str, Any]:
    """Commit `files` (path -> text; None deletes) on `branch` of `repo`, once per key.

    Returns `{"sha", "branch", "parent"}`. The branch is created from HEAD if missing. Neither
    the working tree, the index nor HEAD of the repository changes."""
    _check_key(idempotency_key)
    checked = _check_files(files)
    text = _check_message(message)
    where = _locate(repo)
    _check_branch(where, branch)
    who = _Who(author_name, author_email)
    return _publish(where, branch, idempotency_key, text, who, lambda parent: _blobs(where, checked, parent))


# -- the handle a workflow uses ---------------------------------------------------------------


class Repo:
    """A git repository and the branch daybook commits to (created from HEAD on first commit).

    `Repo(path, branch="daybook/work")`; `repo.commit(ctx, {"notes.md": "..."}, "message")`
    returns `{"sha", "branch", "parent"}`; `ctx.compensate()` reverts it."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        branch: str = DEFAULT_BRANCH,
        *,
        author_name: str = DEFAULT_AUTHOR[0],
        author_email: str = DEFAULT_AUTHOR[1],
    ) -> None:
        self.path = _locate(path)
        _check_branch(self.path, branch)
        self.branch = branch
        self.author_name = author_name
        self.author_email = author_email

    def __repr__(self) -> str:
        return f"Repo({self.path!r}, branch={self.branch!r})"

    def _relative(self, path: str) -> str:
        if not os.path.isabs(path):
            return _check_path(path)
        rel = os.path.relpath(os.path.realpath(path), os.path.realpath(self.path))
        if rel == "." or rel.startswith(".." + os.sep) or rel == "..":
            raise ConfigError(f"file path {path!r} is outside the repository {self.path!r}")
        return _check_path(rel.replace(os.sep, "/"))

    def commit(
        self,
        ctx: Context,
        files: Mapping[str, str | None],
        message: str,
        *,
        key: str | None = None,
        decision: Decision[Any] | None = None,
    ) -> dict[str, Any]:
        """Commit `files` (path relative to the repo root, or absolute inside it -> text; None
        deletes the path) on the branch as one journaled effect; returns `{"sha", "branch",
        "parent"}`."""
        if not isinstance(files, Mapping) or not files:
            raise ConfigError("files must be a non-empty dict of path -> text (None deletes the path)")
        checked = _check_files({self._relative(p): t for p, t in files.items()})
        result: dict[str, Any] = ctx.effect(
            commit_files,
            key=key,
            decision=decision,
            repo=self.path,
            branch=self.branch,
            files=dict(checked),
            message=_check_message(message),
            author_name=self.author_name,
            author_email=self.author_email,
        )
        return result

    def revert(
        self, ctx: Context, sha: str, *, key: str | None = None, decision: Decision[Any] | None = None
    ) -> dict[str, Any]:
        """Revert commit `sha` of this branch as a journaled effect (what compensation does for
        this repo's commits); returns `{"sha", "branch", "parent", "reverts"}`."""
        if not isinstance(sha, str) or _resolve(self.path, sha) is None:
            raise ConfigError(f"{sha!r} is not a commit in {self.path}")
        result: dict[str, Any] = ctx.effect(
            revert_commit,
            key=key,
            decision=decision,
            original={
                "repo": self.path,
                "branch": self.branch,
                "author_name": self.author_name,
                "author_email": self.author_email,
            },
            result={"sha": _resolve(self.path, sha), "branch": self.branch},
        )
        return result

    def find(self, key: str) -> dict[str, Any] | None:
        """The commit on the branch made under `key` (a pure read), or None."""
        return _find(self.path, self.branch, key)

    def tip(self) -> str | None:
        """The branch's current commit, or None before the first daybook commit."""
        return _resolve(self.path, f"refs/heads/{self.branch}")
