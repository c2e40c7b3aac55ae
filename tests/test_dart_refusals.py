"""What a recovery refuses, and says (issue 25 item 12): a dry run plans exactly what `recover`
does, refusals included (audit T3); the caller gets the Recovery when the re-run parks; an
instance that declared no reads is a possible consumer (audit D-2); and `recover` of a run that
is not stopped says why in its own words (audit R21). On SQLite and PostgreSQL, asserted at the
counterparty's ledger (`dart_refusal_app.py`)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import dart_refusal_app as app
import pytest

from daybook import ConfigError, Daybook, DaybookError, NeedsAttention, Recovery, RunFailed

APP = Path(__file__).parent / "dart_refusal_app.py"
POLICIES = ("dart", "entry", "coarse", "retry")


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[str]:
    path = str(tmp_path / "ledger.db")
    before = os.environ.get("DART_LEDGER")
    app.set_knob(path, "s0", 9)
    yield path
    if before is None:
        os.environ.pop("DART_LEDGER", None)
    else:
        os.environ["DART_LEDGER"] = before


def _cli(db_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "daybook", "recover", *args, "--db", db_url, "--app", str(APP)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_dry_run_reports_the_refusal_the_real_recovery_makes(db_url: str, ledger: str) -> None:
    with Daybook(db_url) as book:
        with pytest.raises(DaybookError):
            book.run(app.buy, run_id="r")
        status = book.get_run("r").status
        for policy in POLICIES:
            plan = book.recover("r", policy=policy, dry_run=True)
            assert plan.refused is not None and "settle them first" in plan.refused, policy
            with pytest.raises(ConfigError) as real:
                book.recover("r", policy=policy)
            assert str(real.value) == plan.refused  # the dry run said exactly what the call says
            assert book.get_run("r").status == status
    dry, real_cli = _cli(db_url, "r", "--dry-run"), _cli(db_url, "r")
    assert dry.returncode == real_cli.returncode != 0, dry.stdout + dry.stderr
    assert "the recovery would be refused" in dry.stdout and "settle them first" in dry.stderr
    assert "Traceback" not in dry.stderr + real_cli.stderr
    assert [op for op, _, _ in app.executions(ledger)] == ["order"]  # nothing was sent again


def test_a_recovery_whose_re_run_parks_reaches_the_caller_on_the_error(db_url: str, ledger: str) -> None:
    app.set_knob(ledger, "refuse", 1)
    with Daybook(db_url) as book:
        with pytest.raises(RunFailed):
            book.run(app.announce_then_confirm, run_id="a")
        app.set_knob(ledger, "s0", 10)  # the re-run derives another hour, so another announcement
        with pytest.raises(NeedsAttention, match="irreversible") as parked:
            book.recover("a")
        rec = parked.value.recovery
        assert isinstance(rec, Recovery)
        assert (rec.run_id, rec.action, rec.reason) == ("a", "rerun", "irreversible_effect_policy")
        assert rec.branch == 1 and not rec.dry_run
        assert book.get_run("a").status == "needs_attention"
    # The announcement went out once, with the first hour; it was not repeated with the second.
    assert [(op, v) for op, _, v in app.executions(ledger)] == [("announce", "meeting at 9")]


def test_daybook_recover_prints_the_recovery_before_saying_its_re_run_parked(
    db_url: str, ledger: str
) -> None:
    app.set_knob(ledger, "refuse", 1)
    with Daybook(db_url) as book, pytest.raises(RunFailed):
        book.run(app.announce_then_confirm, run_id="a")
    app.set_knob(ledger, "s0", 10)
    out = _cli(db_url, "a")
    assert out.returncode == 3, out.stdout + out.stderr
    assert "a: re-run the whole task (dart: irreversible_effect_policy" in out.stdout
    assert "irreversible" in out.stderr and "Traceback" not in out.stderr


def test_an_instance_that_declared_no_reads_is_a_possible_consumer_so_its_producer_is_not_restored_alone(
    db_url: str, ledger: str
) -> None:
    app.set_knob(ledger, "refuse", 1)
    with Daybook(db_url) as book:
        with pytest.raises(RunFailed):
            book.run(app.pair, False, run_id="u")
        app.set_knob(ledger, "s0", 15)  # the stale value is refreshed
        plan = book.recover("u", dry_run=True)
        assert plan.verdicts[0]["consumers"] == ["PairSlot::s1::0"]
        rec = book.recover("u")
    # Not a silent unsafe restore (s1 standing on s0 = 9 while s0 is now 15): the whole task.
    assert (rec.action, rec.reason) == ("rerun", "committed_consumers_present")
    assert rec.result == {"s0": 15, "s1": 16}
    assert [(op, v) for op, _, v in app.executions(ledger)] == [("confirm", "15")]


def test_reads_declared_empty_lets_dart_restore_the_producer_alone(db_url: str, ledger: str) -> None:
    app.set_knob(ledger, "refuse", 1)
    with Daybook(db_url) as book:
        with pytest.raises(RunFailed):
            book.run(app.pair, True, run_id="d")
        app.set_knob(ledger, "s0", 15)
        rec = book.recover("d")
    # `reads=[]` says s1 consumed nothing: the declaration is trusted, s0 alone runs again.
    assert (rec.action, rec.checkpoint, rec.reason) == ("restore", "entry@1", "eligible")
    assert rec.result == {"s0": 15, "s1": 10}


def test_recover_of_a_pending_or_running_run_says_where_it_stands_not_that_it_cannot_be_retried(
    db_url: str, ledger: str
) -> None:
    with Daybook(db_url) as book:
        book.submit(app.pair, True, run_id="p")
        with pytest.raises(ConfigError) as pending:
            book.recover("p")
        assert "is pending" in str(pending.value) and "`daybook resume p`" in str(pending.value)
        assert book.store.claim("p", "elsewhere:1", 60.0, time.time(), None)
        with pytest.raises(ConfigError) as running:
            book.recover("p")
        assert "is running" in str(running.value) and "elsewhere:1" in str(running.value)
        for err in (pending.value, running.value):
            assert "cannot be retried" not in str(err) and "retried" not in str(err)


def test_a_run_settled_with_resolve_stays_parked_and_can_then_be_recovered(db_url: str, ledger: str) -> None:
    with Daybook(db_url) as book:
        with pytest.raises(DaybookError):
            book.run(app.buy, run_id="r")
        step = next(ev.step for ev in book.journal("r") if ev.kind == "intent")
        book.resolve("r", step, failed="the supplier never got it", evidence="their order list")
        # Settled as the refusal said; the run stays parked (not `running`), so recover goes on.
        assert book.get_run("r").status == "needs_attention"
        plan = book.recover("r", dry_run=True)
        assert plan.refused is None and plan.action == "restore"
