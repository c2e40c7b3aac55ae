"""Run search: filters by workflow, status, time, parent, queue and the search attributes a run
set on itself (journaled, replay-safe), with paging that never repeats or skips a run."""

from __future__ import annotations

import dataclasses
import time
import uuid
from pathlib import Path

import pytest
import queue_app
from conftest import cli_in_process
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import daybook
from daybook import ConfigError, Context, Daybook, RunPage, RunStatus
from daybook.runtime.start import new_run

APP = str(Path(__file__).parent / "queue_app.py")
_FAIL_ONCE: set[str] = set()


@daybook.workflow
def flaky_tagged(ctx: Context, customer: str) -> str:
    ctx.set_attributes(customer=customer, tier="gold")
    if ctx.run_id not in _FAIL_ONCE:
        _FAIL_ONCE.add(ctx.run_id)
        raise RuntimeError("a bug, fixed before the retry")
    return customer


def test_runs_are_found_by_workflow_status_time_queue_and_attributes(book: Daybook) -> None:
    for i, customer in enumerate(["acme", "globex", "acme"]):
        book.run(queue_app.tagged, customer, i, run_id=f"t{i}")
    before = time.time()
    queued = book.submit(queue_app.tagged, "initech", 9, run_id="q1", queue="billing")
    assert {r.run_id for r in book.runs(attributes={"customer": "acme"})} == {"t0", "t2"}
    assert [r.run_id for r in book.runs(attributes={"customer": "acme", "n": 2})] == ["t2"]
    assert book.runs(attributes={"customer": "acme", "n": "2"}) == []  # the value's type counts
    assert [r.run_id for r in book.runs(queue="billing")] == [queued]
    assert [r.run_id for r in book.runs(status="pending", workflow="tagged")] == [queued]
    assert [r.run_id for r in book.runs(since=before)] == [queued]
    assert {r.run_id for r in book.runs(until=before)} == {"t0", "t1", "t2"}
    assert book.runs(workflow="nothing") == []
    assert book.attributes("t1") == {"customer": "globex", "n": 1}
    assert book.get_run(queued).queue == "billing"


def test_a_run_is_found_by_its_parent(book: Daybook) -> None:
    info, first = new_run(
        queue_app.tagged, "child-1", ("x", 1), {}, owner=book.owner, lease_ttl=5, pending=True
    )
    assert book.store.create_run(dataclasses.replace(info, parent_run="parent-1"), first)
    book.submit(queue_app.tagged, "y", 2, run_id="other")
    assert [r.run_id for r in book.runs(parent="parent-1")] == ["child-1"]


def test_attributes_are_journaled_once_and_kept_across_a_retry(book: Daybook) -> None:
    rid = f"f-{uuid.uuid4().hex[:8]}"
    with pytest.raises(daybook.RunParked):
        book.run(flaky_tagged, "acme", run_id=rid)
    assert [r.run_id for r in book.runs(attributes={"tier": "gold"})] == [rid]
    assert book.retry(rid) == "acme"
    rows = [e for e in book.journal(rid) if e.name == "attributes:set"]
    assert len(rows) == 1 and rows[0].data["value"] == {"customer": "acme", "tier": "gold"}
    assert book.replay(rid) == "acme"  # a pure replay sets nothing again
    assert book.attributes(rid) == {"customer": "acme", "tier": "gold"}
    assert book.get_run(rid).status == RunStatus.COMPLETED


def test_attribute_values_must_be_plain(book: Daybook) -> None:
    @daybook.workflow
    def nested(ctx: Context) -> None:
        ctx.set_attributes(customer={"name": "acme"})  # type: ignore[arg-type]

    with pytest.raises(daybook.RunParked, match="string, number or boolean"):
        book.run(nested)
    with pytest.raises(ConfigError, match="cursor"):
        book.runs(cursor="not-a-cursor")
    with pytest.raises(ConfigError, match="time"):
        book.runs(since="yesterday")


def test_paging_through_runs_gives_each_once_newest_first(book: Daybook) -> None:
    ids = [book.submit(queue_app.tagged, "p", i, run_id=f"p{i:02d}") for i in range(23)]
    seen: list[str] = []
    page: RunPage = book.runs(limit=10)
    while True:
        seen += [r.run_id for r in page]
        if page.cursor is None:
            break
        page = book.runs(limit=10, cursor=page.cursor)
    assert seen == [r.run_id for r in book.runs(limit=100)] and sorted(seen) == ids


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    stamps=st.lists(st.integers(0, 5), min_size=0, max_size=12),
    size=st.integers(1, 5),
    customer=st.sampled_from(["a", "b", None]),
)
def test_pages_concatenate_to_the_whole_listing(
    tmp_path: Path, stamps: list[int], size: int, customer: str | None
) -> None:
    """Whatever the creation times (ties included) and page size, paging yields the full listing."""
    url = f"sqlite:///{tmp_path}/p{time.monotonic_ns()}.db"
    with Daybook(url) as book:
        for i, at in enumerate(stamps):
            info, first = new_run(
                queue_app.tagged,
                f"r{i}",
                ("a" if i % 2 else "b", i),
                {},
                owner="o",
                lease_ttl=1,
                pending=True,
            )
            book.store.create_run(
                dataclasses.replace(info, created_at=float(at), queue="q" if i % 2 else None), first
            )
        queue = "q" if customer == "a" else None
        whole = [r.run_id for r in book.runs(limit=1000, queue=queue)]
        paged: list[str] = []
        cursor = None
        while True:
            page = book.runs(limit=size, queue=queue, cursor=cursor)
            paged += [r.run_id for r in page]
            if page.cursor is None:
                break
            cursor = page.cursor
        assert paged == whole


def test_daybook_runs_filters_and_pages(db_url: str) -> None:
    with Daybook(db_url) as book:
        for i in range(3):
            book.run(queue_app.tagged, "acme", i, run_id=f"c{i}")
        book.run(queue_app.tagged, "globex", 9, run_id="g")
    first = cli_in_process(
        "runs", "--attr", "customer=acme", "--workflow", "tagged", "--limit", "2", db=db_url
    )
    assert first.returncode == 0, first.stderr
    assert "c2" in first.stdout and "c1" in first.stdout and "g" not in first.stdout.split()
    cursor = first.stderr.split("--cursor ")[1].split()[0]
    rest = cli_in_process("runs", "--attr", "customer=acme", "--limit", "2", "--cursor", cursor, db=db_url)
    assert rest.returncode == 0 and "c0" in rest.stdout and "--cursor" not in rest.stderr
    bad = cli_in_process("runs", "--attr", "customer", db=db_url)
    assert bad.returncode == 2 and "NAME=VALUE" in bad.stderr


def test_gc_erases_a_runs_search_attributes_with_its_payloads(book: Daybook) -> None:
    book.run(queue_app.tagged, "acme", 1, run_id="old")
    time.sleep(0.01)
    book.gc(0.0)
    assert book.attributes("old") == {} and book.runs(attributes={"customer": "acme"}) == []


def test_searching_a_store_from_before_run_search_says_to_migrate_it(db_url: str) -> None:
    from test_append_only import _create_previous_version

    _create_previous_version(db_url, 10)  # v11 brought run search
    with Daybook(db_url, read_only=True) as book:
        assert book.runs() == []  # the plain listing reads it as it is
        with pytest.raises(daybook.SchemaVersionError, match="daybook migrate"):
            book.runs(workflow="tagged")
    proc = cli_in_process("runs", "--queue", "q", db=db_url)
    assert proc.returncode == 1 and "daybook migrate" in proc.stderr and "Traceback" not in proc.stderr
