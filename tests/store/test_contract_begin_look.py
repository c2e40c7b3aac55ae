"""Store contract, epochs part: what a transaction's begin saw of the earlier open headers
(`tx_seen`), the commit rule's first look taken in the begin's own database transaction. It must
hold every open header with a smaller epoch, as a read after the begin's commit would: a
transaction that skips that read on its strength never runs beside an earlier one it overlaps."""

from __future__ import annotations

import threading
from collections.abc import Callable

from daybook.store import Store

from .contract import NOW, row


def _begin(store: Store, tx_id: str, run_id: str, seq: int) -> int:
    return store.tx_begin(tx_id, run_id, '["a/**"]', 1, 3, row(run_id, seq, name="tx:begin"), NOW + seq)


def _seen(store: Store, tx_id: str) -> set[str] | None:
    rows = store.tx_seen(tx_id)
    return None if rows is None else {r[0] for r in rows}


def test_a_begin_sees_every_earlier_open_header_and_no_ended_one(
    store: Store, new_run: Callable[..., str]
) -> None:
    new_run("r1")
    _begin(store, "t1", "r1", 2)
    _begin(store, "t2", "r1", 3)
    assert store.tx_mark("t1", "committed", row("r1", 4, name="tx:end"), NOW + 4)
    _begin(store, "t3", "r1", 5)
    assert _seen(store, "t3") == {"t2"}
    assert _seen(store, "t3") is None  # taken once: a replay or a later look reads the store


def test_begins_sent_at_once_each_see_every_smaller_epoch(store: Store, new_run: Callable[..., str]) -> None:
    # Threads of one handle begin at once, so their begins share commits (group commit): each
    # still sees every header with a smaller epoch, none of them ended.
    for n in range(8):
        new_run(f"r{n}")
    epochs: dict[str, int] = {}
    ready = threading.Barrier(8)

    def begin(n: int) -> None:
        ready.wait()
        epochs[f"t{n}"] = _begin(store, f"t{n}", f"r{n}", 2)

    threads = [threading.Thread(target=begin, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for tx_id, epoch in epochs.items():
        assert _seen(store, tx_id) == {t for t, e in epochs.items() if e < epoch}


def test_a_begin_leaves_out_its_siblings_and_still_sees_every_other_earlier_open_header(
    store: Store, new_run: Callable[..., str]
) -> None:
    # A speculation's branches (ids sharing a prefix) never block one another: a branch's begin
    # reads the earlier open headers without its siblings', so K branches read no K(K-1)/2 rows.
    new_run("r1")
    new_run("r2")
    _begin(store, "r2/tx/2", "r2", 2)  # another run's, open: it blocks every later branch
    group = "r1/spec/2/"
    for j, seq in enumerate(range(3, 7)):
        tx_id = f"{group}{100_000 * (j + 1)}"
        event = row("r1", seq, name="tx:begin")
        store.tx_begin(tx_id, "r1", '["a/**"]', 1, 0, event, NOW + seq, group)
        assert _seen(store, tx_id) == {"r2/tx/2"}
    _begin(store, "r1/spec/2/x", "r1", 7)  # no siblings given: every earlier open header
    assert _seen(store, "r1/spec/2/x") == {"r2/tx/2", *(f"{group}{100_000 * j}" for j in range(1, 5))}
