"""Workspace snapshots and rewind (treatise O11), on both stores, in a real git repository:
a snapshot per edit on the run's hidden ref (its reflog a second journal), `daybook rewind RUN
--to STEP` putting back exactly the files of "after edit 3 of 7" and listing the ignored paths
it left alone, on a journal branch (the `run_retried` row recovery and retry write) whose later
steps run again while effects outside the workspace replay; compaction keeping K recent
snapshots; bad input refused with errors saying what to do."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import cli_in_process
from test_workspace_drift import git_repo

import daybook
from daybook import Daybook, Kind, RunStatus
from daybook.errors import ConfigError, DaybookError, RunNotFound, RunStuck, Suspended, WorkspaceConflict
from daybook.workspace import snapshot

IGNORED = {
    ".env": "TOKEN=abc\n",
    "node_modules/left-pad/index.js": "module.exports = 1\n",
    "build/app.bin": "\x7fELF",
}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = git_repo(
        tmp_path / "repo",
        {".gitignore": "node_modules/\n.env\nbuild/\n*.db\n", "app.py": "v = 0\n", "keep.md": "untouched\n"},
    )
    for name, text in IGNORED.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def tree(root: Path) -> dict[str, str]:
    """Every file git does not ignore (and outside .git), with its text."""
    out = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {p: (root / p).read_text() for p in sorted(out.split("\0")) if p and (root / p).exists()}


def ignored_files(root: Path) -> dict[str, str]:
    return {name: (root / name).read_text() for name in IGNORED}


@daybook.tool(name="ws_rewind.notify", irreversible=False)
def notify(*, outbox: str, text: str, idempotency_key: str) -> str:
    """An effect outside the workspace: a line appended to an outbox file outside the repo."""
    with open(outbox, "a") as f:
        f.write(f"{idempotency_key} {text}\n")
    return text


@daybook.workflow(name="ws_rewind_seven")
def seven_edits(ctx: daybook.Context, root: str, outbox: str, flavour: str) -> str:
    """Seven edits (each a new module and a bump of app.py), a message after edit 5, then a wait."""
    co = daybook.Checkout(root, keep=None)
    for i in range(1, 8):
        ctx.decide(f"plan {i}", lambda i=i: f"edit {i}")
        co.edit(ctx, {f"mod{i}.py": f"# {flavour} {i}\n", "app.py": f"v = {i}\n"})
        if i == 3:
            co.write(ctx, "scratch.txt", None)  # a remove of a path that never existed
        if i == 5:
            ctx.effect(notify, outbox=outbox, text="halfway")
    ctx.wait_for("review")
    return "done"


def after_edit(n: int, flavour: str = "first") -> dict[str, str]:
    files = {
        ".gitignore": "node_modules/\n.env\nbuild/\n*.db\n",
        "keep.md": "untouched\n",
        "app.py": f"v = {n}\n",
    }
    files.update({f"mod{i}.py": f"# {flavour} {i}\n" for i in range(1, n + 1)})
    return dict(sorted(files.items()))


def edit_steps(book: Daybook, run_id: str) -> list[int]:
    return [
        e.step
        for e in book.journal(run_id)
        if e.kind == Kind.OUTCOME and e.name == "workspace.edit" and e.data["result"].get("applied")
    ]


def seven(book: Daybook, repo: Path, tmp_path: Path, run_id: str) -> list[int]:
    with pytest.raises(Suspended):
        book.run(seven_edits, str(repo), str(tmp_path / "outbox.txt"), "first", run_id=run_id)
    assert tree(repo) == after_edit(7)
    return edit_steps(book, run_id)


def test_rewind_to_after_edit_3_of_7_restores_exactly_those_files_and_reports_ignored_paths(
    book: Daybook, repo: Path, tmp_path: Path
) -> None:
    steps = seven(book, repo, tmp_path, "rw-seven")
    third = steps[2]

    done = book.rewind("rw-seven", third)

    assert tree(repo) == after_edit(3)
    assert ignored_files(repo) == IGNORED  # live state: left as it was
    assert done.live == [".env", "build/", "node_modules/"]
    assert sorted(done.removed) == ["mod4.py", "mod5.py", "mod6.py", "mod7.py"]
    assert done.restored == ["app.py"] and done.exact
    assert book.get_run("rw-seven").status == RunStatus.PENDING


def test_rewind_is_a_journal_branch_whose_later_steps_run_again_and_outside_effects_replay(
    book: Daybook, repo: Path, tmp_path: Path
) -> None:
    steps = seven(book, repo, tmp_path, "rw-branch")
    rows_before = len(book.journal("rw-branch"))
    done = book.rewind("rw-branch", steps[2])

    journal = book.journal("rw-branch")
    branch = journal[-1]
    assert len(journal) == rows_before + 1  # nothing edited or deleted: one row added
    assert branch.kind == Kind.RUN_RETRIED and branch.data["supersede"] == done.superseded
    assert branch.data["branch"] == 1 and branch.data["rewind"]["to"] == steps[2]
    notify_step = next(e.step for e in journal if e.name == "ws_rewind.notify")
    assert done.soft == [notify_step]

    book.signal("rw-branch", "review")
    assert book.resume("rw-branch") == "done"
    assert tree(repo) == after_edit(7)
    # Edits after step 3 ran again under branch keys; the message outside went out once.
    again = [e.key for e in book.journal("rw-branch") if e.kind == Kind.INTENT and e.seq > branch.seq]
    assert again and all(str(k).endswith("~r1") for k in again if k and "notify" not in str(k))
    assert (tmp_path / "outbox.txt").read_text().count("halfway") == 1


def test_each_edit_is_a_snapshot_on_the_runs_hidden_ref_with_its_decision_and_the_reflog_keeps_the_rewind(
    book: Daybook, repo: Path, tmp_path: Path
) -> None:
    steps = seven(book, repo, tmp_path, "rw-ref")
    root = str(repo)
    chain = [snapshot.read(root, c) for c in snapshot.chain(root, "rw-ref")]
    assert [s.step for s in chain] == [0, *steps]
    assert all(s.decision and s.decision.startswith("rw-ref/") for s in chain[1:])
    assert chain[1].bytes == len("# first 1\n") + len("v = 1\n")
    # Not a branch, not in `git log --all`'s usual refs/heads: a hidden ref per run.
    heads = subprocess.run(["git", "-C", root, "branch", "--list"], capture_output=True, text=True).stdout
    assert "daybook" not in heads and snapshot.ref_for("rw-ref").startswith("refs/daybook/runs/")

    book.rewind("rw-ref", steps[2])
    log = snapshot.reflog(root, "rw-ref")
    assert "rewind to step" in log[0] and f"edit step {steps[-1]}" in log[1]
    assert len(log) == len(steps) + 1


def test_compaction_keeps_the_k_most_recent_snapshots_and_one_per_older_decision(
    book: Daybook, repo: Path
) -> None:
    @daybook.workflow(name="ws_rewind_compact")
    def many(ctx: daybook.Context, root: str) -> list[int]:
        co = daybook.Checkout(root, keep=2)
        plan = ctx.decide("plan", lambda: "two decisions")
        for i in range(3):
            co.write(ctx, "a.txt", f"a{i}\n")
        ctx.decide("plan again", lambda: plan.value)
        for i in range(3):
            co.write(ctx, "b.txt", f"b{i}\n")
        ctx.wait_for("review")
        return []

    with pytest.raises(Suspended):
        book.run(many, str(repo), run_id="rw-compact")
    root = str(repo)
    chain = [snapshot.read(root, c) for c in snapshot.chain(root, "rw-compact")]
    steps = edit_steps(book, "rw-compact")
    # Base, the last snapshot of the first decision, the last of the second's older ones, the 2 newest.
    assert [s.step for s in chain] == [0, steps[2], steps[3], steps[4], steps[5]]

    # Off the ref, a compacted snapshot is still in git while the reflog names it: exact.
    done = book.rewind("rw-compact", steps[1], dry_run=True)
    assert done.exact and done.checkouts[root]["step"] == steps[1] and done.restored == ["a.txt"]
    assert tree(repo)["a.txt"] == "a2\n"  # a dry run changes nothing
    # Once git has pruned it, the newest snapshot kept up to that step stands in, and says so.
    subprocess.run(["git", "-C", root, "reflog", "expire", "--expire-unreachable=now", "--all"], check=True)
    subprocess.run(["git", "-C", root, "gc", "-q", "--prune=now"], check=True)
    pruned = book.rewind("rw-compact", steps[1], dry_run=True)
    assert not pruned.exact and pruned.checkouts[root]["step"] == 0


def test_rewind_from_the_command_line_prints_what_it_restored(
    db_url: str, repo: Path, tmp_path: Path
) -> None:
    with Daybook(db_url) as book:
        steps = seven(book, repo, tmp_path, "rw-cli")

    shown = cli_in_process("rewind", "rw-cli", "--to", str(steps[2]), "--json", db=db_url)
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    assert report["live"] == [".env", "build/", "node_modules/"] and tree(repo) == after_edit(3)

    listed = cli_in_process("snapshots", "rw-cli", str(repo), db=db_url)
    assert listed.returncode == 0, listed.stderr
    assert "rewind to step" in listed.stdout


def test_rewind_refuses_bad_input_with_errors_that_say_what_to_do(
    book: Daybook, repo: Path, tmp_path: Path
) -> None:
    steps = seven(book, repo, tmp_path, "rw-bad")

    with pytest.raises(ConfigError, match=r"has no step 999.*--to 0"):
        book.rewind("rw-bad", 999)
    with pytest.raises(ConfigError, match="step number"):
        book.rewind("rw-bad", -1)
    with pytest.raises(RunNotFound):
        book.rewind("no-such-run", 1)

    @daybook.workflow(name="ws_rewind_none")
    def no_workspace(ctx: daybook.Context) -> None:
        ctx.wait_for("never")

    with pytest.raises(Suspended):
        book.run(no_workspace, run_id="rw-none")
    with pytest.raises(ConfigError, match="no workspace edits"):
        book.rewind("rw-none", 1)

    # A dirty checkout: a path the run edited, changed since by someone else.
    (repo / "app.py").write_text("v = 'a person was here'\n")
    before = tree(repo)
    with pytest.raises(WorkspaceConflict, match=r"app\.py.*--force"):
        book.rewind("rw-bad", steps[2])
    assert tree(repo) == before and book.get_run("rw-bad").status == RunStatus.SUSPENDED
    assert issubclass(WorkspaceConflict, DaybookError)

    done = book.rewind("rw-bad", steps[2], force=True)
    assert tree(repo) == after_edit(3) and "app.py" in done.restored


def test_a_completed_run_is_not_rewound(book: Daybook, repo: Path) -> None:
    @daybook.workflow(name="ws_rewind_done")
    def one(ctx: daybook.Context, root: str) -> str:
        daybook.Checkout(root).write(ctx, "x.txt", "x\n")
        return "ok"

    book.run(one, str(repo), run_id="rw-done")
    with pytest.raises(ConfigError, match=r"completed.*fork"):
        book.rewind("rw-done", 0)


def test_rewind_to_zero_goes_back_to_before_the_first_edit(book: Daybook, repo: Path, tmp_path: Path) -> None:
    seven(book, repo, tmp_path, "rw-zero")
    original = {
        ".gitignore": "node_modules/\n.env\nbuild/\n*.db\n",
        "app.py": "v = 0\n",
        "keep.md": "untouched\n",
    }

    done = book.rewind("rw-zero", 0)

    assert tree(repo) == original
    assert done.restored == ["app.py"]


def test_a_kill_between_restoring_files_and_the_branch_row_is_finished_by_a_second_rewind(
    book: Daybook, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps = seven(book, repo, tmp_path, "rw-twice")
    from daybook.runtime import operator

    def crash(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt  # the process dies after the files, before the row

    monkeypatch.setattr(operator, "retry", crash)
    with pytest.raises(KeyboardInterrupt):
        book.rewind("rw-twice", steps[2])
    assert tree(repo) == after_edit(3)
    monkeypatch.undo()

    done = book.rewind("rw-twice", steps[2])

    assert tree(repo) == after_edit(3) and book.get_run("rw-twice").status == RunStatus.PENDING
    assert done.restored == [] and done.removed == []  # the first call had done it all


@daybook.workflow(name="ws_rewind_model")
def model_edits(ctx: daybook.Context, root: str) -> None:
    """A scripted model writes each file: the snapshots carry what each diff's decision cost."""
    llm = daybook.ScriptedLLM(lambda prompt: f"content for {prompt}\n", model="gpt-4o-mini")
    co = daybook.Checkout(root)
    for name in ("a.py", "b.py"):
        answer = ctx.llm(llm, name)
        co.write(ctx, name, str(answer.value["text"]))
    ctx.wait_for("review")


