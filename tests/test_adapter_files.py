"""The files adapter on real files, on both store backends: staged writes stay invisible until
commit, a commit publishes them all, compensation puts the old contents back, and a SIGKILL at
any point of staging, committing or restoring is finished by a resume with nothing left over."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import files_child
import pytest
from conftest import HERE, killed

import daybook
from daybook import Daybook, Kind
from daybook.adapters.files import SCRATCH, Workspace
from daybook.errors import ConfigError, RunFailed

BEFORE = {"a.txt": "old a", "c.txt": "old c", "keep.txt": "untouched"}
SPEC: dict[str, Any] = {
    "files": [["a.txt", "new a"], ["sub/b.txt", "new b"], ["c.txt", None], ["d.txt", "new d"]]
}
AFTER = {"a.txt": "new a", "sub/b.txt": "new b", "d.txt": "new d", "keep.txt": "untouched"}
COMMIT_STEP = 5  # steps 1-4 stage, step 5 commits


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


EXPECTED_PUBLISHED = [
    {"path": "a.txt", "op": "write", "sha256": sha("new a"), "previous": sha("old a")},
    {"path": "sub/b.txt", "op": "write", "sha256": sha("new b"), "previous": None},
    {"path": "c.txt", "op": "delete", "sha256": None, "previous": sha("old c")},
    {"path": "d.txt", "op": "write", "sha256": sha("new d"), "previous": None},
]


def tree(root: Path) -> dict[str, str]:
    """Every visible file under root (the scratch area left out) and its content."""
    return {
        p.relative_to(root).as_posix(): p.read_text()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.relative_to(root).parts[0] != SCRATCH
    }


def scratch(root: Path, area: str) -> list[str]:
    base = root / SCRATCH / area
    return sorted(p.relative_to(base).as_posix() for p in base.rglob("*") if p.is_file())


@pytest.fixture
def root(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    for name, text in BEFORE.items():
        (ws / name).write_text(text)
    return ws


def child(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(HERE / "files_child.py"), *args], capture_output=True, text=True, timeout=300
    )


def outcomes(book: Daybook, run_id: str, step: int) -> list[tuple[str, str | None]]:
    return [(e.kind, e.status) for e in book.journal(run_id) if e.step == step and e.kind != Kind.INTENT]


def assert_each_effect_confirmed_once(book: Daybook, run_id: str) -> None:
    confirmed: dict[int, int] = {}
    for e in book.journal(run_id):
        if e.kind == Kind.OUTCOME and e.status == "confirmed" and e.step is not None:
            confirmed[e.step] = confirmed.get(e.step, 0) + 1
    assert confirmed and set(confirmed.values()) == {1}, confirmed


@daybook.workflow(name="files_test_stage_then_commit")
def stage_then_commit(ctx: daybook.Context, root: str) -> dict[str, Any]:
    ws = Workspace(root)
    ws.write(ctx, "a.txt", "new a")
    ws.write(ctx, "sub/b.txt", "new b")
    ws.delete(ctx, "c.txt")
    ws.write(ctx, "d.txt", "new d")
    seen = {"a": ws.read(ctx, "a.txt"), "c": ws.read(ctx, "c.txt")}
    visible = ctx.decide("visible before commit", lambda: tree(Path(root))).value
    result = ws.commit(ctx)
    return {"seen": seen, "visible": visible, "commit": result, "after": ws.read(ctx, "a.txt")}


def test_staged_writes_are_invisible_until_commit_publishes_them_all(book: Daybook, root: Path) -> None:
    out = book.run(stage_then_commit, str(root), run_id="files-visible")
    assert out["visible"] == BEFORE  # staged, not published
    assert out["seen"] == {"a": "new a", "c": None}  # the run reads its own staged changes
    assert out["after"] == "new a"
    assert out["commit"]["published"] == EXPECTED_PUBLISHED
    assert tree(root) == AFTER
    assert scratch(root, "staging") == []
    # Replay reads the journal only: same answer, and no file is touched again.
    stamps = {p: p.stat().st_mtime_ns for p in root.rglob("*")}
    assert book.replay("files-visible") == out
    assert {p: p.stat().st_mtime_ns for p in root.rglob("*")} == stamps


@daybook.workflow(name="files_test_two_commits")
def two_commits(ctx: daybook.Context, root: str) -> list[dict[str, Any]]:
    ws = Workspace(root)
    ws.write(ctx, "a.txt", "first")
    first = ws.commit(ctx)
    ws.write(ctx, "a.txt", "draft")
    ws.write(ctx, "e.txt", "e")
    ws.write(ctx, "a.txt", "second")  # the last write of a path wins; the draft is never published
    return [first, ws.commit(ctx)]


def test_each_commit_publishes_only_what_was_staged_since_the_last(book: Daybook, root: Path) -> None:
    first, second = book.run(two_commits, str(root), run_id="files-two")
    assert [p["path"] for p in first["published"]] == ["a.txt"]
    assert second["published"] == [
        {"path": "e.txt", "op": "write", "sha256": sha("e"), "previous": None},
        {"path": "a.txt", "op": "write", "sha256": sha("second"), "previous": sha("first")},
    ]
    assert tree(root) == {**BEFORE, "a.txt": "second", "e.txt": "e"}
    assert scratch(root, "staging") == []


SHARED: dict[str, Workspace] = {}


@daybook.workflow(name="files_test_suspend")
def commit_across_a_suspend(ctx: daybook.Context, root: str) -> dict[str, Any]:
    ws = SHARED.setdefault(root, Workspace(root))  # one Workspace for every execution
    ws.write(ctx, "a.txt", "first")
    ws.commit(ctx)
    ws.write(ctx, "e.txt", "e")
    ctx.wait_for("go")
    return ws.commit(ctx)


def test_a_shared_workspace_commits_the_same_entries_after_a_suspend_and_resume(
    db_url: str, root: Path
) -> None:
    # The resumed execution replays the writes; what it stages must not mix with the first
    # execution's list, or the commit's arguments would differ from the journal's.
    with Daybook(db_url, inline_wait=0.05) as book:
        with pytest.raises(daybook.Suspended):
            book.run(commit_across_a_suspend, str(root), run_id="files-suspend")
        assert (root / "a.txt").read_text() == "first" and not (root / "e.txt").exists()
        book.signal("files-suspend", "go")
        second = book.resume("files-suspend")
    assert [p["path"] for p in second["published"]] == ["e.txt"]
    assert tree(root) == {**BEFORE, "a.txt": "first", "e.txt": "e"}


@daybook.workflow(name="files_test_bad_paths")
def bad_paths(ctx: daybook.Context, root: str, paths: list[str]) -> list[str]:
    ws = Workspace(root)
    refused = []
    for path in paths:
        try:
            ws.write(ctx, path, "x")
        except ConfigError as exc:
            refused.append(str(exc))
    return refused


def test_paths_outside_the_root_are_refused_before_anything_is_staged(
    book: Daybook, root: Path, tmp_path: Path
) -> None:
    paths = ["../escape.txt", "/etc/escape.txt", "a/../../escape.txt", ".daybook/x", "", "."]
    refused = book.run(bad_paths, str(root), paths, run_id="files-bad")
    assert len(refused) == len(paths) and all("files: path" in m for m in refused)
    assert book.journal("files-bad")[-1].kind == Kind.RUN_COMPLETED and not (root / SCRATCH).exists()
    with pytest.raises(ConfigError, match="not a directory"):
        Workspace(tmp_path / "missing")

    # A symlinked directory pointing out of the root is caught by the tool: the write fails.
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "link").symlink_to(outside)
    with pytest.raises(RunFailed, match="outside the workspace root"):
        book.run(bad_paths, str(root), ["link/escape.txt"], run_id="files-symlink")
    assert list(outside.iterdir()) == []


def test_compensation_restores_previous_contents_and_removes_created_files(book: Daybook, root: Path) -> None:
    out = book.run(files_child.publish, str(root), {**SPEC, "undo": True}, run_id="files-undo")
    assert out["commit"]["published"] == EXPECTED_PUBLISHED
    assert len(out["compensated"]) == 5  # the commit, then the four staged effects
    assert tree(root) == BEFORE
    assert scratch(root, "staging") == [] and scratch(root, "backup") == []


def test_compensation_refuses_to_clobber_a_file_changed_after_the_commit(db_url: str, root: Path) -> None:
    @daybook.workflow(name="files_test_changed_then_undo")
    def changed_then_undo(ctx: daybook.Context, root: str) -> Any:
        ws = Workspace(root)
        ws.write(ctx, "a.txt", "new a")
        ws.commit(ctx)
        ctx.decide("someone edits", lambda: Path(root, "a.txt").write_text("edited"))
        return ctx.compensate().complete

    with Daybook(db_url) as book, pytest.raises(daybook.RunStuck):
        book.run(changed_then_undo, str(root), run_id="files-conflict")
    assert (root / "a.txt").read_text() == "edited"


CRASH_POINTS = {
    # point: (child flags, what the journal must show for the killed step after resume)
    "after_write_intent": (["--kill-after", "intent:2"], 2, "resent"),
    "after_staging_before_outcome": (["--kill-before", "outcome:2"], 2, "reconciled"),
    "after_commit_intent": (["--kill-after", f"intent:{COMMIT_STEP}"], COMMIT_STEP, "resent"),
    "mid_commit_after_first_rename": (["--kill-at-rename", "1"], COMMIT_STEP, "resent"),
    "after_commit_before_outcome": (["--kill-before", f"outcome:{COMMIT_STEP}"], COMMIT_STEP, "reconciled"),
}


@pytest.mark.parametrize("point", list(CRASH_POINTS))
def test_kill_at_each_point_then_resume_publishes_exactly_once_with_nothing_left_over(
    db_url: str, root: Path, point: str
) -> None:
    flags, step, how = CRASH_POINTS[point]
    run_id = f"files-crash-{point}"
    proc = child(db_url, "start", run_id, str(root), json.dumps(SPEC), *flags)
    assert killed(proc), proc.stderr

    # What the kill left behind, before any resume.
    staged = scratch(root, "staging")
    if point == "after_write_intent":
        assert len(staged) == 1 and tree(root) == BEFORE  # the 1st write staged, the 2nd not
    elif point == "after_staging_before_outcome":
        assert len(staged) == 2 and tree(root) == BEFORE
    elif point == "after_commit_intent":
        assert len(staged) == 3 and tree(root) == BEFORE  # a delete stages no file
    elif point == "mid_commit_after_first_rename":
        assert (root / "a.txt").read_text() == "new a" and not (root / "sub/b.txt").exists()
        assert len(staged) == 2
    else:
        assert tree(root) == AFTER and staged == []

    resumed = child(db_url, "resume", run_id)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    result = json.loads(resumed.stdout.strip().splitlines()[-1])["result"]

    # The true previous contents, even where the kill came after a.txt was already replaced.
    assert result["published"] == EXPECTED_PUBLISHED
    assert tree(root) == AFTER
    assert not (root / SCRATCH / "staging").exists()  # not even an empty run directory
    with Daybook(db_url) as book:
        assert_each_effect_confirmed_once(book, run_id)
        rows = outcomes(book, run_id, step)
        if how == "reconciled":  # asked the disk, did not redo
            assert rows == [(Kind.OUTCOME, "unknown"), (Kind.OUTCOME, "confirmed")]
            final = [e for e in book.journal(run_id) if e.step == step][-1]
            assert final.data["resolved_by"] == "status"
        else:  # nothing (or half) was done: done again under the same key, which finishes it
            assert rows == [(Kind.OUTCOME, "unknown"), (Kind.ATTEMPT, None), (Kind.OUTCOME, "confirmed")]


@pytest.mark.parametrize("rename", [1, 4], ids=["mid_commit", "mid_restore"])
def test_kill_mid_commit_or_mid_restore_then_resume_restores_the_true_previous_contents(
    db_url: str, root: Path, rename: int
) -> None:
    # Renames 1-3 publish a.txt, sub/b.txt, d.txt; restore runs newest first: d and b are
    # unlinked, c.txt is rename 4, a.txt rename 5.
    run_id = f"files-undo-crash-{rename}"
    spec = {**SPEC, "undo": True}
    proc = child(db_url, "start", run_id, str(root), json.dumps(spec), "--kill-at-rename", str(rename))
    assert killed(proc), proc.stderr
    if rename == 4:
        assert (root / "c.txt").read_text() == "old c" and (root / "a.txt").read_text() == "new a"

    resumed = child(db_url, "resume", run_id)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert tree(root) == BEFORE
    assert scratch(root, "staging") == [] and scratch(root, "backup") == []
    with Daybook(db_url) as book:
        assert_each_effect_confirmed_once(book, run_id)


def test_sweep_removes_staging_left_by_dead_runs_and_only_those(db_url: str, root: Path) -> None:
    for run_id in ("files-dead", "files-live"):
        proc = child(db_url, "start", run_id, str(root), json.dumps(SPEC), "--kill-before", "outcome:3")
        assert killed(proc), proc.stderr
    ws = Workspace(root)
    both = scratch(root, "staging")
    assert len(both) == 4  # two staged writes per run

    with pytest.raises(ConfigError, match="needs runs"):
        ws.sweep()
    removed = ws.sweep(runs=["files-dead"])
    assert len(removed) == 2 and all(r.startswith(f"{SCRATCH}/staging/files-dead-") for r in removed)
    assert scratch(root, "staging") == sorted(set(both) - {r.split("staging/")[1] for r in removed})

    # A half-written staged file (a kill inside the write) is swept by age like the rest.
    live = next(p for p in (root / SCRATCH / "staging").iterdir())
    (live / "x.partial").write_text("half")
    assert ws.sweep(older_than=3600) == []
    old = time.time() - 7200
    for p in live.iterdir():
        os.utime(p, (old, old))
    assert len(ws.sweep(older_than=3600)) == 3
    assert scratch(root, "staging") == [] and tree(root) == BEFORE

    # A resumed run whose staging was swept fails its commit loudly instead of publishing less.
    resumed = child(db_url, "resume", "files-live")
    assert resumed.returncode == 3 and "swept or removed" in resumed.stdout
    assert tree(root) == BEFORE
    assert len(ws.sweep(runs=["files-live"])) == 1  # d.txt, staged on resume


def test_sweep_can_drop_the_backups_of_finished_runs(book: Daybook, root: Path) -> None:
    book.run(files_child.publish, str(root), SPEC, run_id="files-done")
    ws = Workspace(root)
    assert len(scratch(root, "backup")) == 4  # kept for a compensation that may still come
    assert ws.sweep(runs=["files-done"]) == []
    assert len(ws.sweep(runs=["files-done"], backups=True)) == 4
    assert not (root / SCRATCH / "backup").exists() or scratch(root, "backup") == []
    assert tree(root) == AFTER
