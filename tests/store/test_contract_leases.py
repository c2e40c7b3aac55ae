"""Store contract, leases part: who executes a run, on every backend."""

from __future__ import annotations

import threading
from collections.abc import Callable

from daybook.store import Store

from .contract import NOW


def test_one_owner_holds_a_lease_until_it_expires_or_is_released(
    store: Store, other: Store, new_run: Callable[..., str]
) -> None:
    new_run("r1", status="pending")
    assert store.claim("r1", "w1", 10, NOW, None)
    assert not other.claim("r1", "w2", 10, NOW + 5, None)  # live: refused
    assert store.claim("r1", "w1", 10, NOW + 5, None)  # its own: renewed
    assert other.claim("r1", "w2", 10, NOW + 5, "w1")  # the expected owner: taken over
    assert not store.renew("r1", "w1", 10, NOW + 6)
    assert other.renew("r1", "w2", 10, NOW + 6)
    store.release("r1", "w1")  # not its lease: nothing happens
    assert not store.claim("r1", "w1", 10, NOW + 7, None)
    other.release("r1", "w2")
    assert store.claim("r1", "w1", 10, NOW + 7, None)
    info = store.get_run("r1")
    assert info is not None and (info.status, info.lease_owner) == ("running", "w1")


def test_an_expired_lease_can_be_taken_by_another_owner(store: Store, new_run: Callable[..., str]) -> None:
    new_run("r1")
    assert store.claim("r1", "w1", 10, NOW, None)
    assert store.claim("r1", "w2", 10, NOW + 11, None)


def test_claim_next_takes_runnable_runs_oldest_first_and_each_once(
    store: Store, new_run: Callable[..., str]
) -> None:
    new_run("later", status="pending", created_at=NOW + 2)
    new_run("first", status="pending", created_at=NOW + 1)
    new_run("done", status="completed", created_at=NOW)
    new_run("sleeping", status="suspended", wake_at=NOW + 100)
    assert store.claim_next("w1", 30, NOW) == "first"
    assert store.claim_next("w1", 30, NOW) == "later"
    assert store.claim_next("w1", 30, NOW) is None
    assert store.claim_next("w1", 30, NOW + 101) == "sleeping"  # due now


def test_claim_next_skips_runs_of_another_code_version(store: Store, new_run: Callable[..., str]) -> None:
    new_run("v1", status="pending", code_version="v1")
    assert store.claim_next("w1", 30, NOW, version="v2") is None
    assert store.claim_next("w1", 30, NOW, version="v1") == "v1"


def test_racing_workers_each_take_a_different_run(
    db_url: str, store: Store, new_run: Callable[..., str]
) -> None:
    from daybook.store import open_store

    for i in range(12):
        new_run(f"r{i:02}", status="pending", created_at=NOW + i)
    taken: list[str] = []
    lock = threading.Lock()

    def worker(n: int) -> None:
        handle = open_store(db_url)
        try:
            while (got := handle.claim_next(f"w{n}", 30, NOW)) is not None:
                with lock:
                    taken.append(got)
        finally:
            handle.close()

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(taken) == [f"r{i:02}" for i in range(12)]  # every run once, none twice


def test_hold_takes_the_lease_without_changing_the_status_only_from_allowed_ones(
    store: Store, new_run: Callable[..., str]
) -> None:
    new_run("r1", status="failed")
    assert not store.hold("r1", "op", 30, NOW, None, ("needs_attention",))
    assert store.hold("r1", "op", 30, NOW, None, ("failed", "needs_attention"))
    info = store.get_run("r1")
    assert info is not None and (info.status, info.lease_owner) == ("failed", "op")
    assert store.claim_next("w1", 30, NOW) is None


def test_suspend_parks_the_run_and_keeps_an_earlier_wake_from_a_signal(
    store: Store, new_run: Callable[..., str]
) -> None:
    new_run("r1")
    assert store.claim("r1", "w1", 30, NOW, None)
    assert store.signal("r1", "go", "{}", "me", NOW + 1) is not None  # wakes at NOW + 1
    store.suspend("r1", "w1", NOW + 50, NOW + 2)
    info = store.get_run("r1")
    assert info is not None and (info.status, info.wake_at, info.lease_owner) == ("suspended", NOW + 1, None)
    assert store.claim_next("w2", 30, NOW + 1) == "r1"


def test_a_deferred_run_is_not_taken_again_before_its_backoff(
    store: Store, new_run: Callable[..., str]
) -> None:
    new_run("r1", status="pending")
    assert store.claim_next("w1", 30, NOW) == "r1"
    store.defer("r1", "w1", NOW + 60, '{"failures": 1}', NOW)
    info = store.get_run("r1")
    assert info is not None and (info.error, info.lease_owner) == ({"failures": 1}, None)
    assert store.claim_next("w2", 30, NOW + 30) is None
    assert store.claim_next("w2", 30, NOW + 60) == "r1"
