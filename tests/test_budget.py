"""Budgets are a ledger in run state: a kill and resume restores the spend and spends nothing again."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import killed, run_child

import daybook
from daybook import Daybook


def _charges(book: Daybook, run_id: str) -> int:
    return sum(1 for e in book.journal(run_id) if e.name == "budget:charge")


def test_spend_survives_a_kill_and_the_cap_still_holds(db_url: str) -> None:
    # Killed right after the second $0.04 charge is journaled ($0.08 of a $0.10 cap).
    proc = run_child(db_url, "start", "spend", "spender", json.dumps([5]), "--kill-after", "decision:3")
    assert killed(proc)
    with Daybook(db_url) as book:
        assert book.budget("spend")["spent"] == {"usd": pytest.approx(0.08)}
        result = book.resume("spend")
        assert result == {"spent": pytest.approx(0.08), "rounds": 2}  # admit($0.04) refused
        assert _charges(book, "spend") == 2  # nothing charged twice
        assert book.replay("spend") == result


def test_raising_a_cap_is_journaled_and_lets_the_run_spend_more(book: Daybook) -> None:
    import agents

    book.submit(agents.spender, 5, run_id="raised")
    book.raise_budget("raised", usd=0.08, by="cfo")
    assert book.resume("raised") == {"spent": pytest.approx(0.16), "rounds": 4}
    raises = [e for e in book.journal("raised") if e.status == "received"]
    assert [e.data["sender"] for e in raises] == ["cfo"]
    assert book.budget("raised")["caps"] == {"usd": pytest.approx(0.18)}


def test_budget_cli_shows_spent_against_caps(db_url: str) -> None:
    import agents

    with Daybook(db_url) as book:
        book.run(agents.spender, 1, run_id="cli-budget")
    out = subprocess.run(
        [sys.executable, "-m", "daybook", "budget", "cli-budget", "--db", db_url],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0 and "usd" in out.stdout and "0.04" in out.stdout and "0.1" in out.stdout
    with pytest.raises(daybook.ConfigError):
        Daybook(db_url).raise_budget("cli-budget", usd=1)  # finished runs take no raise


def test_two_runs_drawing_on_one_pool_never_spend_past_its_cap(db_url: str) -> None:
    import threading

    @daybook.workflow
    def drawer(ctx: daybook.Context) -> int:
        draws = 0
        while ctx.budget.draw("research", usd=0.1):
            draws += 1
        return draws

    with Daybook(db_url) as admin:
        admin.budget_pool("research").set_cap(usd=1.0)
    results: dict[str, int] = {}

    def run(rid: str) -> None:
        with Daybook(db_url) as book:
            results[rid] = book.run(drawer, run_id=rid)

    threads = [threading.Thread(target=run, args=(f"pool-{i}",)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with Daybook(db_url) as book:
        caps, spent = book.budget_pool("research").totals()
        assert caps == {"usd": 1.0}
        assert spent["usd"] == pytest.approx(1.0)  # $1 cap, never more
        assert sum(results.values()) == 10
        per_run = [book.budget(r)["spent"].get("usd", 0.0) for r in results]
        assert sum(per_run) == pytest.approx(1.0)
        assert book.replay("pool-0") == results["pool-0"]  # replay draws nothing
        assert book.budget_pool("research").totals()[1]["usd"] == pytest.approx(1.0)
