"""Store contract, epochs part: Atomix transaction headers, each moved with its journal row."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from daybook.errors import LeaseLost
from daybook.store import Store

from .contract import NOW, row


def _begin(store: Store, tx_id: str, run_id: str, seq: int) -> int:
    return store.tx_begin(tx_id, run_id, '["a/**"]', 1, 3, row(run_id, seq, name="tx:begin"), NOW + seq)


def test_epochs_increase_and_the_begin_row_carries_its_epoch(
    store: Store, new_run: Callable[..., str]
) -> None:
    new_run("r1")
    first, second = _begin(store, "t1", "r1", 2), _begin(store, "t2", "r1", 3)
    assert second > first > 0
    assert [e.data.get("epoch") for e in store.load("r1")[1:]] == [first, second]
    rows = store.tx_rows()
    assert [(r[0], r[2], r[3], r[4], r[5], r[6]) for r in rows] == [
        ("t1", first, '["a/**"]', "open", 1, 3), ("t2", second, '["a/**"]', "open", 1, 3),
    ]  # fmt: skip


def test_epochs_drawn_by_racing_handles_are_all_different(
    db_url: str, store: Store, new_run: Callable[..., str]
) -> None:
    from daybook.store import open_store

    for n in range(4):
        new_run(f"r{n}")
    epochs: list[int] = []

    def begin(n: int) -> None:
        handle = open_store(db_url)
        try:
            for i in range(5):
                epochs.append(_begin(handle, f"t{n}-{i}", f"r{n}", i + 2))
        finally:
            handle.close()

    threads = [threading.Thread(target=begin, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(epochs)) == 20
    assert [r[2] for r in store.tx_rows()] == sorted(epochs)


def test_threads_of_one_handle_begin_at_once_and_only_the_refused_one_fails(
    store: Store, new_run: Callable[..., str]
) -> None:
    # Begins sent at once may share one commit (group commit): a refused one (its journal
    # row's seq is taken) fails alone, and the others are all written.
    for n in range(8):
        new_run(f"r{n}")
    store.append(row("r0", 2))
    epochs: dict[int, int] = {}
    refused: list[int] = []
    ready = threading.Barrier(8)

    def begin(n: int) -> None:
        ready.wait()
        try:
            epochs[n] = _begin(store, f"t{n}", f"r{n}", 2)
        except LeaseLost:
            refused.append(n)

    threads = [threading.Thread(target=begin, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert refused == [0] and sorted(epochs) == list(range(1, 8))
    assert len(set(epochs.values())) == 7
    assert sorted((r[2], r[0]) for r in store.tx_rows()) == sorted((e, f"t{n}") for n, e in epochs.items())
    for n, epoch in epochs.items():
        assert store.load(f"r{n}")[-1].data["epoch"] == epoch


def test_a_header_ends_once_with_its_row_and_wakes_waiters(store: Store, new_run: Callable[..., str]) -> None:
    new_run("r1")
    _begin(store, "t1", "r1", 2)
    signal = store.tx_signal()
    seen = signal.generation()
    assert store.tx_mark("t1", "committing", row("r1", 3, name="tx:commit"), NOW)
    assert store.tx_mark("t1", "committed", row("r1", 4, name="tx:end"), NOW)
    assert signal.wait(seen, 5.0) != seen  # an end moved it
    assert not store.tx_mark("t1", "aborted", row("r1", 5, name="tx:abort"), NOW)  # ended already
    assert [e.name for e in store.load("r1")][1:] == ["tx:begin", "tx:commit", "tx:end"]
    assert store.tx_rows(open_only=True) == []


def test_a_header_passes_a_status_with_both_rows_in_one_write(
    store: Store, new_run: Callable[..., str]
) -> None:
    new_run("r1")
    _begin(store, "t1", "r1", 2)
    store.append(row("r1", 4))  # the end row's seq is taken: neither row is written
    with pytest.raises(LeaseLost):
        store.tx_mark("t1", "committed", row("r1", 4, name="tx:end"), NOW, row("r1", 3, name="tx:commit"))
    assert [e.seq for e in store.load("r1")] == [1, 2, 4]
    assert store.tx_rows()[0][4] == "open"
    commit, end = row("r1", 3, name="tx:commit"), row("r1", 5, name="tx:end")
    assert store.tx_mark("t1", "committed", end, NOW, commit)
    assert [e.name for e in store.load("r1")][1:] == ["tx:begin", "tx:commit", "s4", "tx:end"]
    assert store.tx_rows()[0][4] == "committed"
    assert not store.tx_mark("t1", "aborted", row("r1", 7, name="tx:end"), NOW, row("r1", 6, name="tx:abort"))
    assert len(store.load("r1")) == 5


def test_a_begin_whose_row_cannot_be_written_leaves_no_header(
    store: Store, new_run: Callable[..., str]
) -> None:
    new_run("r1")
    store.append(row("r1", 2))
    with pytest.raises(LeaseLost):
        _begin(store, "t1", "r1", 2)  # seq 2 is taken: the header goes with it
    assert store.tx_rows() == []


def test_headers_are_listed_by_run_openness_and_epoch(store: Store, new_run: Callable[..., str]) -> None:
    new_run("r1")
    new_run("r2")
    e1, e2 = _begin(store, "t1", "r1", 2), _begin(store, "t2", "r2", 2)
    store.tx_mark("t1", "aborted", row("r1", 3, name="tx:abort"), NOW)
    assert [r[0] for r in store.tx_rows(run_id="r2")] == ["t2"]
    assert [r[0] for r in store.tx_rows(open_only=True)] == ["t2"]
    assert [r[0] for r in store.tx_rows(before=e2)] == ["t1"] and e1 < e2
