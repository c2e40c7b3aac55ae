"""Edit a past turn (S13): a fork shares its run's journal up to a step (replayed, never
re-fired) and goes on under its own keys; what the original did later is listed by class, and
what cannot be undone blocks the fork until confirmed. Asserted at the bank, on both stores."""

from __future__ import annotations

import json
from pathlib import Path

import agents
import pytest
from conftest import cli

import daybook
from daybook import Daybook
from daybook.demo.bank import Bank


@daybook.workflow(name="fork_trip")
def trip(ctx: daybook.Context, bank: str, hotel: int) -> list[str]:
    flight = ctx.effect(agents.book_leg, bank=bank, n=1, fail_inverse_of=-1)
    room = ctx.effect(agents.book_leg, bank=bank, n=hotel, fail_inverse_of=-1)
    return [str(flight["id"]), str(room["id"])]


def test_a_fork_at_step_3_of_6_shares_3_steps_and_lists_the_later_effects(book: Daybook, bank: Bank) -> None:
    book.run(agents.payments, bank.url, 5, run_id="six")  # step 1 plans, steps 2-6 pay
    assert len(bank.records["payments"]) == 5
    with pytest.raises(daybook.ConfigError, match="does not undo"):
        book.fork("six", 3)  # the later payments have no inverse: they need confirm
    fork_id, later = book.fork("six", 3, confirm=True, new_run_id="six-b")
    assert fork_id == "six-b"
    assert [(e["step"], e["tool"], e["status"], e["class"]) for e in later] == [
        (4, "pay", "confirmed", "no inverse"),
        (5, "pay", "confirmed", "no inverse"),
        (6, "pay", "confirmed", "no inverse"),
    ]
    assert book.get_run("six-b").status == "pending"
    result = book.resume("six-b")
    # The two shared payments were replayed, not made again; steps 4-6 are the fork's own.
    assert len(bank.records["payments"]) == 5 + 3
    original = book.run(agents.payments, bank.url, 5, run_id="six")
    assert result[:2] == original[:2] and result[2:] != original[2:]
    own = [ev for ev in book.journal("six-b") if ev.kind == "intent"]
    assert [ev.step for ev in own] == [4, 5, 6] and all(str(ev.key).startswith("six-b/") for ev in own)
    assert all(n == 1 for n in bank.stats()["executions_by_key"].values())
    assert book.replay("six-b") == result  # the fork replays from the shared prefix and its own rows


def test_a_fork_with_an_edited_input_redoes_only_what_comes_after_the_fork_point(
    book: Daybook, bank: Bank
) -> None:
    book.run(trip, bank.url, 3, run_id="trip")
    fork_id, later = book.fork("trip", 1, kwargs={"bank": bank.url, "hotel": 7})
    assert [(e["step"], e["class"]) for e in later] == [(2, "compensable")]  # listed, not blocking
    flight, _room = book.resume(fork_id)
    assert flight == book.run(trip, bank.url, 3, run_id="trip")[0]  # the same flight, booked once
    payments = bank.records["payments"]
    assert len(payments) == 3 and sorted(p["n"] for p in payments.values()) == [1, 3, 7]


def test_a_fork_is_refused_at_a_step_that_does_not_exist_or_with_an_unsettled_shared_effect(
    book: Daybook, bank: Bank
) -> None:
    book.run(trip, bank.url, 3, run_id="t")
    for bad in (-1, 3, "2"):
        with pytest.raises(daybook.ConfigError, match="--at must be a step"):
            book.fork("t", bad)  # type: ignore[arg-type]
    with pytest.raises(daybook.RunNotFound):
        book.fork("nope", 1)
    book.fork("t", 1, new_run_id="t2")
    with pytest.raises(daybook.ConfigError, match="exists already"):
        book.fork("t", 1, new_run_id="t2")
    bank.faults.drop_after_execute = 99
    bank.faults.status_down = 99
    with pytest.raises(daybook.DaybookError):
        book.run(trip, bank.url, 4, run_id="open")
    with pytest.raises(daybook.ConfigError, match="no settled outcome"):
        book.fork("open", 1)


def test_the_cli_forks_and_lists_what_the_original_did_later(db_url: str, bank: Bank) -> None:
    with Daybook(db_url) as book:
        book.run(trip, bank.url, 3, run_id="c")
    edited = json.dumps({"args": [bank.url, 9]})
    unknown = cli("fork", "c", "--at", "1", "--input", edited, db=db_url)
    assert unknown.returncode == 1 and "unknown class" in unknown.stderr  # its tools not imported
    app = str(Path(__file__).parent / "agents.py")
    out = cli("fork", "c", "--at", "1", "--input", edited, "--run-id", "c2", "--app", app, db=db_url)
    assert out.returncode == 0, out.stderr
    assert "as c2 (pending)" in out.stdout and "compensable" in out.stdout
    bad = cli("fork", "c", "--at", "1", "--input", "{nope", db=db_url)
    assert bad.returncode == 2 and "not JSON" in bad.stderr
    listed = cli("fork", "c", "--at", "0", "--json", "--app", app, db=db_url)
    assert [e["step"] for e in json.loads(listed.stdout)["later_effects"]] == [1, 2]
