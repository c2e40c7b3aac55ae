"""Semantic recovery (DART, seed 004) on the journal: the schedule commit-sensitive witness (T17)
and the policies around it, asserted at the counterparties (the calendar's own tables, the SMTP
server's messages), on SQLite and PostgreSQL, with crashes in the middle of a recovery."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import dart_schedule as ds
import pytest

from daybook import (
    ConfigError,
    Daybook,
    FailureSignal,
    NeedsAttention,
    NonDeterminismError,
    Recovery,
    RecoveryPolicy,
    RunFailed,
)
from daybook.recovery.signal import normalize

CHILD = Path(__file__).parent / "dart_schedule.py"
FINAL, SLOT1 = "FinalizeSchedule::final::0", "ResolveSlot::slot[1]::0"


def _failed_run(book: Daybook, cal: str, sink: ds.Sink, run_id: str = "sched", **kw: bool) -> str:
    with pytest.raises(RunFailed):
        book.run(ds.schedule, cal, "127.0.0.1", sink.port, run_id=run_id, **kw)
    assert book.get_run(run_id).status == "failed"
    assert len(sink.messages) == 1  # the invitation went out before the producer failed
    return run_id


def _stale(cal: str) -> None:
    """The stale cache: slot[0]'s 9:00 is gone by now, so re-deriving slot[0] gives 10:00."""
    with ds.sqlite3.connect(cal) as db:
        db.execute("DELETE FROM free WHERE slot = 0 AND hour = 9")


def test_dart_restores_the_failed_producer_at_its_commit_checkpoint_replaying_one_step(
    book: Daybook, cal: str, sink: ds.Sink
) -> None:
    run = _failed_run(book, cal, sink)
    rec = book.recover(run)
    assert (rec.action, rec.instance, rec.checkpoint, rec.reason) == (
        "restore",
        "ResolveSlot::slot[0]::0",
        "commit@3",
        "eligible",
    )
    assert (rec.replayed, rec.upstream, rec.preserved, rec.signal) == (1, 0, 5, "TOOL_ERROR")
    assert rec.result["confirmed"] == "0@9" and book.get_run(run).status == "completed"
    # At the counterparties: one invitation, one confirmation, under the branch's own key.
    assert len(sink.messages) == 1
    assert ds.rows(cal, "confirmed") == [(0, 9, f"{run}/22~r1")]
    # The entry checkpoint was judged too, and refused for the two committed consumers.
    entry = rec.verdicts[-1]
    assert entry["reason"] == "committed_consumers_present" and entry["consumers"] == [FINAL, SLOT1]


def test_without_a_commit_checkpoint_dart_refuses_for_the_committed_consumers(
    book: Daybook, cal: str, sink: ds.Sink
) -> None:
    run = _failed_run(book, cal, sink, commit=False)
    rec = book.recover(run, dry_run=True)
    assert (rec.action, rec.reason, rec.checkpoint) == ("rerun", "committed_consumers_present", None)
    assert rec.verdicts[0]["consumers"] == [FINAL, SLOT1]
    assert book.get_run(run).status == "failed"  # a dry run changes nothing


def test_blocking_off_admits_the_entry_and_drops_both_consumers(
    book: Daybook, cal: str, sink: ds.Sink
) -> None:
    run = _failed_run(book, cal, sink, commit=False)
    rec = book.recover(run, policy=RecoveryPolicy(blocking=False), dry_run=True)
    assert (rec.action, rec.checkpoint, rec.dropped) == ("restore", "entry@1", [FINAL, SLOT1])


def test_entry_only_restore_breaks_the_committed_schedule_and_is_stopped_by_the_journal(
    book: Daybook, cal: str, sink: ds.Sink
) -> None:
    run = _failed_run(book, cal, sink)
    _stale(cal)
    with pytest.raises(NonDeterminismError, match="differ from the journal"):
        book.recover(run, policy="entry")
    # Re-entering slot[0] picked 10:00; slot[1] and the sent invitation stand on 9:00. The
    # journal refuses to replay them on the new value: the run is parked, nothing more sent.
    assert book.get_run(run).status == "needs_attention"
    assert len(sink.messages) == 1 and ds.rows(cal, "confirmed") == []


