"""Compensation unwinds newest first, once each, survives a kill, and tells the truth when stuck."""

from __future__ import annotations

import json

import agents
import pytest
from conftest import killed, run_child

import daybook
from daybook import Daybook, RunStatus


def test_effects_unwind_in_reverse_order_each_once_even_across_a_kill(
    db_url: str,
    bank,  # type: ignore[no-untyped-def]
) -> None:
    # Killed right after the 2nd inverse's intent (3 legs + 2 inverse intents).
    proc = run_child(
        db_url, "start", "saga", "saga", json.dumps([bank.url, 3, -1, "none"]), "--kill-after", "intent:5"
    )
    assert killed(proc)
    with Daybook(db_url) as book:
        result = book.resume("saga", wait=10)
    assert result == {"compensated": ["saga/3", "saga/2", "saga/1"]}
    cancels = bank.records["cancels"]
    assert list(cancels) == ["comp/saga/3", "comp/saga/2", "comp/saga/1"]  # C, B, A
    executions = bank.stats()["executions_by_key"]
    assert all(executions[k] == 1 for k in cancels)


def test_a_failed_inverse_leaves_the_run_stuck_listing_what_remains(
    db_url: str,
    bank,  # type: ignore[no-untyped-def]
) -> None:
    agents.STUCK_ALERTS.clear()
    with Daybook(db_url) as book:
        with pytest.raises(daybook.RunStuck) as err:
            book.run(agents.saga, bank.url, 3, 1, "irreversible", run_id="stuck")
        info = book.get_run("stuck")
        assert info.status == RunStatus.STUCK
        message = str(err.value)
        assert "stuck/2" in message  # leg 1's inverse failed
        assert "stuck/4" in message  # the blind payment has no inverse
        # Leg 0 (A) was still unwound; leg 2 too; the alert fired once.
        assert sorted(bank.records["cancels"]) == ["comp/stuck/1", "comp/stuck/3"]
        assert agents.STUCK_ALERTS == [["stuck/2"]]
        with pytest.raises(daybook.RunStuck):
            book.resume("stuck")  # replay: nothing re-sent, the hook does not fire again
        assert agents.STUCK_ALERTS == [["stuck/2"]]
    assert all(v == 1 for v in bank.stats()["executions_by_key"].values())


NOTES: list[str] = []


@daybook.tool(irreversible=False)  # undoable, though it declares no inverse
def note_add(*, text: str, idempotency_key: str) -> str:
    NOTES.append(text)
    return text


@daybook.tool(irreversible=False)
def note_delete(*, text: str, idempotency_key: str) -> str:
    NOTES.remove(text)
    return text


@daybook.tool(irreversible=True)
def announce(*, text: str, idempotency_key: str) -> str:
    return text


def test_a_model_proposed_undo_is_validated_and_gated_and_never_tried_for_irreversible_acts(
    book: Daybook,
) -> None:
    NOTES.clear()
    asked: list[str] = []

    def propose(effect: dict[str, object]) -> dict[str, object]:
        asked.append(str(effect["name"]))
        return {"tool": "note_delete", "args": {"text": effect["args"]["text"]}}  # type: ignore[index]

    @daybook.workflow
    def undo_me(ctx: daybook.Context, loud: bool) -> dict[str, object]:
        ctx.effect(note_add, text="draft")
        if loud:
            ctx.effect(announce, text="we shipped")
        report = ctx.compensate(propose=propose, validate=lambda effect, plan: True)
        return {"compensated": report.compensated}

    token = book.add_approver("lead")
    book.inline_wait = 0.05
    with pytest.raises(daybook.Suspended, match="verdict"):
        book.run(undo_me, False, run_id="proposed")
    gate = str(book.approvals()[0]["gate_id"])
    book.approve("proposed", gate, approver="lead", token=token)
    assert book.resume("proposed") == {"compensated": ["proposed/1"]}
    assert NOTES == [] and asked == ["note_add"]

    with pytest.raises(daybook.Suspended):
        book.run(undo_me, True, run_id="loud")
    book.approve("loud", str(book.approvals()[0]["gate_id"]), approver="lead", token=token)
    with pytest.raises(daybook.RunStuck, match="no inverse for \\['loud/2'\\]"):
        book.resume("loud")
    assert asked == ["note_add", "note_add"]  # never asked to improvise an undo of `announce`


def test_the_outcome_row_carries_the_counterparty_reference_and_the_undo(
    book: Daybook,
    bank,  # type: ignore[no-untyped-def]
) -> None:
    @daybook.tool(reconcile=agents.status, inverse=agents.cancel_leg, reference=lambda result: result["id"])
    def wire(*, bank: str, n: int, fail_inverse_of: int, idempotency_key: str) -> object:
        return agents.post(f"{bank}/payments", {"n": n}, idempotency_key)

    @daybook.workflow
    def one_wire(ctx: daybook.Context, url: str) -> object:
        return ctx.effect(wire, bank=url, n=1, fail_inverse_of=-1)["id"]

    wire_id = book.run(one_wire, bank.url, run_id="ref")
    [outcome] = [e for e in book.journal("ref") if e.kind == "outcome"]
    # One row, so the outcome and its compensation handle are written atomically (J6, L2).
    assert outcome.data["ref"] == wire_id
    assert outcome.data["compensation"] == {"tool": "cancel_leg", "key": "comp/ref/1"}
    assert book.why("ref", 1)["effect"]["ref"] == wire_id  # type: ignore[index]