def test_each_snapshot_lists_its_decision_and_what_the_steps_before_it_cost(
    book: Daybook, repo: Path
) -> None:
    with pytest.raises(Suspended):
        book.run(model_edits, str(repo), run_id="rw-cost")

    rows = book.snapshots("rw-cost", str(repo))

    assert [r["files"] for r in rows] == [0, 1, 2]
    base, first, second = rows
    assert base["tokens"] == 0
    assert first["tokens"] > 0 and second["tokens"] > 0 and first["usd"] > 0
    calls = sorted(
        {e.step for e in book.journal("rw-cost") if e.kind == Kind.DECISION and e.name.startswith("llm")}
    )
    assert [first["decision"], second["decision"]] == [f"rw-cost/{step}" for step in calls]
    assert rows[2]["seconds"] >= 0 and rows[1]["bytes"] == len("content for a.py\n")


@daybook.workflow(name="ws_rewind_undo")
def edit_then_undo(ctx: daybook.Context, root: str) -> list[str]:
    co = daybook.Checkout(root)
    co.edit(ctx, {"app.py": "v = 1\n", "new.py": "new\n"})
    co.write(ctx, "keep.md", None)
    report = ctx.compensate()
    return list(report.compensated)


def test_compensation_puts_the_files_back_and_records_the_undo_on_the_runs_ref(
    book: Daybook, repo: Path
) -> None:
    original = tree(repo)

    undone = book.run(edit_then_undo, str(repo), run_id="rw-undo")

    assert len(undone) == 2 and tree(repo) == original
    log = snapshot.reflog(str(repo), "rw-undo")
    assert log[0].split(" ", 1)[1].startswith("daybook: undo of the edit at step")
    # Undone twice (a replay of the finished run) changes nothing more.
    assert book.resume("rw-undo") == undone and tree(repo) == original


