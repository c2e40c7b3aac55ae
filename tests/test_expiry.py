"""Retention (S5): resuming within the window works; past it `gc` expires the paused run, and a
finished run whose environment was kept (S5: for every terminal status), resuming raises
RunExpired, and only a workspace declared disposable is removed."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from conftest import cli_in_process

import daybook
from daybook import Daybook, RunStatus


@daybook.workflow
def drafting(ctx: daybook.Context, workdir: str, disposable: bool) -> str:
    where = ctx.environment(workdir, remove_on_expiry=disposable)
    Path(where, "draft.txt").write_text("draft")
    ctx.wait_for("go", timeout=3600)
    return Path(where, "draft.txt").read_text()


def _paused(book: Daybook, run_id: str, workdir: Path, disposable: bool) -> None:
    workdir.mkdir()
    book.inline_wait = 0
    with pytest.raises(daybook.Suspended):
        book.run(drafting, str(workdir), disposable, run_id=run_id)
    assert book.pause(run_id) == "paused"


def test_within_the_window_a_paused_run_resumes_and_past_it_gc_expires_it(
    book: Daybook, tmp_path: Path
) -> None:
    _paused(book, "young", tmp_path / "young", False)
    assert book.gc(2.0)["expired"] == []  # 2 s window: still inside it
    book.signal("young", "go")
    assert book.resume("young") == "draft"

    _paused(book, "old", tmp_path / "old", True)
    _paused(book, "kept", tmp_path / "kept", False)
    time.sleep(0.3)
    # "young" completed with its workspace kept: past the window it expires too.
    would = sorted(r["run_id"] for r in book.gc(0.2, dry_run=True)["expired"])  # type: ignore[union-attr,index]
    assert would == ["kept", "old", "young"]
    done = book.gc(0.2, by="ops")
    expired = {r["run_id"]: r for r in done["expired"]}  # type: ignore[union-attr]
    assert set(expired) == {"old", "kept", "young"}
    assert expired["young"]["from"] == "completed" and (tmp_path / "young" / "draft.txt").exists()
    assert expired["old"]["removed"] is True and not (tmp_path / "old").exists()
    assert expired["kept"]["removed"] is False and (tmp_path / "kept" / "draft.txt").exists()
    assert book.get_run("old").status == RunStatus.EXPIRED
    with pytest.raises(daybook.RunExpired, match="expired"):
        book.resume("old")
    with pytest.raises(daybook.ConfigError, match="cannot be retried: it expired"):
        book.retry("kept")
    marks = [ev for ev in book.journal("old") if ev.kind == "run_expired"]
    assert marks[0].data["by"] == "ops"


def test_daybook_gc_says_which_paused_runs_it_expired(db_url: str, tmp_path: Path) -> None:
    with Daybook(db_url) as book:
        _paused(book, "p", tmp_path / "p", False)
    time.sleep(0.2)
    out = cli_in_process("gc", "--older-than", "0.1s", db=db_url)
    assert out.returncode == 0, out.stderr
    assert "expired paused run p" in out.stdout and "kept" in out.stdout


def test_a_cancelled_run_keeps_its_workspace_until_the_window_then_expires(
    book: Daybook, tmp_path: Path
) -> None:
    (tmp_path / "c").mkdir()
    book.inline_wait = 0
    with pytest.raises(daybook.Suspended):
        book.run(drafting, str(tmp_path / "c"), True, run_id="c")
    book.cancel("c")
    assert book.gc(60.0)["expired"] == [] and (tmp_path / "c" / "draft.txt").exists()  # inside the window
    time.sleep(0.3)
    [done] = book.gc(0.2)["expired"]  # type: ignore[misc]
    assert done["run_id"] == "c" and done["from"] == "cancelled" and done["removed"] is True  # type: ignore[index]
    assert not (tmp_path / "c").exists() and book.get_run("c").status == RunStatus.EXPIRED
