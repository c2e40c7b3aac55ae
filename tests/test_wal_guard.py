"""A SQLite store whose write-ahead log is deleted under a live writer (audit D15) accepts no
more commits, so no act runs after its intent could no longer be made durable."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import daybook
from daybook import Daybook

ACTS: list[int] = []


@daybook.tool
def act(*, i: int, idempotency_key: str) -> int:
    ACTS.append(i)
    return i


@daybook.workflow
def cut(ctx: daybook.Context, wal: str) -> int:
    ctx.effect(act, i=1)
    ctx.decide("lose the log", lambda: os.remove(wal))
    return int(ctx.effect(act, i=2))


def test_no_act_runs_once_the_write_ahead_log_was_deleted(tmp_path: Path) -> None:
    ACTS.clear()
    path = tmp_path / "j.db"
    with (
        Daybook(f"sqlite:///{path}") as book,
        pytest.raises(daybook.StoreUnavailable, match="write-ahead log"),
    ):
        book.run(cut, f"{path}-wal", run_id="w")
    assert ACTS == [1]  # the second act never ran: its intent could not be made durable


def test_without_the_guard_the_writer_acknowledges_commits_into_a_deleted_log(tmp_path: Path) -> None:
    # The behaviour SQLite alone gives (what the audit saw): commits go on "succeeding".
    ACTS.clear()
    path = tmp_path / "j.db"
    with Daybook(f"sqlite:///{path}") as book:
        book.store.inner._group._guard = None  # type: ignore[attr-defined]
        assert book.run(cut, f"{path}-wal", run_id="w") == 2
    assert ACTS == [1, 2]
