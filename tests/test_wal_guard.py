"""A SQLite store whose write-ahead log is deleted under a live writer (audit D15) accepts no
more commits once the watch has looked (at most `wal.INTERVAL` after the deletion), so no act
runs after its intent could no longer be made durable."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

import daybook
from daybook import Daybook
from daybook.store import wal

ACTS: list[int] = []


@daybook.tool
def act(*, i: int, idempotency_key: str) -> int:
    ACTS.append(i)
    return i


@daybook.workflow
def cut(ctx: daybook.Context, path: str) -> int:
    ctx.effect(act, i=1)
    ctx.decide("lose the log", lambda: _remove(path))
    return int(ctx.effect(act, i=2))


def _remove(path: str) -> None:
    # Deleted by another process some time ago, as an operator's `rm` would: the watch looks
    # at most every INTERVAL seconds, so a deletion older than that is always seen.
    os.remove(path)
    time.sleep(2 * wal.INTERVAL)


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


def test_the_refusal_is_for_good(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    with Daybook(f"sqlite:///{path}") as book:
        with pytest.raises(daybook.StoreUnavailable):
            book.run(cut, f"{path}-wal", run_id="w")
        with pytest.raises(daybook.StoreUnavailable, match="write-ahead log"):
            book.run(cut, f"{path}-wal", run_id="w2")  # however soon after: no commit passes
