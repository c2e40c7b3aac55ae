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
        timeout=60,
    )
    assert out.returncode == 0 and "usd" in out.stdout and "0.04" in out.stdout and "0.1" in out.stdout
    with pytest.raises(daybook.ConfigError):
        Daybook(db_url).raise_budget("cli-budget", usd=1)  # finished runs take no raise
