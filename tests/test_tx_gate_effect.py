"""`Daybook(gate_irreversible=...)`: an irreversible `ctx.effect` outside any transaction is a
one-effect transaction whose release passes an approval gate, asserted at the counterparty (a
file the tool appends to); the agent loop's own gate is not asked twice; the default runs it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import daybook
from daybook import Daybook


@daybook.tool(irreversible=True)
def announce(*, root: str, text: str, idempotency_key: str) -> str:
    with Path(root, "sent").open("a") as fh:
        fh.write(text + "\n")
    return text


def _sent(root: Path) -> list[str]:
    path = root / "sent"
    return path.read_text().splitlines() if path.exists() else []


@daybook.workflow(name="gate_effect_plain")
def plain(ctx: daybook.Context, root: str) -> str:
    return ctx.effect(announce, root=root, text="hello")


@daybook.workflow(name="gate_effect_declined")
def declined(ctx: daybook.Context, root: str) -> str:
    try:
        return ctx.effect(announce, root=root, text="hello")
    except daybook.ReleaseDeclined:
        return "not sent"


def test_by_default_an_irreversible_effect_outside_a_transaction_runs_at_once(
    db_url: str, tmp_path: Path
) -> None:
    with Daybook(db_url) as book:
        assert book.run(plain, str(tmp_path), run_id="p1") == "hello"
        assert book.approvals() == []
    assert _sent(tmp_path) == ["hello"]


@pytest.mark.parametrize("verdict", ["approve", "deny"])
def test_with_gate_irreversible_the_effect_waits_for_an_approver(
    db_url: str, tmp_path: Path, verdict: str
) -> None:
    with Daybook(db_url, inline_wait=0.05, gate_irreversible=["oncall"]) as book:
        token = book.add_approver("oncall")
        with pytest.raises(daybook.Suspended, match="verdict"):
            book.run(declined, str(tmp_path), run_id="g1")
        assert _sent(tmp_path) == []  # held: nothing reached the counterparty
        (gate,) = book.approvals()
        assert gate["action"] == "effect:announce" and gate["approvers"] == ["oncall"]
        book.approve("g1", str(gate["gate_id"]), approver="oncall", token=token, approve=verdict == "approve")
        result = book.resume("g1", wait=10)
    if verdict == "approve":
        assert result == "hello" and _sent(tmp_path) == ["hello"]  # released once
    else:
        assert result == "not sent" and _sent(tmp_path) == []  # never released


def test_the_agent_loops_gate_is_not_asked_twice(db_url: str, tmp_path: Path) -> None:
    act = json.dumps({"tool": "announce", "args": {"root": str(tmp_path), "text": "hi"}})
    loop = daybook.AgentLoop(
        llm=daybook.ScriptedLLM(lambda p: act if "steps=0" in p else '{"tool": "stop"}'),
        tools={"announce": announce},
        observe=lambda: {},
        prompt=lambda goal, obs, history: f"steps={len(history)}",
        judge=lambda goal, history: daybook.Judgement(True),
    )

    @daybook.workflow(name="gate_effect_loop")
    def agent(ctx: daybook.Context) -> str:
        return loop.run(ctx, "announce").outcome

    with Daybook(db_url, inline_wait=0.05, gate_irreversible=True) as book:
        token = book.add_approver("oncall")
        with pytest.raises(daybook.Suspended, match="verdict"):
            book.run(agent, run_id="l1")
        (gate,) = book.approvals()
        book.approve("l1", str(gate["gate_id"]), approver="oncall", token=token)
        assert book.resume("l1", wait=10) == "ok"  # no second gate suspended it
        gates = [e.name for e in book.journal("l1") if e.kind == "decision" and e.name.startswith("gate:")]
        assert gates == ["gate:announce"]  # the loop's gate only
    assert _sent(tmp_path) == ["hi"]


def test_gate_irreversible_refuses_a_bad_policy() -> None:
    with pytest.raises(daybook.ConfigError, match="gate_irreversible"):
        Daybook("sqlite:///:memory:", gate_irreversible="oncall")
