"""Store contract, journal part: a run's header and its append-only journal, on every backend."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from daybook.errors import ConfigError, DuplicateKey, LeaseLost
from daybook.store import Store

from .contract import NOW, header, row, started


def test_a_run_is_created_once_with_its_first_row(store: Store) -> None:
    assert store.create_run(header("r1"), started("r1"))
    assert not store.create_run(header("r1", input={"n": 2}), started("r1"))
    info = store.get_run("r1")
    assert info is not None and info.input == {"n": 1} and info.status == "running"
    assert [e.kind for e in store.load("r1")] == ["run_started"]
    assert store.get_run("nope") is None


def test_appended_rows_read_back_exactly_in_seq_order(store: Store, new_run: Callable[..., str]) -> None:
    new_run("r1")
    data = {"z": 1, "a": [1.5, "é ✓", None], "m": {"b": True, "a": "x"}}  # key order kept
    for seq in (3, 2):
        store.append(row("r1", seq, data=data))
    got = store.load("r1")
    assert [e.seq for e in got] == [1, 2, 3]
    assert got[2].data == data and list(got[2].data) == ["z", "a", "m"]
    assert list(got[2].data["m"]) == ["b", "a"]  # type: ignore[arg-type]


def test_a_taken_seq_is_a_lost_lease_and_a_reused_key_a_duplicate_key(
    store: Store, new_run: Callable[..., str]
) -> None:
    new_run("r1")
    store.append(row("r1", 2, kind="intent", key="k-1", data={"args": {}}))
    with pytest.raises(LeaseLost):
        store.append(row("r1", 2, name="other"))
    with pytest.raises(DuplicateKey):
        store.append(row("r1", 3, kind="intent", key="k-1", data={"args": {}}))
    with pytest.raises(LeaseLost):  # a taken seq and a taken key: the seq's fault
        store.append(row("r1", 2, kind="intent", key="k-1", data={"args": {}}))
    assert [e.seq for e in store.load("r1")] == [1, 2]


def test_a_batch_of_rows_commits_all_or_none(store: Store, new_run: Callable[..., str]) -> None:
    """`append_batch`: a held outcome and the run's next row in one transaction (one fsync)."""
    new_run("r1")
    store.append(row("r1", 2, kind="intent", key="k-1", data={"args": {}}))
    store.append_batch(
        [row("r1", 3, kind="outcome", status="confirmed"), row("r1", 4, kind="intent", key="k-2")]
    )
    assert [e.seq for e in store.load("r1")] == [1, 2, 3, 4]
    # A reused key on the last row: neither row lands, and the refusal names the key.
    with pytest.raises(DuplicateKey):
        store.append_batch([row("r1", 5, kind="outcome"), row("r1", 6, kind="intent", key="k-1")])
    # A taken seq on the last row: the first row, free, does not land either.
    with pytest.raises(LeaseLost):
        store.append_batch([row("r1", 5, kind="outcome"), row("r1", 4, name="other")])
    assert [e.seq for e in store.load("r1")] == [1, 2, 3, 4]


def test_finish_records_the_end_with_its_row_only_for_the_lease_holder(
    store: Store, new_run: Callable[..., str]
) -> None:
    new_run("r1")
    assert store.claim("r1", "w1", 30, NOW, None)
    with pytest.raises(LeaseLost):
        store.finish("r1", "w2", "completed", 7, None, row("r1", 2, kind="run_completed", step=None), NOW)
    store.finish("r1", "w1", "completed", {"ok": 7}, None, row("r1", 2, kind="run_completed", step=None), NOW)
    info = store.get_run("r1")
    assert info is not None and (info.status, info.result, info.lease_owner) == ("completed", {"ok": 7}, None)
    assert [e.kind for e in store.load("r1")] == ["run_started", "run_completed"]


def test_a_cancelled_run_stays_cancelled_when_its_old_owner_finishes(
    store: Store, new_run: Callable[..., str]
) -> None:
    new_run("r1")
    assert store.claim("r1", "w1", 30, NOW, None)
    cancel = row("r1", 2, kind="run_cancelled", step=None, data={"by": "ops"})
    assert store.transition("r1", ("running",), "cancelled", None, cancel, NOW)
    with pytest.raises(LeaseLost):
        store.finish("r1", "w1", "completed", 1, None, None, NOW)
    info = store.get_run("r1")
    assert info is not None and info.status == "cancelled"


def test_an_operator_transition_moves_a_run_only_from_the_allowed_statuses(
    store: Store, new_run: Callable[..., str]
) -> None:
    new_run("r1", status="failed")
    retried = row("r1", 2, kind="run_retried", step=None)
    assert not store.transition("r1", ("needs_attention",), "pending", None, retried, NOW)
    assert store.transition("r1", ("failed",), "pending", {"was": "boom"}, retried, NOW + 1)
    info = store.get_run("r1")
    assert info is not None and (info.status, info.error, info.wake_at) == (
        "pending",
        {"was": "boom"},
        NOW + 1,
    )
    with pytest.raises(LeaseLost):  # the row's seq was taken meanwhile: nothing written
        store.transition(
            "r1", ("pending",), "cancelled", None, row("r1", 2, kind="run_cancelled", step=None), NOW
        )
    info = store.get_run("r1")
    assert info is not None and info.status == "pending"


