"""Store contract, inbox part: signals to runs and the approvers, on every backend."""

from __future__ import annotations

import json
from collections.abc import Callable

from daybook.store import Store

from .contract import NOW


def test_signals_to_a_live_run_are_kept_in_arrival_order_and_wake_it(
    store: Store, new_run: Callable[..., str]
) -> None:
    new_run("r1", status="suspended", wake_at=NOW + 1000)
    first = store.signal("r1", "go", json.dumps({"b": 1, "a": 2}), "alice", NOW)
    second = store.signal("r1", "stop", "null", "bob", NOW + 1)
    assert first is not None and second is not None and second > first
    got = store.inbox("r1")
    assert [(n, s) for _, n, _, s, _ in got] == [("go", "alice"), ("stop", "bob")]
    assert list(json.loads(got[0][2])) == ["b", "a"]
    info = store.get_run("r1")
    assert info is not None and info.wake_at == NOW + 1  # due at once, by the latest


def test_a_signal_that_does_not_wake_is_kept_without_moving_the_run(
    store: Store, new_run: Callable[..., str]
) -> None:
    new_run("r1", status="suspended", wake_at=NOW + 1000)
    assert store.signal("r1", "verdict", "{}", "carol", NOW, wake=False) is not None
    info = store.get_run("r1")
    assert info is not None and info.wake_at == NOW + 1000


def test_a_signal_to_a_missing_or_finished_run_is_refused_unless_any_status(
    store: Store, new_run: Callable[..., str]
) -> None:
    new_run("done", status="completed")
    assert store.signal("nope", "go", "{}", "me", NOW) is None
    assert store.signal("done", "go", "{}", "me", NOW) is None
    assert store.signal("done", "late", "{}", "me", NOW, any_status=True) is not None
    assert [n for _, n, _, _, _ in store.inbox("done")] == ["late"]
    info = store.get_run("done")
    assert info is not None and info.wake_at is None  # a finished run is never woken


def test_a_new_approver_token_replaces_the_old_one(store: Store) -> None:
    store.set_approver("carol", "hash-1", NOW)
    store.set_approver("dave", "hash-2", NOW)
    store.set_approver("carol", "hash-3", NOW + 1)
    assert store.approvers() == {"carol": "hash-3", "dave": "hash-2"}