def test_cancel_with_compensate_restores_a_coding_runs_files(
    book: Daybook, repo: Path, tmp_path: Path
) -> None:
    original = tree(repo)
    seven(book, repo, tmp_path, "rw-cancel")

    # Every edit is undone; the message sent halfway has no inverse and is what remains.
    with pytest.raises(RunStuck, match=r"no inverse for \['rw-cancel/\d+'\]"):
        book.cancel("rw-cancel", compensate=True, app=[str(Path(__file__))])

    assert tree(repo) == original and ignored_files(repo) == IGNORED


def test_an_undo_refuses_a_file_changed_after_the_edit(book: Daybook, repo: Path, tmp_path: Path) -> None:
    seven(book, repo, tmp_path, "rw-undo-conflict")
    (repo / "mod7.py").write_text("# a person's fix\n")

    with pytest.raises(DaybookError):
        book.cancel("rw-undo-conflict", compensate=True, app=[str(Path(__file__))])

    assert (repo / "mod7.py").read_text() == "# a person's fix\n"


@daybook.workflow(name="ws_rewind_undo_then_wait")
def edit_undo_wait(ctx: daybook.Context, root: str) -> None:
    co = daybook.Checkout(root)
    co.write(ctx, "app.py", "v = 'tried'\n")
    ctx.compensate()
    co.write(ctx, "other.py", "after the undo\n")
    ctx.wait_for("review")


