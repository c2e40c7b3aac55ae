"""A LangGraph graph driven by a daybook run spends against that run's budget: each model call
is a run below the driving run (so its caps hold across the graph), `on_cap="fail"` fails the
run before the model is asked past the cap, the default pauses it until `daybook budget RUN
--raise` (from another process) lets the graph go on from its checkpoint, and a SIGKILL inside
a charged call neither charges it twice nor loses the charge. Real processes, both stores."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import cli, cli_in_process

pytest.importorskip("langgraph.checkpoint.sqlite", reason="needs daybook[langgraph]")

from daybook import Daybook, RunStatus

CHILD = Path(__file__).parent / "langgraph_cost_child.py"
CALL = {"tokens": 35.0, "usd": (30 * 1.0 + 5 * 2.0) / 1_000_000}  # what one scripted call reports
REPLIES = ["hello", "reply to 1", "go on", "reply to 3", "go on", "reply to 5", "go on"]

# Agent processes started and killed in a row: slow on a loaded machine, scheduled first.
pytestmark = pytest.mark.slow


def graph_run(db_url: str, tmp: Path, run_id: str, caps: str, on_cap: str, *extra: str) -> Any:
    env = {**os.environ, "MODEL_CALLS": str(tmp / "calls"), "CHECKPOINTS": str(tmp / f"{run_id}.db")}
    proc = subprocess.run(
        [sys.executable, str(CHILD), db_url, run_id, caps, on_cap, *extra],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if "--die-at-call" in extra:
        return proc
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def asked(tmp: Path) -> int:
    calls = tmp / "calls"
    return len(calls.read_text().splitlines()) if calls.exists() else 0


def tree_spent(book: Daybook, run_id: str) -> dict[str, float]:
    """What the budget charged across the run and every run below it."""
    total: dict[str, float] = {}
    for rid in [run_id, *(k.run_id for k in book.runs(parent=run_id))]:
        for name, value in book.budget(rid)["spent"].items():
            total[name] = total.get(name, 0.0) + value
    return total


def test_a_graph_under_its_driving_runs_fail_cap_fails_before_the_model_is_asked_past_it(
    db_url: str, tmp_path: Path
) -> None:
    # 35 tokens a call, about 10 reserved ahead of the third: 70 + 10 passes a cap of 75.
    failed = graph_run(db_url, tmp_path, "lg-fail", '{"tokens": 75}', "fail")
    assert failed["error"] == "RunFailed" and "BudgetExceeded" in failed["message"]
    assert "across the run tree of 'lg-fail'" in failed["message"]
    assert asked(tmp_path) == 2  # the third call was refused before the model was asked
    with Daybook(db_url) as book:
        calls = book.runs(parent="lg-fail")
        assert {k.workflow for k in calls} == {"langgraph.model_call"}
        # The third call's run was refused at its reservation: it failed, the model unasked.
        assert sorted(k.status for k in calls) == ["completed", "completed", "failed"]
        assert tree_spent(book, "lg-fail")["tokens"] == 2 * CALL["tokens"]
        assert book.cost("lg-fail", tree=True).calls == 2


def test_a_graph_paused_at_its_driving_runs_cap_goes_on_after_a_raise_and_pays_each_call_once(
    db_url: str, tmp_path: Path
) -> None:
    paused = graph_run(db_url, tmp_path, "lg-pause", '{"tokens": 75}', "pause")
    assert paused["error"] == "Suspended" and asked(tmp_path) == 2
    with Daybook(db_url) as book:
        assert book.get_run("lg-pause").status == RunStatus.SUSPENDED
    shown = cli_in_process("budget", "lg-pause", db=db_url)
    assert "past that run's cap of 75" in shown.stdout and "with runs below" in shown.stdout
    assert "daybook budget lg-pause --raise tokens=AMOUNT" in shown.stdout
    listed = cli_in_process("runs", db=db_url).stdout
    assert any(ln.startswith("lg-pause ") and "suspended (budget cap)" in ln for ln in listed.splitlines())
    with Daybook(db_url) as book:
        (waiting,) = [k.run_id for k in book.runs(parent="lg-pause") if k.status == "suspended"]
    # Raised through the call's run (which only its graph continues): the raise goes to the cap's
    # run, the driving run, and wakes it.
    raised = cli("budget", waiting, "--raise", "tokens=100", db=db_url)  # another process
    assert raised.returncode == 0, raised.stderr
    assert "sent to lg-pause (the run whose cap" in raised.stdout
    assert "75 (+100 sent)" in cli_in_process("budget", "lg-pause", db=db_url).stdout
    done = graph_run(db_url, tmp_path, "lg-pause", "{}", "pause", "--resume")
    assert done == REPLIES
    assert asked(tmp_path) == 3  # the graph went on from its checkpoint: calls 1 and 2 not again
    with Daybook(db_url) as book:
        spent = tree_spent(book, "lg-pause")
        assert spent == {"tokens": 3 * CALL["tokens"], "usd": pytest.approx(3 * CALL["usd"])}
        ledger = book.cost("lg-pause", tree=True)
        assert (ledger.calls, ledger.tokens, ledger.respent_calls) == (3, 105, 0)


def test_a_sigkill_inside_a_charged_langgraph_call_neither_charges_it_twice_nor_loses_it(
    db_url: str, tmp_path: Path
) -> None:
    caps = '{"tokens": 1000}'
    (tmp_path / "clean").mkdir()
    assert graph_run(db_url, tmp_path / "clean", "lg-clean", caps, "fail") == REPLIES
    killed = graph_run(db_url, tmp_path, "lg-killed", caps, "fail", "--die-at-call", "2")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert asked(tmp_path) == 2  # the model was asked; its completion was never journaled
    resumed = graph_run(db_url, tmp_path, "lg-killed", caps, "fail", "--resume")
    assert resumed == REPLIES and asked(tmp_path) == 4  # call 2 made again (re-sampled)
    with Daybook(db_url) as book:
        # No double charge, no lost charge: the budget holds each recorded call once.
        assert tree_spent(book, "lg-killed") == tree_spent(book, "lg-clean")
        assert tree_spent(book, "lg-killed")["tokens"] == 3 * CALL["tokens"]
        ledger = book.cost("lg-killed", tree=True)
        assert ledger.respent_calls == 1  # the call cut off may have been billed: shown, not charged
        assert ledger.usd > book.cost("lg-clean", tree=True).usd
