"""The execution cursor's verbs: the only way code outside `daybook.journal` moves it."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import pytest

from daybook.journal.execution import BranchCut, Execution, RunSettings
from daybook.records import Event, Kind
from daybook.store import Store, open_store


def _rows(run_id: str, steps: int) -> list[Event]:
    return [
        Event(run_id=run_id, seq=i, kind=Kind.DECISION.value, step=i, name=f"d{i}", at=0.0)
        for i in range(1, steps + 1)
    ]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return open_store(f"sqlite:///{tmp_path / 'cursor.db'}")


def test_settings_are_fixed_when_the_cursor_is_built(store: Store) -> None:
    exe = Execution(store, "r", [], None, settings=RunSettings(inline_wait=0.5, deadline=9.0))
    assert (exe.settings.inline_wait, exe.settings.deadline) == (0.5, 9.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        exe.settings.inline_wait = 1.0  # type: ignore[misc]
    with pytest.raises(AttributeError):
        exe.next_step = 3  # type: ignore[misc]


def test_skip_through_start_at_and_revisit_move_the_next_step(store: Store) -> None:
    exe = Execution(store, "r", _rows("r", 5), None)
    assert (exe.next_step, exe.recorded_steps, exe.next_seq) == (1, 5, 6)
    exe.skip_through(2)
    assert exe.next_step == 3 and 1 not in exe.steps and 2 not in exe.steps and 3 in exe.steps
    with exe.revisit(1, _rows("r", 1)):
        assert exe.next_step == 1 and exe.steps[1][0].name == "d1"
    assert exe.next_step == 3
    exe.jump_to(10)
    assert exe.next_step == 10 and 3 in exe.steps

    later = Execution(store, "r", _rows("r", 5), None)
    later.start_at(4)
    assert (later.next_step, sorted(later.steps), later.recorded_steps) == (4, [4, 5], 5)


def test_a_live_hook_fires_once_at_its_step_or_at_the_first_live_step(store: Store) -> None:
    calls: list[int] = []
    exe = Execution(store, "r", _rows("r", 3), None)
    exe.at_live(lambda: calls.append(exe.next_step), 2)
    exe.alloc()
    assert calls == []
    exe.alloc()
    assert calls == [2]
    exe.alloc()
    exe.alloc()  # live now: the hook is gone
    assert calls == [2]

    dropped = Execution(store, "r", [], None)

    def hook() -> None:
        calls.append(-1)

    dropped.at_live(hook)
    dropped.drop_live(hook)
    dropped.alloc()
    assert calls == [2]


def test_a_pause_is_taken_once(store: Store) -> None:
    paused = Event(run_id="r", seq=4, kind=Kind.RUN_PAUSED.value, step=None, name="pause", at=7.0)
    exe = Execution(store, "r", [*_rows("r", 3), paused], None)
    assert exe.take_paused_at() == 7.0
    assert exe.take_paused_at() is None


def test_a_branch_shares_the_journal_and_writes_its_own_block(store: Store) -> None:
    exe = Execution(store, "r", _rows("r", 3), None)
    twin = exe.branch(100, threading.Lock())
    assert twin.next_step == 100 and exe.next_step == 1
    assert twin.steps is exe.steps and twin.consumed is exe.consumed
    twin.alloc()
    assert (twin.next_step, exe.next_step) == (101, 1)
    twin.cut(threading.get_ident())
    with pytest.raises(BranchCut):
        twin.append(Kind.DECISION, 100, "late")
    with pytest.raises(TypeError):
        exe.cut(threading.get_ident())