def test_a_rewind_puts_back_the_files_of_its_step_whether_before_or_after_an_undo(
    book: Daybook, repo: Path
) -> None:
    with pytest.raises(Suspended):
        book.run(edit_undo_wait, str(repo), run_id="rw-undo-step")
    journal = book.journal("rw-undo-step")
    edit = next(e.step for e in journal if e.name == "workspace.edit" and e.kind == Kind.OUTCOME)
    undo = next(e.step for e in journal if e.name == "workspace.unedit" and e.kind == Kind.OUTCOME)
    assert (repo / "app.py").read_text() == "v = 0\n" and (repo / "other.py").exists()

    after_undo = book.rewind("rw-undo-step", undo, dry_run=True)
    assert after_undo.removed == ["other.py"] and "app.py" in after_undo.unchanged

    book.rewind("rw-undo-step", edit)
    assert (repo / "app.py").read_text() == "v = 'tried'\n" and not (repo / "other.py").exists()


PATCH = daybook.Skeleton("Patch", outputs=("{entity}",))
TEST_FAILURES: list[int] = []


@daybook.tool(name="ws_rewind.run_tests", idempotent=True, irreversible=False)
def run_tests(*, root: str, idempotency_key: str) -> str:
    if TEST_FAILURES:
        TEST_FAILURES.pop()
        raise RuntimeError("2 tests failed")
    return "green"