def test_whole_task_rerun_replays_the_sent_invitation_instead_of_sending_it_again(
    book: Daybook, cal: str, sink: ds.Sink
) -> None:
    run = _failed_run(book, cal, sink)
    rec = book.recover(run, policy="retry")
    assert (rec.action, rec.reason) == ("rerun", "retry_only")
    assert (rec.replayed, rec.preserved) == (8, 0)  # 5 picks, the queued and sent mail, the confirmation
    assert book.get_run(run).status == "completed"
    assert len(sink.messages) == 1  # the rerun asked for the same message: replayed, not re-sent
    assert len(ds.rows(cal, "confirmed")) == 1


def test_a_compensable_effect_after_the_checkpoint_is_undone_once_then_made_again(
    book: Daybook, cal: str, sink: ds.Sink
) -> None:
    run = _failed_run(book, cal, sink, hold=True)
    rec = book.recover(run)
    assert rec.checkpoint == "commit@3" and rec.compensated == [f"{run}/22"]
    holds = ds.rows(cal, "holds")
    assert [(h[2], h[3]) for h in holds] == [(f"{run}/22", 1), (f"{run}/22~r1", 0)]
    assert book.get_run(f"{run}~recover1").parent_run == run  # the undo's own journal


def test_an_irreversible_effect_after_the_checkpoint_vetoes_it(
    book: Daybook, cal: str, sink: ds.Sink
) -> None:
    with pytest.raises(RunFailed):
        book.run(ds.schedule, cal, "127.0.0.1", sink.port, notify=True, run_id="notify")
    rec = book.recover("notify", dry_run=True)
    assert (rec.action, rec.reason) == ("rerun", "irreversible_effect_policy")
    assert "email.send: irreversible" in rec.verdicts[0]["effects"][0]
    forced = book.recover("notify", policy=RecoveryPolicy(effects=False), dry_run=True)
    assert (forced.action, forced.checkpoint) == ("restore", "commit@3")  # the ablation


def test_an_ambiguous_instance_name_abstains_to_a_rerun(book: Daybook, cal: str, sink: ds.Sink) -> None:
    run = _failed_run(book, cal, sink)
    assert book.recover(run, instance="ResolveSlot", dry_run=True).reason == "ambiguous_instance"
    named = book.recover(run, instance="ResolveSlot::slot[0]", dry_run=True)
    assert named.instance == "ResolveSlot::slot[0]::0"  # an alias that matches one instance


def test_recover_refuses_a_run_that_did_not_fail(book: Daybook, cal: str, sink: ds.Sink) -> None:
    with ds.sqlite3.connect(cal) as db:
        db.execute("DELETE FROM faults")
    book.run(ds.schedule, cal, "127.0.0.1", sink.port, run_id="fine")
    with pytest.raises(ConfigError, match="only a failed"):
        book.recover("fine")
    with pytest.raises(ConfigError, match="policy must be one of"):
        RecoveryPolicy("sometimes")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (RuntimeError("calendar cache stale"), FailureSignal.TOOL_ERROR),
        ({"type": "HTTPStatusError", "message": "Server error '500 Internal Server Error'"}, "TOOL_ERROR"),
        (OSError("connection reset"), FailureSignal.TOOL_ERROR),
        (TimeoutError("read"), FailureSignal.TIMEOUT),
        ({"type": "ReadTimeout", "message": ""}, "TIMEOUT"),
        ({"type": "RuntimeError", "message": "HTTP 504 from upstream"}, "TIMEOUT"),
        (KeyError("hotel_id"), FailureSignal.MISSING_INPUT),
        ({"type": "RuntimeError", "message": "missing required field 'date'"}, "MISSING_INPUT"),
        (ValueError("not a slot"), FailureSignal.INVALID_OUTPUT),
        ({"type": "JSONDecodeError", "message": "Expecting value"}, "INVALID_OUTPUT"),
        (PermissionError("nope"), FailureSignal.DENIED),
        ({"type": "RuntimeError", "message": "HTTP 403 Forbidden"}, "DENIED"),
    ],
)
def test_raw_failures_normalize_to_one_signal_whatever_their_form(raw: object, expected: str) -> None:
    assert normalize(raw) == expected  # type: ignore[arg-type]


