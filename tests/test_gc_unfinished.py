"""Retention never takes what an unfinished run can still read (issue 25 item 6, audit R1).

`daybook gc` erases finished runs by their own age, but other runs read them: a suspended parent
reads its child's result, a pending fork replays its source's rows, a continue-as-new chain is
found through its earlier segments' results. gc keeps those, and an erased value is never handed
to code as data: reading one raises `RunErased`.
"""

from __future__ import annotations

import sqlite3
import uuid
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import psycopg
import pytest
from conftest import PG_URL, cli_in_process
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import daybook
from daybook import Daybook, RunErased, Suspended

DAY = 86_400.0
PAID: list[int] = []  # the counterparty's own record: every amount it was asked to pay


@daybook.tool(idempotent=True)
def gcu_pay(amount: int, idempotency_key: str) -> dict[str, int]:
    PAID.append(amount)
    return {"paid": amount}


@daybook.workflow(name="gcu_forked")
def forked(ctx: daybook.Context, amount: int) -> dict[str, object]:
    a = ctx.effect(gcu_pay, amount=amount)
    b = ctx.decide("double", lambda: amount * 2).value
    return {"a": a, "b": b}


@daybook.workflow(name="gcu_kid")
def kid(ctx: daybook.Context, n: int) -> dict[str, int]:
    got = ctx.wait_for("go", timeout=3600)
    return {"kid": n, "got": got.payload["x"] if got else -1}


@daybook.workflow(name="gcu_parent")
def parent(ctx: daybook.Context, n: int, cid: str) -> dict[str, object]:
    return {"from_child": ctx.child(kid, n, run_id=cid)}


@daybook.workflow(name="gcu_chain")
def chain(ctx: daybook.Context, n: int, last: int) -> dict[str, object]:
    if n < last:
        ctx.continue_as_new(n + 1, last)
    got = ctx.wait_for("go", timeout=3600)
    return {"n": n, "got": got.payload if got else None}


@daybook.workflow(name="gcu_plain")
def plain(ctx: daybook.Context, n: int) -> dict[str, int]:
    return {"n": ctx.decide("n", lambda: n).value}


def _backdate(db_url: str, prefix: str, seconds: float) -> None:
    """Make the runs whose ids start with `prefix` look `seconds` older to gc."""
    sql = "UPDATE daybook_runs SET updated_at = updated_at - {p} WHERE run_id LIKE {p}"
    if db_url.startswith("sqlite"):
        with sqlite3.connect(db_url.removeprefix("sqlite:///")) as db:
            db.execute(sql.format(p="?"), (seconds, prefix + "%"))
        return
    schema = parse_qs(urlsplit(db_url).query)["schema"][0]
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        conn.execute(sql.format(p="%s"), (seconds, prefix + "%"))


@dataclass
class Shape:
    """One run shape of the property test, started before gc and finished after it."""

    kind: str  # "tree", "fork" or "chain"
    done_before_gc: bool  # whether the dependent run finished before gc (else it is unfinished)
    old: bool  # whether its runs are past the retention window


def _start(book: Daybook, p: str, shape: Shape, i: int) -> tuple[str, object]:
    """Build the shape under prefix `p`; returns the run to finish after gc and its oracle."""
    if shape.kind == "tree":
        cid = f"{p}kid{i}"
        with pytest.raises(Suspended):
            book.run(parent, i, cid, run_id=f"{p}par{i}")
        book.signal(cid, "go", {"x": i})
        assert book.resume(cid) == {"kid": i, "got": i}  # the child ends; its parent still waits
        if shape.done_before_gc:
            book.resume(f"{p}par{i}")
        return f"{p}par{i}", {"from_child": {"kid": i, "got": i}}
    if shape.kind == "fork":
        book.run(forked, 10 + i, run_id=f"{p}src{i}")
        fork_id, _ = book.fork(f"{p}src{i}", 1, new_run_id=f"{p}fork{i}", confirm=True)
        if shape.done_before_gc:
            book.resume(fork_id)
        return fork_id, {"a": {"paid": 10 + i}, "b": 2 * (10 + i)}
    with pytest.raises(Suspended):
        book.run(chain, 0, 2, run_id=f"{p}ch{i}")
    if shape.done_before_gc:
        book.signal(f"{p}ch{i}", "go", {"x": i})
        book.resume(f"{p}ch{i}")
    return f"{p}ch{i}", {"n": 2, "got": {"x": i}}


def _finish(book: Daybook, run_id: str, shape: Shape, i: int) -> object:
    if shape.kind == "chain" and not shape.done_before_gc:
        book.signal(run_id, "go", {"x": i})  # sent to the first id: the live segment gets it
    return book.resume(run_id)


shapes = st.lists(
    st.builds(Shape, st.sampled_from(["tree", "fork", "chain"]), st.booleans(), st.booleans()),
    min_size=1,
    max_size=4,
)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shapes)
def test_every_unfinished_run_ends_as_it_would_have_without_gc(db_url: str, drawn: list[Shape]) -> None:
    p = f"g{uuid.uuid4().hex[:6]}-"
    PAID.clear()
    with Daybook(db_url, inline_wait=0) as book:
        started = [(shape, *_start(book, f"{p}{i}-", shape, i)) for i, shape in enumerate(drawn)]
        for i, shape in enumerate(drawn):
            if shape.old:
                _backdate(db_url, f"{p}{i}-", 2 * DAY)
        paid_before = list(PAID)
        book.gc(DAY, by="test")
        for i, (shape, run_id, expected) in enumerate(started):
            if shape.done_before_gc and shape.old:
                continue  # finished and old: rightly erased (below: it says so, never a mark)
            assert _finish(book, run_id, shape, i) == expected, (shape, run_id)
        # Each fork replayed its source's payment: the counterparty was paid once per source.
        assert paid_before == PAID


