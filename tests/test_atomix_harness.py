"""The Atomix reproduction harness (benchmarks/atomix) counts right: on a tiny n with
deterministic fault plans, faults, retries, recovered, success and corruption come out as the
plan dictates for every mode, and the SMTP sink's log gives Table 10's leaked / confirmed /
duplicate counts. Correctness of the counting only; no timings."""

from __future__ import annotations

import random
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks" / "atomix"))

import irreversible as ir
import speculation as sp
import tables_irreversible as t10
import tables_speculation as ts
from faults import FaultModel, Injector
from harness import Outcome, World
from policies import run_mode
from smtp import SmtpSink
from stats import percent, total
from workloads import Lab, tasks


@pytest.fixture
def lab() -> Iterator[Lab]:
    lab = Lab()
    yield lab
    lab.close()


def _run(lab: Lab, mode: str, workload: str, model: FaultModel, steps: int = 6) -> tuple[Outcome, int]:
    task = tasks(workload, 1, (steps, steps), seed=1)[0]
    run = f"{mode}-{workload}-{random.random()}"
    world = World(run, lab.store(workload, run), Injector(model))
    out = run_mode(mode, task, world, 3, lab.book)
    lab.release()
    return out, len(task.ops)


def test_the_injector_is_seeded_and_counts_attempts_faults_and_recoveries() -> None:
    model = FaultModel(fp=0.3, p_post=0.5, seed=7)
    assert [model.draw("t", s, 0) for s in range(50)] == [model.draw("t", s, 0) for s in range(50)]
    inj = Injector(FaultModel(fp=1.0, once=True))
    assert [inj.next("r", 0), inj.next("r", 0), inj.next("r", 1)] == ["pre", None, "pre"]
    assert (inj.run_faults("r"), inj.run_retries("r"), inj.recovered("r", {0})) == (2, 1, 1)


@pytest.mark.parametrize("mode", ["Tx-Full", "CR", "Tx-NoFrontier+Retry"])
def test_a_fault_on_every_first_attempt_is_retried_and_recovered_by_retrying_modes(
    lab: Lab, mode: str
) -> None:
    out, n = _run(lab, mode, "rows", FaultModel(fp=1.0, once=True))
    assert (out.success, out.faults, out.retries, out.recovered, out.corrupt) == (True, n, n, n, False)


def test_under_tx_full_a_lost_reply_is_resolved_by_a_status_query_not_a_retry(lab: Lab) -> None:
    out, steps = _run(lab, "Tx-Full", "web", FaultModel(fp=1.0, p_post=1.0, once=True))
    assert (out.success, out.faults, out.retries, out.recovered) == (True, steps, 0, steps)


def test_cr_re_sends_a_lost_reply_to_a_service_and_the_end_state_check_catches_the_double(lab: Lab) -> None:
    # The retail script has `return` calls, which add: a second send adds twice.
    out, _ = _run(lab, "CR", "retail", FaultModel(fp=1.0, p_post=1.0, once=True), steps=20)
    assert not out.success and out.corrupt and out.retries == 20


@pytest.mark.parametrize(("mode", "post"), [("No-Frontier", 0.0), ("No-Tx", 1.0)])
def test_the_modes_that_do_not_retry_stop_at_the_first_fault_and_leave_a_clean_prefix(
    lab: Lab, mode: str, post: float
) -> None:
    out, _ = _run(lab, mode, "desktop", FaultModel(fp=1.0, p_post=post))
    assert (out.success, out.faults, out.retries, out.recovered, out.corrupt) == (False, 1, 0, 0, False)


def test_success_and_totals_carry_their_n_and_interval() -> None:
    est = percent([True] * 9 + [False])
    assert (est.value, est.n) == (90.0, 10) and est.lo <= 90.0 <= est.hi
    assert total([1, 2, 3]).value == 6


def test_a_speculation_shows_no_loser_under_tx_full_and_every_loser_without_it(lab: Lab) -> None:
    sp.open_shared(lab.root)
    try:
        scores = [5, 9, 1]
        lab.book.run(sp.spec_store, "tx", scores, run_id="tx")
        ts._baseline_step("No-Tx", "plain", 3, random.Random(1), scores)
        store = sp.SHARED["store"]
        assert {v for _, v in store.seen("tx:")} == {2}  # only the winner (b1) ever visible
        assert len({v for _, v in store.seen("plain:")}) == 3  # every branch's write was visible
    finally:
        sp.close_shared()


def test_table10_counts_come_from_the_smtp_sink(lab: Lab) -> None:
    sink = SmtpSink(lab.root / "smtp")
    # Every call's first attempt takes effect and loses its reply; retries are clean.
    room = ir.Mailroom(lab.root / "files", sink, Injector(FaultModel(fp=1.0, p_post=1.0, once=True)))
    ir.ROOM["room"] = room
    stop = threading.Event()
    ir.approver(lab.book, stop)
    try:
        for confirm in (False, True):
            run = f"tx-{int(confirm)}"
            assert lab.book.run(ir.t10_run, run, run, confirm, run_id=run) == "committed"
            sent = [d for d in sink.deliveries() if d.run == run]
            assert len(sent) == 2 and t10._tx_counts(lab.book, run, sent) == (2, 2)  # gated, confirmed
        ir.baseline("CR", room, "cr", "cr")  # each email delivered, reply lost, sent again
        cr = Counter(d.logical for d in sink.deliveries() if d.run == "cr")
        assert sorted(cr.values()) == [2, 2]
        assert ir.baseline("No-Frontier", room, "nf", "nf") == 0  # stopped at its first file
        assert [d for d in sink.deliveries() if d.run == "nf"] == []
    finally:
        stop.set()
        sink.stop()
