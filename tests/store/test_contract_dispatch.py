"""Store contract, dispatch part: queues, schedules and run search, on every backend."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from daybook.store import Store

from .contract import NOW, row


def test_a_queued_run_is_taken_by_priority_then_age_within_the_queue_limit(
    store: Store, new_run: Callable[..., str]
) -> None:
    store.declare_queue("q", 1, None, None, None, NOW)
    new_run("old", status="pending", queue="q", created_at=NOW)
    new_run("urgent", status="pending", queue="q", priority=-1, created_at=NOW + 1)
    new_run("plain", status="pending")  # not queued: never taken by the queue
    assert store.claim_queued("q", "host:1:w", 30, NOW) == "urgent"
    assert store.claim_queued("q", "host:1:w", 30, NOW) is None  # concurrency 1, one running
    store.finish("urgent", "host:1:w", "completed", None, None, None, NOW)
    assert store.claim_queued("q", "host:1:w", 30, NOW) == "old"
    assert store.claim_next("w", 30, NOW) == "plain"
    rows = store.queue_rows(NOW)
    assert [(r[0], r[1]) for r in rows] == [("q", 1)] and store.queue_names() == ["q"]


def test_racing_claimers_take_each_queued_run_once(
    db_url: str, store: Store, new_run: Callable[..., str]
) -> None:
    from daybook.store import open_store

    store.ensure_queue("q", NOW)
    for i in range(10):
        new_run(f"r{i}", status="pending", queue="q", created_at=NOW + i)
    taken: list[str] = []

    def worker(n: int) -> None:
        handle = open_store(db_url)
        try:
            while (got := handle.claim_queued("q", f"h:{n}:w", 30, NOW)) is not None:
                taken.append(got)
        finally:
            handle.close()

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(taken) == sorted(f"r{i}" for i in range(10))


def test_runs_are_found_by_their_attributes_newest_first_page_by_page(
    store: Store, new_run: Callable[..., str]
) -> None:
    for i in range(3):
        new_run(f"r{i}", created_at=NOW + i)
        store.set_attributes(row(f"r{i}", 2, name="attributes"), {"team": "ops", "n": i})
    assert store.attributes("r1") == {"n": 1, "team": "ops"}
    assert [e.name for e in store.load("r1")] == ["wf", "attributes"]  # the row went with them
    first = store.search_runs({"attributes": {"team": "ops"}}, 2)
    assert [r.run_id for r in first] == ["r2", "r1"]
    after = (first[-1].created_at, first[-1].run_id)
    assert [r.run_id for r in store.search_runs({"attributes": {"team": "ops"}}, 2, after)] == ["r0"]
    assert [r.run_id for r in store.search_runs({"attributes": {"n": 0}}, 10)] == ["r0"]
    assert [r.run_id for r in store.search_runs({"workflow": "wf", "since": NOW + 2}, 10)] == ["r2"]


def _schedule(name: str, **fields: Any) -> dict[str, Any]:
    return {
        "name": name, "workflow": "wf", "ref": "app:wf", "cron": "0 6 * * *",
        "input": json.dumps({"args": [1], "kwargs": {}}), "queue": None, "catchup": "skip",
        "grace": 60.0, "paused": 0, "last_fired": NOW, "created_at": NOW, "updated_at": NOW, **fields,
    }  # fmt: skip


def test_a_schedule_is_redefined_paused_advanced_and_dropped(store: Store) -> None:
    store.put_schedule(_schedule("nightly"))
    assert store.advance_schedule("nightly", NOW + 10) is None
    store.advance_schedule("nightly", NOW + 5)  # never moves back
    store.put_schedule(_schedule("nightly", cron="0 7 * * *", last_fired=NOW - 100))  # keeps its firing
    (got,) = store.schedule_rows()
    assert (got["cron"], got["last_fired"], json.loads(got["input"])) == (
        "0 7 * * *",
        NOW + 10,
        {"args": [1], "kwargs": {}},
    )
    assert store.pause_schedule("nightly", True, NOW + 20)
    assert store.schedule_rows()[0]["paused"] == 1
    assert store.pause_schedule("nightly", False, NOW + 30)
    assert store.schedule_rows()[0]["last_fired"] == NOW + 30  # resumed from now: no catch-up
    assert not store.pause_schedule("none", True, NOW)
    assert store.drop_schedule("nightly") and not store.drop_schedule("nightly")
    assert store.schedule_rows() == []
