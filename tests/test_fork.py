"""Edit a past turn (S13): a fork shares its run's journal up to a step (replayed, never
re-fired) and goes on under its own keys; what the original did later is listed by class, and
what cannot be undone blocks the fork until confirmed. Asserted at the bank, on both stores."""

from __future__ import annotations

import json
from pathlib import Path

import agents
import pytest
from conftest import cli, cli_in_process

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
    assert [e["undone"] for e in later] == [False, False, False]  # nothing can undo a payment
    assert book.get_run("six-b").status == "pending"
    result = book.resume("six-b")
    # The shared payments were replayed, and so were the original's later ones: the fork asks
    # for the same acts, which stand done in the world, so none is made twice (S13).
    assert len(bank.records["payments"]) == 5
    original = book.run(agents.payments, bank.url, 5, run_id="six")
    assert result == original
    assert [ev for ev in book.journal("six-b") if ev.kind == "intent"] == []
    assert all(n == 1 for n in bank.stats()["executions_by_key"].values())
    assert book.replay("six-b") == result  # the fork replays from the shared prefix and its own rows


def test_a_what_if_fork_that_keeps_the_original_makes_its_later_acts_again(book: Daybook, bank: Bank) -> None:
    book.run(agents.payments, bank.url, 5, run_id="six")
    _fork_id, later = book.fork("six", 3, confirm=True, new_run_id="six-b", undo=False)
    assert all("undone" not in e for e in later)
    result = book.resume("six-b")
    # The fork's steps 4-6 are its own, under its own keys; the original's stay as they were.
    assert len(bank.records["payments"]) == 5 + 3
    original = book.run(agents.payments, bank.url, 5, run_id="six")
    assert result[:2] == original[:2] and result[2:] != original[2:]
    own = [ev for ev in book.journal("six-b") if ev.kind == "intent"]
    assert [ev.step for ev in own] == [4, 5, 6] and all(str(ev.key).startswith("six-b/") for ev in own)


def test_a_fork_with_an_edited_input_redoes_only_what_comes_after_the_fork_point(
    book: Daybook, bank: Bank
) -> None:
    book.run(trip, bank.url, 3, run_id="trip")
    fork_id, later = book.fork("trip", 1, kwargs={"bank": bank.url, "hotel": 7})
    # The original's room (compensable) is undone by its inverse first, then listed as undone.
    assert [(e["step"], e["class"], e["undone"]) for e in later] == [(2, "compensable", True)]
    flight, _room = book.resume(fork_id)
    assert flight == book.run(trip, bank.url, 3, run_id="trip")[0]  # the same flight, booked once
    payments = bank.records["payments"]
    assert len(payments) == 3 and sorted(p["n"] for p in payments.values()) == [1, 3, 7]
    assert sorted(bank.records["cancels"]) == ["comp/trip/2"]  # the hotel for 3 cancelled, once


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
    assert "as c2 (pending)" in out.stdout and "compensable" in out.stdout and "undone" in out.stdout
    assert sorted(bank.records["cancels"]) == ["comp/c/2"]  # the original's room, cancelled once
    bad = cli_in_process("fork", "c", "--at", "1", "--input", "{nope", db=db_url)
    assert bad.returncode == 2 and "not JSON" in bad.stderr
    listed = cli("fork", "c", "--at", "0", "--json", "--app", app, db=db_url)
    assert [e["step"] for e in json.loads(listed.stdout)["later_effects"]] == [1, 2]


# D-7 (audit 2026-11-26): the world the original made after the fork point, and the fork's own.
WORLD: list[str] = []


def _undo_step(original: dict[str, int], result: str, idempotency_key: str) -> None:
    WORLD.remove(result)


fork_undo_step = daybook.tool(idempotent=True, irreversible=False, name="fork_undo_step")(_undo_step)


@daybook.tool(inverse=fork_undo_step, name="fork_step")
def fork_step(i: int, idempotency_key: str) -> str:
    WORLD.append(f"step{i}:{idempotency_key}")
    return WORLD[-1]


@daybook.tool(irreversible=True, name="fork_announce")
def fork_announce(text: str, idempotency_key: str) -> None:
    WORLD.append(f"announce:{text}:{idempotency_key}")


@daybook.workflow(name="fork_six")
def six(ctx: daybook.Context, text: str = "halfway") -> int:
    for i in range(6):
        ctx.effect(fork_step, i=i)
        if i == 3:
            ctx.effect(fork_announce, text=text)
    return len(WORLD)


@pytest.fixture
def world() -> list[str]:
    WORLD.clear()
    return WORLD