def test_listings_show_newest_first_and_filter_by_status(store: Store, new_run: Callable[..., str]) -> None:
    new_run("old", created_at=NOW)
    new_run("new", created_at=NOW + 5, status="completed")
    assert [r.run_id for r in store.list_runs()] == ["new", "old"]
    assert [r.run_id for r in store.list_runs("completed")] == ["new"]
    assert [r.run_id for r in store.list_runs(limit=1)] == ["new"]


def test_a_page_of_the_runs_list_and_its_counts_are_read_with_its_filters(
    store: Store, new_run: Callable[..., str]
) -> None:
    for i in range(7):  # r6 newest; r0, r2, r4, r6 completed; workflow wf-even / wf-odd
        new_run(
            f"r{i}",
            status="completed" if i % 2 == 0 else "failed",
            workflow="wf-even" if i % 2 == 0 else "wf-odd",
            input={"city": "Zürich" if i == 3 else "Lyon", "i": i},
            created_at=NOW + i,
        )
    new_run("tie-b", created_at=NOW + 3)  # a tie on created_at is broken by run id
    new_run("tie-a", created_at=NOW + 3)

    def ids(filters: dict[str, Any], limit: int = 100, offset: int = 0) -> list[str]:
        return [r.run_id for r in store.runs_page(filters, limit, offset)]

    every = ids({})
    assert every == ["r6", "r5", "r4", "r3", "tie-a", "tie-b", "r2", "r1", "r0"]
    assert ids({}, 3) == every[:3] and ids({}, 3, 3) == every[3:6] and ids({}, 3, 8) == every[8:]
    assert ids({}, 3, 9) == []
    assert store.run_counts({}) == {"completed": 4, "failed": 3, "running": 2}
    assert ids({"status": "failed"}) == ["r5", "r3", "r1"]
    assert ids({"workflow": "odd"}) == ["r5", "r3", "r1"]  # text the workflow name contains
    assert ids({"workflow": "wf", "status": "running"}) == ["tie-a", "tie-b"]
    assert ids({"workflow": "wf-", "status": "running"}) == []
    assert ids({"text": "tie"}) == ["tie-a", "tie-b"]  # the run id
    assert ids({"text": "Zürich"}) == ["r3"]  # the input as stored
    assert ids({"since": NOW + 4}) == ["r6", "r5", "r4"]
    only = {"status": "completed", "since": NOW + 1}
    assert ids(only) == ["r6", "r4", "r2"] and store.run_counts(only) == {"completed": 3}
    keyed = {**only, "run": "r1"}  # a run listed whatever the other filters say
    assert ids(keyed) == ["r6", "r4", "r2", "r1"]
    assert store.run_counts(keyed) == {"completed": 3, "failed": 1}
    assert ids({"status": "", "workflow": "", "text": "", "since": None, "run": ""}) == every
    assert ids({"text": "%"}) == [] and ids({"workflow": "_"}) == []  # no LIKE patterns
    with pytest.raises(ConfigError):
        store.runs_page({"colour": "red"}, 10)


def test_a_follower_reads_only_the_rows_after_the_last_it_saw(
    store: Store, new_run: Callable[..., str]
) -> None:
    new_run("r1")
    for seq in range(2, 6):
        store.append(row("r1", seq))
    assert [e.seq for e in store.load("r1", 3)] == [4, 5]
    assert [e.seq for e in store.load("r1", 0, 1)] == [1]
    assert [e.seq for e in store.load("r1", 1, 3)] == [2, 3]
    assert store.load("r1", 5) == [] and store.load("nope", 0) == []
    assert store.load("r1", 2) == store.load("r1")[2:]


def test_open_effects_are_the_unsettled_ones_and_intents_are_found_by_key(
    store: Store, new_run: Callable[..., str]
) -> None:
    new_run("r1")
    store.append(row("r1", 2, kind="intent", step=2, key="k-a", data={"args": {}}))
    store.append(row("r1", 3, kind="outcome", step=2, key="k-a", status="confirmed", data={"value": 1}))
    store.append(row("r1", 4, kind="intent", step=3, key="k-b", data={"args": {}}))
    store.append(row("r1", 5, kind="intent", step=4, key="k-c", data={"args": {}}))
    store.append(row("r1", 6, kind="outcome", step=4, key="k-c", status="unknown", data={}))
    assert sorted((e.key, e.kind) for e in store.open_effects()) == [("k-b", "intent"), ("k-c", "outcome")]
    found = store.find_intent("k-a")
    assert found is not None and (found.run_id, found.step) == ("r1", 2)
    assert store.find_intent("k-none") is None
    assert [e.key for e in store.events_of_kind("intent")] == ["k-a", "k-b", "k-c"]