@daybook.workflow(name="ws_rewind_recover")
def patch_and_test(ctx: daybook.Context, root: str) -> str:
    co = daybook.Checkout(root)
    with ctx.subtask(PATCH, "app.py", reads=[]) as u:
        co.write(ctx, "app.py", "v = 1\n")
        co.write(ctx, "new.py", "new\n")
        verdict: str = ctx.effect(run_tests, root=root)
        u.exit(**{"app.py": 1})
    return verdict


def test_a_recovery_undoes_the_failed_subtasks_edits_before_it_runs_them_again(
    book: Daybook, repo: Path
) -> None:
    TEST_FAILURES[:] = [1]
    with pytest.raises(daybook.RunFailed):
        book.run(patch_and_test, str(repo), run_id="rw-recover")

    rec = book.recover("rw-recover")

    assert rec.result == "green" and len(rec.compensated) == 2
    assert tree(repo)["app.py"] == "v = 1\n" and tree(repo)["new.py"] == "new\n"
    log = snapshot.reflog(str(repo), "rw-recover")
    assert sum("undo of the edit" in line for line in log) == 2  # put back, then edited again


def test_the_web_recovery_view_shows_a_rewind_as_a_journal_branch_with_the_files_it_restored(
    book: Daybook, repo: Path, tmp_path: Path
) -> None:
    from starlette.testclient import TestClient

    from daybook.web.app import build

    steps = seven(book, repo, tmp_path, "rw-web")
    book.rewind("rw-web", steps[2])

    client = TestClient(build(book))
    got = client.get("/api/views/recovery", params={"run": "rw-web", "branch": "r1"}).json()
    page = client.get("/runs/rw-web", params={"view": "recovery", "branch": "r1"})

    assert "Rewind 1" in got["summary"] and "mod4.py" in got["summary"] and "node_modules/" in got["summary"]
    assert page.status_code == 200 and "Rewind 1" in page.text
