"""Child runs (H8): a parent starts sub-agents as runs of their own and waits for them durably.
Ids are stable across replay (also under asyncio.gather), a child is never started twice, the
parent survives a SIGKILL while two children run, budgets, gates and cancel compose over the
tree. Asserted at the bank (its own counts), on both stores."""

from __future__ import annotations

import asyncio
import json
import signal

import agents
import pytest
from conftest import cli_in_process, last_json, run_child, run_worker, start_child, wait_until

import daybook
from daybook import Daybook, RunStatus
from daybook.demo.bank import Bank


@daybook.workflow(name="kids_pair")
def pair(ctx: daybook.Context, bank: str) -> list[list[str]]:
    return [ctx.child(agents.payments, bank, 2), ctx.child(agents.payments, bank, 1)]


@daybook.workflow(name="kids_gathered")
async def gathered(ctx: daybook.Context, bank: str) -> list[list[str]]:
    return list(await asyncio.gather(*(ctx.child(agents.payments, bank, n) for n in (1, 2, 3))))


def test_a_parent_gets_its_childrens_results_and_replay_never_starts_a_child_again(
    book: Daybook, bank: Bank
) -> None:
    done = book.run(pair, bank.url, run_id="p")
    assert [len(ids) for ids in done] == [2, 1]
    kids = book.runs(parent="p")
    assert sorted(k.run_id for k in kids) == ["p~child1", "p~child3"]
    assert all(k.status == RunStatus.COMPLETED and k.parent_run == "p" for k in kids)
    assert book.replay("p") == done
    assert book.run(pair, bank.url, run_id="p") == done  # attached: the recorded result
    assert len(bank.records["payments"]) == 3
    assert all(n == 1 for n in bank.stats()["executions_by_key"].values())


def test_gathered_children_get_the_same_ids_on_every_replay(book: Daybook, bank: Bank) -> None:
    done = book.run(gathered, bank.url, run_id="g")
    assert [len(ids) for ids in done] == [1, 2, 3]
    ids = sorted(k.run_id for k in book.runs(parent="g"))
    assert ids == ["g~child1", "g~child3", "g~child5"]
    assert book.replay("g") == done
    assert sorted(k.run_id for k in book.runs(parent="g")) == ids
    assert len(bank.records["payments"]) == 6


