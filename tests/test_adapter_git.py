"""The git adapter against real repositories through the git CLI, on both journal backends: one
commit per key, reverts that restore the files, and SIGKILL at every crash point of a commit and
of its revert."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import git_child
import pytest
from conftest import killed

import daybook
import daybook.adapters.git as gitmod
from daybook import ConfigError, Confirmed, Daybook, Kind, NotFound, RunStatus
from daybook.adapters.git import Repo, commit_files, revert_commit

HERE = Path(__file__).parent
BRANCH = "daybook/work"


@pytest.fixture(autouse=True)
def _hermetic_git(monkeypatch: pytest.MonkeyPatch) -> None:
    # Nobody's ~/.gitconfig (signing, hooks paths, default branch) may change what the tests see;
    # the child processes inherit this too.
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")


def git(repo: str, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "tester",
        "GIT_AUTHOR_EMAIL": "tester@example.com",
        "GIT_COMMITTER_NAME": "tester",
        "GIT_COMMITTER_EMAIL": "tester@example.com",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    done = subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True, env=env, check=True)
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> str:
    path = str(tmp_path / "repo")
    subprocess.run(["git", "init", "-q", "-b", "main", path], check=True)
    Path(path, "README.md").write_text("hello\n")
    Path(path, "notes").mkdir()
    Path(path, "notes", "keep.txt").write_text("kept\n")
    git(path, "add", ".")
    git(path, "commit", "-q", "-m", "init")
    return path


def count(repo: str, rev: str = BRANCH) -> int:
    return int(git(repo, "rev-list", "--count", rev))


def keys(repo: str, rev: str = BRANCH) -> list[str]:
    """Every Daybook-Key trailer on the branch, newest first."""
    out = git(repo, "log", "--format=%(trailers:key=Daybook-Key,valueonly)", rev)
    return [line.strip() for line in out.splitlines() if line.strip()]


def show(repo: str, path: str, rev: str = BRANCH) -> str:
    return git(repo, "show", f"{rev}:{path}") + "\n"


def checkout_state(repo: str) -> tuple[str, ...]:
    index = hashlib.sha256(Path(repo, ".git", "index").read_bytes()).hexdigest()
    return (
        git(repo, "status", "--porcelain"),
        git(repo, "diff"),
        git(repo, "diff", "--cached"),
        git(repo, "symbolic-ref", "HEAD"),
        git(repo, "rev-parse", "HEAD"),
        index,
        Path(repo, "README.md").read_text(),
    )


def dangling_keys(repo: str) -> list[str]:
    """Keys of commits that exist as objects but are on no branch (what a mid-act kill leaves)."""
    out = git(repo, "fsck", "--unreachable", "--no-reflogs", "--no-progress")
    shas = [line.split()[2] for line in out.splitlines() if line.startswith("unreachable commit")]
    return sorted(k for sha in shas for k in keys(repo, f"{sha}^!"))


def effect_rows(book: Daybook, run_id: str, step: int) -> list[daybook.Event]:
    return [e for e in book.journal(run_id) if e.step == step]


def run_child(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(HERE / "git_child.py"), *args], capture_output=True, text=True, timeout=300
    )


# -- behaviour ------------------------------------------------------------------------------------


def test_commits_land_on_a_work_branch_made_from_head_and_the_checkout_is_never_touched(
    book: Daybook, repo: str
) -> None:
    Path(repo, "README.md").write_text("my unsaved edit\n")
    Path(repo, "staged.txt").write_text("staged\n")
    git(repo, "add", "staged.txt")
    before = checkout_state(repo)
    main = git(repo, "rev-parse", "main")

    shas = book.run(git_child.two_commits, repo, run_id="plain")

    assert checkout_state(repo) == before
    assert git(repo, "rev-parse", BRANCH) == shas[1]
    assert git(repo, "rev-parse", f"{shas[1]}^") == shas[0]
    assert git(repo, "rev-parse", f"{shas[0]}^") == main
    assert count(repo) == count(repo, "main") + 2
    assert keys(repo) == ["plain/2", "plain/1"]
    assert show(repo, "notes/b.txt") == "beta\n" and show(repo, "README.md") == "rewritten\n"
    assert show(repo, "notes/keep.txt") == "kept\n"  # untouched paths are carried over
    outcomes = [e for e in book.journal("plain") if e.kind == Kind.OUTCOME]
    assert [e.data["ref"] for e in outcomes] == shas  # the sha is the counterparty's reference


def test_one_key_makes_one_commit_however_often_the_tool_is_called(book: Daybook, repo: str) -> None:
    shas = book.run(git_child.two_commits, repo, run_id="once")
    intent = effect_rows(book, "once", 2)[0]
    assert intent.key is not None
    total = count(repo)

    again = commit_files(**intent.data["args"], idempotency_key=intent.key)
    rerun = book.run(git_child.two_commits, repo, run_id="once")

    assert again["sha"] == shas[1] and rerun == shas
    assert count(repo) == total
    assert keys(repo) == ["once/2", "once/1"]


def test_status_by_key_answers_with_the_commit_sha_or_absent(book: Daybook, repo: str) -> None:
    book.run(git_child.two_commits, repo, run_id="k")
    args = effect_rows(book, "k", 1)[0].data["args"]
    status = commit_files.status
    assert status is not None

    answer = status("k/1", args)
    assert isinstance(answer, Confirmed)
    assert answer.ref == git(repo, "rev-parse", f"{BRANCH}~1")
    assert answer.result == {"sha": answer.ref, "branch": BRANCH, "parent": git(repo, "rev-parse", "main")}
    # 'k/1' is a prefix of 'k/12' and a suffix of 'comp/k/1': neither may pass for it.
    assert isinstance(status("k/12", args), NotFound)
    assert isinstance(status("k/1", {**args, "branch": "daybook/other"}), NotFound)
    assert Repo(repo).find("k/2") == {
        "sha": git(repo, "rev-parse", BRANCH),
        "branch": BRANCH,
        "parent": answer.ref,
    }


def test_compensation_reverts_newest_first_and_restores_every_file(book: Daybook, repo: str) -> None:
    out = book.run(git_child.commit_then_undo, repo, run_id="undo")

    assert out["compensated"] == ["undo/2", "undo/1"]
    assert keys(repo) == ["comp/undo/1", "comp/undo/2", "undo/2", "undo/1"]
    assert git(repo, "rev-parse", f"{BRANCH}^{{tree}}") == git(repo, "rev-parse", "main^{tree}")
    reverted = git(repo, "log", "-2", "--format=%(trailers:key=Daybook-Reverts,valueonly)", BRANCH)
    assert reverted.split() == [out["commits"][0], out["commits"][1]]
    total = count(repo)
    assert book.run(git_child.commit_then_undo, repo, run_id="undo") == out
    assert count(repo) == total


def _foreign_edit(repo: str) -> str:
    made = commit_files(
        repo=repo,
        branch=BRANCH,
        files={"README.md": "theirs\n"},
        message="someone else",
        idempotency_key="a-person",
    )
    return str(made["sha"])


@daybook.workflow(name="git_test_edit_then_undo")
def edit_then_undo(ctx: daybook.Context, repo_path: str) -> list[str]:
    Repo(repo_path).commit(ctx, {"README.md": "ours\n"}, "ours")
    ctx.decide("a person edits the same file", _foreign_edit, repo_path)
    return ctx.compensate().stuck


def test_a_revert_never_overwrites_a_later_change_and_the_run_is_stuck_instead(
    book: Daybook, repo: str
) -> None:
    with pytest.raises(daybook.RunStuck) as err:
        book.run(edit_then_undo, repo, run_id="clash")

    assert "clash/1" in str(err.value)
    assert book.get_run("clash").status == RunStatus.STUCK
    assert show(repo, "README.md") == "theirs\n"
    assert keys(repo) == ["a-person", "clash/1"]  # no revert commit was made
    failed = [e for e in effect_rows(book, "clash", 3) if e.kind == Kind.OUTCOME]
    assert failed[-1].status == "failed" and "README.md" in failed[-1].data["error"]["message"]


def test_a_commit_racing_another_writer_is_rebuilt_on_top_never_overwriting_it(
    book: Daybook, repo: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = gitmod._git
    raced: list[str] = []

    def racing(path: str, *args: str, **kwargs: Any) -> Any:
        if args[:1] == ("update-ref",) and not raced:
            raced.append("")  # before _foreign_edit, whose own update-ref comes back here
            raced[0] = _foreign_edit(repo)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(gitmod, "_git", racing)
    shas = book.run(git_child.two_commits, repo, run_id="race")

    # The other writer's commit landed first; ours was rebuilt on it, keeping its file.
    assert git(repo, "rev-parse", f"{shas[0]}^") == raced[0]
    assert keys(repo) == ["race/2", "race/1", "a-person"]
    assert show(repo, "README.md") == "rewritten\n"
    assert "theirs" in git(repo, "show", f"{shas[0]}:README.md")


def test_paths_outside_the_repository_and_bad_targets_are_refused(
    book: Daybook, repo: str, tmp_path: Path
) -> None:
    base = {"repo": repo, "branch": BRANCH, "message": "m", "idempotency_key": "bad"}
    for path in ["../escape.txt", "/etc/passwd", ".git/config", "a/../../x", "./a", "a//b", ""]:
        with pytest.raises(ConfigError):
            commit_files(**base, files={path: "x"})
    with pytest.raises(ConfigError, match="not inside a git repository"):
        Repo(tmp_path)
    with pytest.raises(ConfigError, match="checked out"):
        Repo(repo, branch="main")
    with pytest.raises(ConfigError, match="not a valid git branch"):
        Repo(repo, branch="bad..name")
    assert Repo(repo)._relative(str(Path(repo, "notes", "x.md"))) == "notes/x.md"
    with pytest.raises(ConfigError, match="outside the repository"):
        Repo(repo)._relative(str(tmp_path / "elsewhere.md"))

    @daybook.workflow(name="git_test_escape")
    def escape(ctx: daybook.Context, repo_path: str) -> Any:
        return Repo(repo_path).commit(ctx, {"../escape.txt": "x"}, "escape")

    with pytest.raises(daybook.DaybookError):
        book.run(escape, repo, run_id="escape")
    assert [e for e in book.journal("escape") if e.kind == Kind.INTENT] == []  # refused before intent
    assert not git(repo, "branch", "--list", BRANCH)


# -- crash points ---------------------------------------------------------------------------------

CRASH_POINTS = {
    # The 2nd commit's intent is durable; nothing reached git yet.
    "after_intent": ("--kill-after", "intent:2"),
    # Mid-act: its blobs, tree and commit objects are written, the branch not yet moved.
    "mid_act": ("--kill-git", "before:2"),
    # The branch moved to the new commit; the outcome row was never written.
    "after_act": ("--kill-git", "after:2"),
}


@pytest.mark.parametrize("point", list(CRASH_POINTS))
def test_kill_around_a_commit_then_resume_leaves_exactly_one_commit_per_key(
    db_url: str, repo: str, point: str
) -> None:
    run_id = f"crash-{point}"
    base = count(repo, "main")
    proc = run_child(db_url, "start", run_id, "two_commits", repo, *CRASH_POINTS[point])
    assert killed(proc), proc.stderr

    landed = 2 if point == "after_act" else 1
    assert count(repo) == base + landed
    assert dangling_keys(repo) == ([f"{run_id}/2"] if point == "mid_act" else [])
    published = git(repo, "rev-parse", BRANCH)
    with Daybook(db_url) as book:
        assert [e.kind for e in effect_rows(book, run_id, 2)] == [Kind.INTENT]
        shas = book.resume(run_id, wait=10)
        outcomes = [e for e in effect_rows(book, run_id, 2) if e.kind == Kind.OUTCOME]
        attempts = [e for e in effect_rows(book, run_id, 2) if e.kind == Kind.ATTEMPT]

    assert count(repo) == base + 2
    assert keys(repo) == [f"{run_id}/2", f"{run_id}/1"]
    assert git(repo, "rev-parse", BRANCH) == shas[1]
    assert outcomes[0].status == "unknown" and outcomes[-1].status == "confirmed"
    assert outcomes[-1].data["ref"] == shas[1]
    if point == "after_act":
        # Found by its trailer, never sent again: the sha is the one published before the kill.
        assert outcomes[-1].data["resolved_by"] == "status"
        assert attempts == []
        assert shas[1] == published


COMP_CRASH_POINTS = {
    # The second revert's intent is durable (intents: 2 commits, then 2 reverts).
    "after_intent": ("--kill-after", "intent:4"),
    # The second revert commit is written but the branch not yet moved.
    "mid_act": ("--kill-git", "before:4"),
    # The first revert is on the branch; its outcome row was never written.
    "after_act": ("--kill-git", "after:3"),
}


@pytest.mark.parametrize("point", list(COMP_CRASH_POINTS))
def test_kill_mid_compensation_then_resume_reverts_each_commit_exactly_once(
    db_url: str, repo: str, point: str
) -> None:
    run_id = f"comp-{point}"
    base = count(repo, "main")
    proc = run_child(db_url, "start", run_id, "commit_then_undo", repo, *COMP_CRASH_POINTS[point])
    assert killed(proc), proc.stderr
    assert count(repo) == base + 3
    assert dangling_keys(repo) == ([f"comp/{run_id}/1"] if point == "mid_act" else [])

    with Daybook(db_url) as book:
        out = book.resume(run_id, wait=10)
        assert book.get_run(run_id).status == RunStatus.COMPLETED

    assert out["compensated"] == [f"{run_id}/2", f"{run_id}/1"]
    assert count(repo) == base + 4
    assert keys(repo) == [f"comp/{run_id}/1", f"comp/{run_id}/2", f"{run_id}/2", f"{run_id}/1"]
    assert git(repo, "rev-parse", f"{BRANCH}^{{tree}}") == git(repo, "rev-parse", "main^{tree}")


def test_revert_refuses_a_commit_that_is_not_on_the_branch(repo: str) -> None:
    main = git(repo, "rev-parse", "main")
    made = commit_files(repo=repo, branch=BRANCH, files={"x.txt": "x\n"}, message="x", idempotency_key="x")
    git(repo, "update-ref", f"refs/heads/{BRANCH}", main)  # someone reset the branch
    with pytest.raises(gitmod.GitError, match="not on branch"):
        revert_commit(original={"repo": repo, "branch": BRANCH}, result=made, idempotency_key="comp/x")
    assert count(repo) == count(repo, "main")


def test_rewriting_a_script_keeps_its_executable_bit(repo: str) -> None:
    Path(repo, "run.sh").write_text("echo old\n")
    Path(repo, "run.sh").chmod(0o755)
    git(repo, "add", "run.sh")
    git(repo, "commit", "-q", "-m", "script")
    commit_files(repo=repo, branch=BRANCH, files={"run.sh": "echo new\n"}, message="m", idempotency_key="s")
    assert git(repo, "ls-tree", BRANCH, "run.sh").split()[0] == "100755"
    assert show(repo, "run.sh") == "echo new\n"


def test_a_bare_repository_and_one_without_commits_both_take_commits(tmp_path: Path) -> None:
    bare, empty = str(tmp_path / "bare.git"), str(tmp_path / "empty")
    subprocess.run(["git", "init", "-q", "--bare", bare], check=True)
    subprocess.run(["git", "init", "-q", "-b", "main", empty], check=True)
    for path in (bare, empty):
        made = commit_files(
            repo=path, branch=BRANCH, files={"a.txt": "a\n"}, message="m", idempotency_key="r"
        )
        assert made["parent"] is None  # a root commit: there was no HEAD to start from
        assert count(path) == 1 and show(path, "a.txt") == "a\n"
        undo = revert_commit(original={"repo": path, "branch": BRANCH}, result=made, idempotency_key="comp/r")
        assert git(path, "ls-tree", "-r", undo["sha"]) == ""
    assert not Path(empty, "a.txt").exists()  # the worktree of the non-bare one stayed empty