def test_a_suspended_parent_keeps_its_finished_child_through_gc(db_url: str) -> None:
    with Daybook(db_url, inline_wait=0) as book:
        with pytest.raises(Suspended):
            book.run(parent, 1, "kid", run_id="par")
        book.signal("kid", "go", {"x": 7})
        book.resume("kid")
        _backdate(db_url, "", 2 * DAY)
        done = book.gc(DAY, by="test")
        assert done["runs"] == 0 and done["kept"] == ["kid"]
        assert book.resume("par") == {"from_child": {"kid": 1, "got": 7}}
        # Once the parent is over, its child goes with the next pass.
        _backdate(db_url, "", 2 * DAY)
        assert sorted(book.gc(DAY, by="test")["run_ids"]) == ["kid", "par"]


def test_a_live_chain_keeps_its_earlier_segments_and_takes_signals_at_its_first_id(db_url: str) -> None:
    with Daybook(db_url, inline_wait=0) as book:
        with pytest.raises(Suspended):
            book.run(chain, 0, 2, run_id="ch")
        _backdate(db_url, "", 2 * DAY)
        assert book.gc(DAY, by="test")["kept"] == ["ch", "ch~2"]
        book.signal("ch", "go", {"x": 1})
        assert book.resume("ch") == {"n": 2, "got": {"x": 1}}


def test_reading_an_erased_result_raises_run_erased_never_the_mark(db_url: str) -> None:
    with Daybook(db_url) as book:
        book.run(plain, 3, run_id="old")
        _backdate(db_url, "", 2 * DAY)
        gc_id = book.gc(DAY, by="test")["gc_id"]
        with pytest.raises(RunErased, match=rf"run 'old'.*{gc_id}.*new run id") as caught:
            book.run(plain, 3, run_id="old")  # attaching to it
        assert isinstance(caught.value, daybook.DaybookError) and caught.value.run_id == "old"
        with pytest.raises(RunErased):
            book.resume("old")


def test_a_fork_of_an_erased_run_refuses_to_replay_the_marks(db_url: str) -> None:
    with Daybook(db_url) as book:
        book.run(forked, 5, run_id="src")
        _backdate(db_url, "", 2 * DAY)
        book.gc(DAY, by="test")  # erased: no fork existed yet
        fork_id, _ = book.fork("src", 1, new_run_id="late-fork", confirm=True)
        with pytest.raises(RunErased, match=r"late-fork.*of run 'src'"):
            book.resume(fork_id)


@daybook.workflow(name="gcu_late_parent")
def late_parent(ctx: daybook.Context) -> dict[str, object]:
    return {"from_child": ctx.child(plain, 1, run_id="earlier")}


def test_a_parent_naming_an_erased_earlier_run_as_its_child_parks_and_says_why(db_url: str) -> None:
    with Daybook(db_url) as book:
        book.run(plain, 1, run_id="earlier")  # not a child yet: gc cannot know a parent will come
        _backdate(db_url, "", 2 * DAY)
        book.gc(DAY, by="test")
        with pytest.raises(daybook.RunParked, match="RunErased"):
            book.run(late_parent, run_id="late")
        assert book.get_run("late").status == daybook.RunStatus.NEEDS_ATTENTION
        assert book.get_run("earlier").result == {"$erased": book.gc_log()[-1]["gc_id"]}


def test_daybook_gc_says_which_runs_it_kept(db_url: str) -> None:
    with Daybook(db_url, inline_wait=0) as book, pytest.raises(Suspended):
        book.run(chain, 0, 1, run_id="c")
    _backdate(db_url, "", 2 * DAY)
    done = cli_in_process("gc", "--older-than", "1d", db=db_url)
    assert done.returncode == 0, done.stderr
    assert "kept 1 finished run(s) an unfinished run still reads: c" in done.stdout


def test_an_encrypted_store_keeps_the_source_of_a_pending_fork(db_url: str) -> None:
    # The fork's first row is encrypted; its `fork_of` stays in clear (audit spine) for gc.
    codec = daybook.FernetCodec(daybook.FernetCodec.new_key())
    with Daybook(db_url, codec=codec) as book:
        book.run(forked, 4, run_id="enc-src")
        fork_id, _ = book.fork("enc-src", 1, new_run_id="enc-fork", confirm=True)
        _backdate(db_url, "", 2 * DAY)
        assert book.gc(DAY, by="test")["kept"] == ["enc-src"]
        assert book.resume(fork_id) == {"a": {"paid": 4}, "b": 8}


def test_a_first_row_that_names_no_fork_source_keeps_nothing() -> None:
    from daybook.store.retention import _fork_source

    for data in ("not json", "[1, 2]", '{"fork_of": 5}', {"fork_of": None}, None, 7):
        assert _fork_source(data) is None
    assert _fork_source('{"fork_of": "src"}') == "src" and _fork_source({"fork_of": "src"}) == "src"
