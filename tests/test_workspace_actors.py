"""Many actors on one checkout (treatise O12), on both stores: the checkout's lease refuses a
second run while the first edits it, a worktree per run keeps runs apart, and a rewind of one
run on a shared checkout never overwrites another run's edits."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from test_workspace_drift import git_repo

import daybook
from daybook import Daybook, RunStatus
from daybook.errors import CheckoutBusy, RunParked, Suspended, WorkspaceConflict
from daybook.workspace.checkout import lease_name


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return git_repo(tmp_path / "repo", {"app.py": "v = 0\n"})


@daybook.workflow(name="ws_actors_edit_then_wait")
def edit_then_wait(ctx: daybook.Context, root: str, path: str, lease: bool, worktree: bool) -> str:
    co = daybook.Checkout(root, lease=lease, worktree=worktree)
    co.write(ctx, path, f"written by {ctx.run_id}\n")
    ctx.wait_for("done")
    co.write(ctx, path, f"finished by {ctx.run_id}\n")
    co.release(ctx)
    return co.root(ctx)


def test_a_second_run_on_a_leased_checkout_is_refused_until_the_first_lets_go(
    book: Daybook, repo: Path
) -> None:
    with pytest.raises(Suspended):
        book.run(edit_then_wait, str(repo), "a.txt", True, False, run_id="actor-a")

    with pytest.raises(RunParked, match=r"CheckoutBusy.*actor-a.*worktree=True"):
        book.run(edit_then_wait, str(repo), "b.txt", True, False, run_id="actor-b")
    assert not (repo / "b.txt").exists()  # refused before it wrote anything
    assert book.entity(lease_name(str(repo))).view().holder == "actor-a"

    book.signal("actor-a", "done")
    book.resume("actor-a")
    book.retry("actor-b", submit=True)
    with pytest.raises(Suspended):
        book.resume("actor-b")
    assert (repo / "a.txt").read_text() == "finished by actor-a\n"
    assert (repo / "b.txt").read_text() == "written by actor-b\n"


def test_a_worktree_per_run_keeps_two_runs_on_one_repository_apart(book: Daybook, repo: Path) -> None:
    for run_id in ("tree-a", "tree-b"):
        with pytest.raises(Suspended):
            book.run(edit_then_wait, str(repo), "app.py", True, True, run_id=run_id)
    for run_id in ("tree-a", "tree-b"):
        book.signal(run_id, "done")
    where = {run_id: Path(book.resume(run_id)) for run_id in ("tree-a", "tree-b")}

    assert (repo / "app.py").read_text() == "v = 0\n"  # the shared checkout is untouched
    assert (where["tree-a"] / "app.py").read_text() == "finished by tree-a\n"
    assert (where["tree-b"] / "app.py").read_text() == "finished by tree-b\n"
    listed = subprocess.run(
        ["git", "-C", str(repo), "worktree", "list"], capture_output=True, text=True
    ).stdout
    assert str(where["tree-a"]) in listed and str(where["tree-b"]) in listed


def test_a_rewind_of_one_run_leaves_another_runs_edits_on_the_same_checkout(
    book: Daybook, repo: Path
) -> None:
    with pytest.raises(Suspended):
        book.run(edit_then_wait, str(repo), "mine.txt", False, False, run_id="shared-a")
    with pytest.raises(Suspended):
        book.run(edit_then_wait, str(repo), "theirs.txt", False, False, run_id="shared-b")

    done = book.rewind("shared-a", 0)

    assert done.removed == ["mine.txt"] and not (repo / "mine.txt").exists()
    assert (repo / "theirs.txt").read_text() == "written by shared-b\n"
    assert book.get_run("shared-b").status == RunStatus.SUSPENDED


def test_a_rewind_refuses_to_overwrite_a_file_another_run_edited_after_it(book: Daybook, repo: Path) -> None:
    with pytest.raises(Suspended):
        book.run(edit_then_wait, str(repo), "app.py", False, False, run_id="over-a")
    with pytest.raises(Suspended):
        book.run(edit_then_wait, str(repo), "app.py", False, False, run_id="over-b")

    with pytest.raises(WorkspaceConflict, match=r"app\.py"):
        book.rewind("over-a", 0)
    assert (repo / "app.py").read_text() == "written by over-b\n"


def test_a_rewind_waits_for_another_run_that_holds_the_checkouts_lease(book: Daybook, repo: Path) -> None:
    with pytest.raises(Suspended):
        book.run(edit_then_wait, str(repo), "a.txt", False, False, run_id="lease-a")
    with pytest.raises(Suspended):
        book.run(edit_then_wait, str(repo), "b.txt", True, False, run_id="lease-b")  # holds the lease

    with pytest.raises(CheckoutBusy, match="lease-b"):
        book.rewind("lease-a", 0)
    assert (repo / "a.txt").exists()

    book.entity(lease_name(str(repo))).release("lease-b")
    assert book.rewind("lease-a", 0).removed == ["a.txt"]