def test_a_fork_undoes_the_originals_later_steps_once_and_never_repeats_its_announcement(
    db_url: str, world: list[str]
) -> None:
    with Daybook(db_url) as book:
        book.run(six, run_id="F")
        with pytest.raises(daybook.ConfigError, match="irreversible"):
            book.fork("F", 3, new_run_id="F2")  # the announcement cannot be undone: confirm first
        assert len(world) == 7  # refused before anything was undone
        fork_id, later = book.fork("F", 3, confirm=True, new_run_id="F2")
        assert [(e["step"], e["tool"], e["class"], e["undone"]) for e in later] == [
            (4, "fork_step", "compensable", True),
            (5, "fork_announce", "irreversible", False),  # reported: it stays done
            (6, "fork_step", "compensable", True),
            (7, "fork_step", "compensable", True),
        ]
        assert world == ["step0:F/1", "step1:F/2", "step2:F/3", "announce:halfway:F/5"]
        assert book.resume(fork_id) == 7
        assert book.get_run("F").status == "completed"  # the original's journal is untouched
        # Each undo ran once, in the original's recovery run, superseding nothing by deletion.
        undos = [ev.key for ev in book.journal("F~undo@3") if ev.kind == "intent"]
        assert undos == ["comp/F/7", "comp/F/6", "comp/F/4"]
    # Exactly one copy of each step, and one announcement: the original's, replayed by the fork.
    assert world == [
        "step0:F/1",
        "step1:F/2",
        "step2:F/3",
        "announce:halfway:F/5",
        "step3:F2/4",
        "step4:F2/6",
        "step5:F2/7",
    ]
    # Without the undo (a what-if fork), the same scenario ends with both copies: the control.
    world.clear()
    with Daybook(db_url) as book:
        book.run(six, run_id="G")
        book.fork("G", 3, confirm=True, new_run_id="G2", undo=False)
        book.resume("G2")
    assert [w for w in world if w.startswith(("step3", "announce"))] == [
        "step3:G/4",
        "announce:halfway:G/5",
        "step3:G2/4",
        "announce:halfway:G2/5",
    ]


def test_a_fork_that_edits_the_announcement_parks_instead_of_announcing_again(
    db_url: str, world: list[str]
) -> None:
    with Daybook(db_url) as book:
        book.run(six, run_id="F")
        fork_id, _later = book.fork("F", 3, kwargs={"text": "changed"}, confirm=True, new_run_id="F2")
        with pytest.raises(daybook.NeedsAttention, match="irreversible and was done"):
            book.resume(fork_id)
        assert book.get_run(fork_id).status == "needs_attention"
    # The original's announcement stands, once; the edited one was not made.
    assert [w for w in world if w.startswith("announce")] == ["announce:halfway:F/5"]
    assert [w for w in world if w.startswith("step3")] == ["step3:F2/4"]


@pytest.mark.parametrize("verdict", ["approve", "deny"])
def test_with_gate_irreversible_a_forks_changed_announcement_is_made_only_if_approved(
    db_url: str, world: list[str], verdict: str
) -> None:
    with Daybook(db_url, inline_wait=0.05, gate_irreversible=["oncall"]) as book:
        token = book.add_approver("oncall")
        with pytest.raises(daybook.Suspended, match="verdict"):
            book.run(six, run_id="F")
        (gate,) = book.approvals()
        book.approve("F", str(gate["gate_id"]), approver="oncall", token=token)
        book.resume("F", wait=10)
        book.fork("F", 3, kwargs={"text": "changed"}, confirm=True, new_run_id="F2")
        with pytest.raises(daybook.Suspended, match="verdict"):
            book.resume("F2")  # the changed announcement waits at the gate
        (gate,) = book.approvals()
        book.approve("F2", str(gate["gate_id"]), approver="oncall", token=token, approve=verdict == "approve")
        if verdict == "approve":
            book.resume("F2", wait=10)
        else:
            with pytest.raises(daybook.DaybookError, match="not run"):
                book.resume("F2", wait=10)
    announced = [w for w in world if w.startswith("announce")]
    if verdict == "approve":  # a person approved the repeat: the changed one is made, once
        assert announced == ["announce:halfway:F/8", "announce:changed:F2/7"]
        assert [w for w in world if w.startswith("step")] == [
            "step0:F/1",
            "step1:F/2",
            "step2:F/3",
            "step3:F2/4",
            "step4:F2/8",
            "step5:F2/9",
        ]
    else:
        assert announced == ["announce:halfway:F/8"]
