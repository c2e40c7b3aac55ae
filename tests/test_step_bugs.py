"""A bug inside a step's function parks the run, and `retry` after the fix runs that step again
(issue 25 item 10, newcomer friction 3).

An exception the function given to `ctx.decide` (or the client given to `ctx.llm`) raises by
mistake is journaled as the step's failure, as before: a workflow that catches it replays the
same history. Left uncaught, it parks the run (`needs_attention`) instead of failing it, and
`daybook retry` opens a journal branch on which that step runs again with the fixed code. The
counterparty's own records (a file the app writes) show each step and act ran as often as said.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import cli

import daybook
from daybook import Daybook, RunStatus

APP = """
import json, pathlib
import daybook

LOG = pathlib.Path(__file__).with_suffix(".log")


def _log(what):
    with LOG.open("a") as f:
        f.write(what + "\\n")


@daybook.tool(idempotent=True)
def stepbug_pay(amount: int, idempotency_key: str) -> dict:
    _log("pay")
    return {"paid": amount}


def plan(account):
    _log("plan")
    return {"amt": 5}["amount"]  # BUG: the key is "amt"


class Model:
    model = "m-1"

    def complete(self, prompt, **params):
        _log("llm")
        return daybook.Completion(text="x" + str(len(prompt)), model=self.model)


@daybook.workflow(name="stepbug")
def stepbug(ctx, account):
    paid = ctx.effect(stepbug_pay, amount=1)
    amount = ctx.decide("plan", plan, account).value
    reply = ctx.llm(Model(), f"explain {amount}").value["text"]
    return {"first": paid, "amount": amount, "reply": reply}
"""

RUN = """
import sys, daybook
sys.path.insert(0, sys.argv[2])
import stepbug_app
with daybook.Daybook(sys.argv[1]) as book:
    try:
        book.run(stepbug_app.stepbug, "acct", run_id="sb")
    except daybook.RunParked as e:
        print("PARKED", type(e).__name__)