@pytest.mark.slow
def test_a_parent_killed_while_two_children_run_resumes_and_each_payment_happens_once(
    db_url: str, bank: Bank
) -> None:
    child = start_child(db_url, "start", "fam", "family", f'["{bank.url}", 4, 0.25]')
    wait_until(lambda: len(bank.records.get("payments", {})) >= 3)
    child.send_signal(signal.SIGKILL)  # the parent process and both children it drives
    child.communicate(timeout=300)
    paid = len(bank.records["payments"])
    assert paid < 8
    proc = run_child(db_url, "resume", "fam", timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = last_json(proc.stdout)["result"]  # type: ignore[index]
    assert [len(ids) for ids in result] == [4, 4]
    assert len(bank.records["payments"]) == 8
    assert all(n == 1 for n in bank.stats()["executions_by_key"].values())
    with Daybook(db_url) as book:
        assert len(book.runs(parent="fam")) == 2


def test_a_childs_spend_past_its_parents_fail_cap_is_refused(book: Daybook) -> None:
    done = book.run(agents.household, 10.0, [4.0, 5.0, 3.0], "fail", run_id="h")
    assert done[0] == 4.0 and done[1] == 5.0
    assert "ended failed" in done[2] and "BudgetExceeded" in done[2]
    refused = book.get_run("h~child6")
    assert refused.status == RunStatus.FAILED
    assert "across the run tree of 'h'" in refused.error["message"]  # type: ignore[index]
    assert book.replay("h") == done


@daybook.workflow(name="kids_gated")
def gated_child(ctx: daybook.Context) -> str:
    verdict = ctx.gate("send the newsletter", approvers=["ana"], timeout=3600)
    return "sent" if verdict.approved else "held"


@daybook.workflow(name="kids_gated_parent")
def gated_parent(ctx: daybook.Context) -> str:
    return str(ctx.child(gated_child))


def test_a_gate_in_a_child_is_the_parents_pending_approval_and_approving_it_lets_both_finish(
    book: Daybook,
) -> None:
    book.inline_wait = 0
    token = book.add_approver("ana")
    with pytest.raises(daybook.Suspended):
        book.run(gated_parent, run_id="nl")
    assert book.get_run("nl").status == RunStatus.SUSPENDED
    pending = book.approvals("nl")
    assert len(pending) == 1 and pending[0]["run_id"] == "nl~child1"
    assert pending[0]["parent"] == "nl" and pending[0]["root"] == "nl"
    assert book.approvals("someone-else") == []
    book.approve("nl~child1", str(pending[0]["gate_id"]), approver="ana", token=token)
    assert book.resume("nl~child1") == "sent"
    # The finished child woke its parent, which reads the child's result.
    assert book.resume("nl") == "sent"


@daybook.workflow(name="kids_waiting")
def waiting_child(ctx: daybook.Context) -> str:
    ctx.wait_for("go", timeout=3600)
    return "went"


@daybook.workflow(name="kids_waiting_parent")
def waiting_parent(ctx: daybook.Context) -> str:
    return str(ctx.child(waiting_child))


def test_cancelling_a_parent_cancels_its_unfinished_children_and_show_lists_the_tree(
    book: Daybook, db_url: str
) -> None:
    book.inline_wait = 0
    with pytest.raises(daybook.Suspended):
        book.run(waiting_parent, run_id="w")
    shown = cli_in_process("show", "w", db=db_url)
    assert "child run w~child1  kids_waiting" in shown.stdout, shown.stderr
    assert "child of run w" in cli_in_process("show", "w~child1", db=db_url).stdout
    book.cancel("w", by="ops")
    assert book.get_run("w").status == RunStatus.CANCELLED
    assert book.get_run("w~child1").status == RunStatus.CANCELLED


def test_a_child_signal_name_is_reserved(book: Daybook) -> None:
    book.inline_wait = 0
    with pytest.raises(daybook.Suspended):
        book.run(waiting_parent, run_id="forged")
    with pytest.raises(daybook.ConfigError, match="reserved"):
        book.signal("forged", "child:forged~child1", {"status": "completed"})


def test_a_child_past_its_parents_cap_pauses_and_a_raise_through_it_lets_the_tree_finish_on_a_worker(
    db_url: str,
) -> None:
    with Daybook(db_url) as book:
        book.submit(agents.household, 10.0, [4.0, 5.0, 3.0], run_id="hp")
    assert run_worker(db_url).returncode == 0  # a real worker drives the parent and its children
    with Daybook(db_url) as book:
        assert book.get_run("hp~child6").status == RunStatus.SUSPENDED  # paused, not failed
        assert book.get_run("hp").status == RunStatus.SUSPENDED  # waiting for its child
    shown = cli_in_process("budget", "hp~child6", db=db_url)
    assert shown.returncode == 0, shown.stderr
    assert "across the run tree of 'hp'" in shown.stdout and "past that run's cap of 10" in shown.stdout
    assert "daybook budget hp~child6 --raise usd=AMOUNT" in shown.stdout and "--stop" in shown.stdout
    listed = json.loads(cli_in_process("budget", "hp~child6", "--json", db=db_url).stdout)
    assert "across the run tree of 'hp'" in listed["paused"]
    parent = cli_in_process("budget", "hp", db=db_url).stdout  # the parent says what spent against its cap
    assert "with runs below" in parent and "run hp~child6 waits at this run's cap" in parent
    raised = cli_in_process("budget", "hp~child6", "--raise", "usd=5", db=db_url)
    assert raised.returncode == 0, raised.stderr
    assert run_worker(db_url).returncode == 0
    with Daybook(db_url) as book:
        assert book.get_run("hp").status == RunStatus.COMPLETED
        assert book.get_run("hp").result == [4.0, 5.0, 3.0]
        # The raise went to the parent's cap for its tree; nothing was charged twice.
        assert sum(book.budget(k.run_id)["spent"]["usd"] for k in book.runs(parent="hp")) == 12.0
        assert book.replay("hp") == [4.0, 5.0, 3.0]


def test_raising_the_parents_cap_wakes_its_child_paused_at_it_and_the_tree_finishes_on_a_worker(
    db_url: str,
) -> None:
    with Daybook(db_url) as book:
        book.submit(agents.household, 10.0, [4.0, 5.0, 3.0], run_id="hr")
    assert run_worker(db_url).returncode == 0
    raised = cli_in_process("budget", "hr", "--raise", "usd=2", db=db_url)  # the cap's own run, not the child
    assert raised.returncode == 0, raised.stderr
    assert run_worker(db_url).returncode == 0
    with Daybook(db_url) as book:
        assert book.get_run("hr").status == RunStatus.COMPLETED
        assert book.get_run("hr").result == [4.0, 5.0, 3.0]
        assert book.get_run("hr~child6").status == RunStatus.COMPLETED


def test_stopping_a_child_paused_at_its_parents_cap_cancels_it_and_the_parent_goes_on(db_url: str) -> None:
    with Daybook(db_url) as book:
        book.submit(agents.household, 10.0, [4.0, 5.0, 3.0], run_id="hs")
    assert run_worker(db_url).returncode == 0
    stopped = cli_in_process("budget", "hs~child6", "--stop", db=db_url)
    assert stopped.returncode == 0, stopped.stderr
    assert run_worker(db_url).returncode == 0  # the cancelled child woke its parent
    with Daybook(db_url) as book:
        assert book.get_run("hs~child6").status == RunStatus.CANCELLED
        done = book.get_run("hs")
        assert done.status == RunStatus.COMPLETED
        assert done.result[:2] == [4.0, 5.0] and "ended cancelled" in done.result[2]  # type: ignore[index]