# -- crashes in the middle of a recovery -------------------------------------------------------


def _child(db: str, cal: str, port: int, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, str(CHILD), db, cal, "127.0.0.1", str(port), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
@pytest.mark.parametrize(
    "point",
    ["--kill-before intent:1", "--kill-after intent:1", "--kill-after outcome:1", "--kill-after intent:2"],
)
def test_a_recovery_killed_anywhere_finishes_with_each_undo_and_act_once(
    db_url: str, tmp_path: Path, sink: ds.Sink, point: str
) -> None:
    cal = str(tmp_path / "calendar.db")
    ds.calendar(cal)
    ds.arm(cal, "confirm")
    start = _child(db_url, cal, sink.port, "start", "r")
    assert json.loads(start.stdout.splitlines()[-1])["error"] == "RunFailed"
    killed = _child(db_url, cal, sink.port, "recover", "r", "dart", *point.split())
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    done = _child(db_url, cal, sink.port, "recover", "r", "dart")
    assert json.loads(done.stdout.splitlines()[-1])["result"]["confirmed"] == "0@9", done.stdout + done.stderr
    # At the counterparties: the first hold released once, one new hold, one confirmation, one mail.
    assert [(h[2], h[3]) for h in ds.rows(cal, "holds")] == [("r/22", 1), ("r/22~r1", 0)]
    assert [c[2] for c in ds.rows(cal, "confirmed")] == ["r/23~r1"]
    assert len(sink.messages) == 1


def test_joint_rollback_undoes_a_committed_consumer_whose_effects_can_be_undone(
    book: Daybook, cal: str
) -> None:
    with pytest.raises(RunFailed):
        book.run(ds.booking, cal, run_id="book")
    assert book.recover("book", dry_run=True).reason == "committed_consumers_present"
    rec = book.recover("book", policy=RecoveryPolicy(joint=True))
    assert (rec.action, rec.checkpoint, rec.compensated, rec.dropped) == (
        "restore",
        "entry@1",
        ["book/5"],
        [],
    )
    assert rec.result == "0@9"
    assert [(h[2], h[3]) for h in ds.rows(cal, "holds")] == [("book/5", 1), ("book/5~r1", 0)]


def test_an_async_workflow_recovers_at_its_commit_checkpoint(book: Daybook, cal: str) -> None:
    with pytest.raises(RunFailed):
        asyncio.run(book.run_async(ds.confirm_async, cal, run_id="async"))
    rec = asyncio.run(_recover_async(book))
    assert (rec.checkpoint, rec.replayed) == ("commit@3", 1)
    assert book.get_run("async").status == "completed" and len(ds.rows(cal, "confirmed")) == 1


async def _recover_async(book: Daybook) -> Recovery:
    rec = book.recover("async", submit=True)
    await book.resume_async("async")
    return rec


def test_daybook_recover_explains_each_checkpoint_then_restores(db_url: str, cal: str, sink: ds.Sink) -> None:
    start = _child(db_url, cal, sink.port, "start", "cli")
    assert json.loads(start.stdout.splitlines()[-1])["error"] == "RunFailed"
    cmd = ["daybook", "recover", "cli", "--db", db_url, "--explain", "--app", str(CHILD)]
    # The script imports its neighbours (and daybook is whichever the tests import).
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(CHILD.parent), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert "restore ResolveSlot::slot[0]::0 at commit@3" in out.stdout
    assert "committed_consumers_present" in out.stdout  # the entry checkpoint's verdict
    assert len(sink.messages) == 1 and len(ds.rows(cal, "confirmed")) == 1
    show = subprocess.run(
        ["daybook", "show", "cli", "--db", db_url, "--width", "0"], capture_output=True, text=True
    )
    assert "restore ResolveSlot::slot[0]::0 at commit@3 by" in show.stdout  # the branch, as journaled


def test_daybook_boundaries_flags_a_legal_edge_that_is_not_a_reviewed_exit(tmp_path: Path) -> None:
    config = {
        "transitions": [
            ["WAITING_QUERY_REFINEMENT", "STOP_READY"],
            ["WAITING_POI_SELECTION", "STOP_READY"],
            ["SEARCHING", "WAITING_POI_SELECTION"],
        ],
        "skeletons": [
            {
                "name": "ResolveStop",
                "states": ["SEARCHING", "WAITING_POI_SELECTION", "WAITING_QUERY_REFINEMENT"],
                "exits": [["WAITING_QUERY_REFINEMENT", "STOP_READY"]],
            }
        ],
    }
    path = tmp_path / "boundaries.json"
    path.write_text(json.dumps(config))
    out = subprocess.run(["daybook", "boundaries", str(path), "--json"], capture_output=True, text=True)
    assert out.returncode == 1
    verdicts = {tuple(f["edge"]): f["verdict"] for f in json.loads(out.stdout)["findings"]}
    assert verdicts == {
        ("WAITING_QUERY_REFINEMENT", "STOP_READY"): "exit boundary",
        ("WAITING_POI_SELECTION", "STOP_READY"): "legal, not a reviewed exit",
    }


def test_a_fork_of_a_recovered_run_shares_its_current_branch(book: Daybook, cal: str, sink: ds.Sink) -> None:
    run = _failed_run(book, cal, sink)
    book.recover(run)
    fork_id, _ = book.fork(run, 22, confirm=True)
    assert book.resume(fork_id)["confirmed"] == "0@9"  # step 22 as recovered, not as it failed
    assert len(sink.messages) == 1 and len(ds.rows(cal, "confirmed")) == 1


def test_a_workflow_with_recover_restores_itself_in_the_process_that_failed(
    book: Daybook, cal: str, sink: ds.Sink
) -> None:
    out = book.run(ds.schedule_auto, cal, "127.0.0.1", sink.port, run_id="auto")
    assert out["confirmed"] == "0@9" and book.get_run("auto").status == "completed"
    assert len(sink.messages) == 1 and len(ds.rows(cal, "confirmed")) == 1
    branches = [e.data["recovery"] for e in book.journal("auto") if e.name == "recover"]
    assert [(b["checkpoint"], b["replayed"], b["auto"]) for b in branches] == [("commit@3", 1, True)]


def test_a_workflow_recovers_at_most_its_limit_then_fails(book: Daybook, cal: str, sink: ds.Sink) -> None:
    with ds.sqlite3.connect(cal) as db:  # the confirmation keeps failing
        db.execute("UPDATE faults SET remaining = 10")
    with pytest.raises(RunFailed):
        book.run(ds.schedule_auto, cal, "127.0.0.1", sink.port, run_id="limit")
    assert sum(1 for e in book.journal("limit") if e.name == "recover") == 3
    assert ds.rows(cal, "confirmed") == [] and len(sink.messages) == 1


def test_a_rerun_that_would_send_a_different_invitation_parks_instead(
    book: Daybook, cal: str, sink: ds.Sink
) -> None:
    run = _failed_run(book, cal, sink)
    _stale(cal)
    with pytest.raises(NeedsAttention, match="irreversible and was done"):
        book.recover(run, policy="retry")
    # The invitation that left stays the only one: not re-sent with new slots, not silently kept.
    assert len(sink.messages) == 1 and book.get_run(run).status == "needs_attention"


def test_the_semantic_recovery_example_restores_one_step_and_sends_one_invitation(tmp_path: Path) -> None:
    example = CHILD.parent.parent / "examples" / "semantic_recovery.py"
    out = subprocess.run(
        [sys.executable, str(example), f"sqlite:///{tmp_path / 'journal.db'}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "recovered: restore ResolveSlot::slot[0]::0 at commit@3; replayed 1, upstream 0" in out.stdout
    assert "the calendar confirmed ['slot[0]@9']; the mail server got 1 invitation(s)" in out.stdout


def test_a_re_run_that_asks_for_a_reversible_act_anew_replays_afterwards_as_it_ran(
    book: Daybook, cal: str
) -> None:
    with pytest.raises(RunFailed):
        book.run(ds.noting, cal, run_id="notes")
    assert book.recover("notes", policy="retry").result == "0@9"
    # The re-run re-counted (1 note by then), so it made a new note under the branch's key.
    assert ds.rows(cal, "notes") == [("after 0 notes", "notes/2"), ("after 1 notes", "notes/2~r1")]
    # Read back, the journal's current branch is the one that ran: a replay needs nothing new.
    assert book.replay("notes") == "0@9"