"""


def _app(tmp_path: Path, *, plan_bug: bool, llm_bug: bool) -> Path:
    text = APP
    if not plan_bug:
        text = text.replace('{"amt": 5}["amount"]', '{"amount": 5}["amount"]')
    if llm_bug:
        text = text.replace('_log("llm")', '_log("llm"); raise RuntimeError("model client bug")')
    path = tmp_path / "stepbug_app.py"
    path.write_text(text)
    for cached in (tmp_path / "__pycache__").glob("stepbug_app*"):
        cached.unlink()  # the fixed source is what the next process imports
    return path


def _log(tmp_path: Path) -> list[str]:
    log = tmp_path / "stepbug_app.log"
    return log.read_text().split() if log.exists() else []


def test_a_bug_in_a_decision_parks_the_run_and_retry_runs_the_fixed_step(db_url: str, tmp_path: Path) -> None:
    app = _app(tmp_path, plan_bug=True, llm_bug=False)
    out = subprocess.run(
        [sys.executable, "-c", RUN, db_url, str(tmp_path)], capture_output=True, text=True, timeout=300
    )
    assert "PARKED RunParked" in out.stdout, out.stderr
    with Daybook(db_url) as book:
        info = book.get_run("sb")
        assert info.status == RunStatus.NEEDS_ATTENTION and info.error["type"] == "StepFailed"
    assert _log(tmp_path) == ["pay", "plan"]

    _app(tmp_path, plan_bug=False, llm_bug=False)
    done = cli("retry", "sb", "--app", str(app), "--by", "dev", db=db_url)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"first": {"paid": 1}, "amount": 5, "reply": "x9"}
    # The step that raised ran again with the fixed code; the confirmed payment was not re-sent.
    assert _log(tmp_path) == ["pay", "plan", "plan", "llm"]
    with Daybook(db_url) as book:
        assert book.get_run("sb").status == RunStatus.COMPLETED
        retried = [ev.data for ev in book.journal("sb") if ev.kind == "run_retried"]
        assert [(r["by"], r["supersede"], r["branch"]) for r in retried] == [("dev", [2], 1)]
        assert book.replay("sb", app=str(app)) == {"first": {"paid": 1}, "amount": 5, "reply": "x9"}


def test_a_bug_in_a_model_client_parks_and_a_second_retry_before_the_fix_parks_again(
    db_url: str, tmp_path: Path
) -> None:
    app = _app(tmp_path, plan_bug=False, llm_bug=True)
    out = subprocess.run(
        [sys.executable, "-c", RUN, db_url, str(tmp_path)], capture_output=True, text=True, timeout=300
    )
    assert "PARKED" in out.stdout, out.stderr
    unfixed = cli("retry", "sb", "--app", str(app), db=db_url)
    assert unfixed.returncode != 0 and "model client bug" in unfixed.stderr + unfixed.stdout
    assert _log(tmp_path) == ["pay", "plan", "llm", "llm"]  # the retry did call the model again
    _app(tmp_path, plan_bug=False, llm_bug=False)
    done = cli("retry", "sb", "--app", str(app), db=db_url)
    assert done.returncode == 0, done.stderr
    assert _log(tmp_path) == ["pay", "plan", "llm", "llm", "llm"]
    with Daybook(db_url) as book:
        branches = [ev.data["branch"] for ev in book.journal("sb") if ev.kind == "run_retried"]
        assert branches == [1, 2]


CALLS: list[str] = []


class OutOfStock(Exception):
    pass


def _flaky_lookup() -> int:
    CALLS.append("lookup")
    raise KeyError("sku")


@daybook.workflow(name="stepbug_caught")
def caught(ctx: daybook.Context) -> str:
    try:
        ctx.decide("lookup", _flaky_lookup)
    except daybook.StepFailed as exc:
        return f"fallback after {exc.error['type']}"
    return "found"


def test_a_failure_the_workflow_catches_stays_part_of_its_history(db_url: str) -> None:
    CALLS.clear()
    with Daybook(db_url) as book:
        assert book.run(caught, run_id="c") == "fallback after KeyError"
        assert book.replay("c") == "fallback after KeyError"  # replayed, not run again
        assert book.run(caught, run_id="c") == "fallback after KeyError"
    assert CALLS == ["lookup"]


STOCK: list[int] = []


def _take_stock() -> int:
    CALLS.append("stock")
    if not STOCK:
        raise OutOfStock("sku-1")
    return STOCK[0]


def _refuse() -> int:
    CALLS.append("refuse")
    if not STOCK:
        raise daybook.WorkflowFailed("no stock, no order")
    return STOCK[0]


@daybook.workflow(name="stepbug_fail_on", fail_on=(OutOfStock,))
def declared(ctx: daybook.Context) -> int:
    return int(ctx.decide("stock", _take_stock).value)


@daybook.workflow(name="stepbug_on_purpose")
def on_purpose(ctx: daybook.Context) -> int:
    return int(ctx.decide("refuse", _refuse).value)


@pytest.mark.parametrize("workflow", [declared, on_purpose])
def test_a_step_that_fails_on_purpose_fails_the_run_and_retry_asks_again(
    db_url: str, workflow: object
) -> None:
    CALLS.clear()
    STOCK.clear()
    with Daybook(db_url) as book:
        with pytest.raises(daybook.RunFailed) as err:
            book.run(workflow, run_id="p")
        assert not isinstance(err.value, daybook.RunParked)
        assert book.get_run("p").status == RunStatus.FAILED
        with pytest.raises(daybook.RunFailed):
            book.resume("p")  # resume keeps returning the stored failure
        STOCK.append(3)
        assert book.retry("p") == 3  # the step that failed was asked again, and now answers
    assert len(CALLS) == 2


@daybook.workflow(name="stepbug_uncaught")
def uncaught(ctx: daybook.Context) -> int:
    return int(ctx.decide("lookup", _flaky_lookup).value)


def test_on_error_fail_keeps_a_step_bug_terminal(db_url: str) -> None:
    with Daybook(db_url, on_error="fail") as book:
        with pytest.raises(daybook.RunFailed) as err:
            book.run(uncaught, run_id="u")
        assert not isinstance(err.value, daybook.RunParked)
        assert book.get_run("u").status == RunStatus.FAILED


def test_a_parked_row_that_names_no_step_opens_no_branch() -> None:
    from daybook.records import Event, Kind
    from daybook.runtime.operator import _rerun

    def rows(rerun: object) -> list[Event]:
        return [Event(run_id="r", seq=2, kind=Kind.RUN_ATTENTION.value, data={"rerun": rerun})]

    for bad in (True, "2", None, 2.0, [2]):
        assert _rerun(rows(bad)) == {}
    assert _rerun(rows(2)) == {"supersede": [2], "branch": 1}
    retried = [*rows(2), Event(run_id="r", seq=3, kind=Kind.RUN_RETRIED.value, data={"supersede": [2]})]
    assert _rerun(retried) == {}  # already retried: nothing stopped since
