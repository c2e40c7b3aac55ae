"""A gate's request as every view shows it: `daybook approvals`, the web approvals page and a
run's gates section (escaped), and the MCP proxy's answer to a gated call (text and structured
content): approvals needed and given, the deadline and expiry policy, the precheck facts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import cli_in_process
from starlette.testclient import TestClient

import daybook
from daybook import Daybook, Suspended
from daybook.web import build

pytest.importorskip("mcp")

from mcp import types
from mcp_support import body, client, ledger_of, run, text
from mcp_support import ledger as ledger  # a fixture

XSS = "<script>alert('gate')</script>"


@daybook.workflow
def shown(ctx: daybook.Context) -> str:
    return ctx.gate(
        "refund",
        approvers=["alice", "bob"],
        timeout=3600,
        on_timeout="escalate",
        escalate_to=[["carol"], ["dave"]],
        approvals=2,
        precheck=lambda: {"price": 100, "note": XSS},
        about={"customer": XSS},
    ).outcome


def parked_gate(book: Daybook) -> dict[str, Any]:
    book.inline_wait = 0.05
    with pytest.raises(Suspended):
        book.run(shown, run_id="shown")
    (gate,) = book.approvals()
    return gate


def test_daybook_approvals_shows_the_tally_the_expiry_policy_and_the_facts(book: Daybook) -> None:
    alice = book.add_approver("alice")
    gate = parked_gate(book)
    book.approve("shown", str(gate["gate_id"]), approver="alice", token=alice)
    out = cli_in_process("approvals", db=book.store.url)
    assert out.returncode == 0, out.stderr
    assert "1/2 (alice)" in out.stdout
    assert "escalate to carol (level 1 of 2)" in out.stdout
    assert '{"note": "' in out.stdout  # the facts (sorted, cut to the column)
    listed = json.loads(cli_in_process("approvals", "--json", db=book.store.url).stdout)
    assert listed[0]["approvals"] == 2 and listed[0]["expiry"] == "escalate"
    assert listed[0]["escalate_to"] == [["carol"], ["dave"]] and listed[0]["facts"]["price"] == 100


def test_the_web_pages_show_the_gate_request_escaped(book: Daybook) -> None:
    parked_gate(book)
    client = TestClient(build(book))
    for page in (client.get("/approvals").text, client.get("/runs/shown").text):
        assert "0/2" in page and "escalate to carol (level 1 of 2)" in page
        assert "&#34;price&#34;: 100" in page or "&quot;price&quot;: 100" in page or '"price": 100' in page
        assert XSS not in page and "&lt;script&gt;" in page


def test_a_gated_mcp_call_answers_with_the_gate_request_and_needs_two_approvers(
    book: Daybook, ledger: Path, tmp_path: Path
) -> None:
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"tools": {"wire": {"approvals": 2, "on_timeout": "wait", "timeout": 600}}}))
    alice, bob = book.add_approver("alice"), book.add_approver("bob")

    async def call() -> types.CallToolResult:
        async with client(book, session="eyes", policy=policy) as c:
            return await c.call_tool("wire", {"to": "bob", "amount": 5})

    first = run(call)
    assert first.isError and "0 of 2 distinct approvers" in text(first)
    assert "keep waiting, marked overdue" in text(first)
    request = (first.structuredContent or {})["daybook_pending_approval"]
    assert request["approvals"] == 2 and request["given"] == [] and request["expiry"] == "wait"
    assert isinstance(request["deadline"], float) and request["about"]["tool"] == "wire"
    run_id, gate = str(request["run_id"]), str(request["gate_id"])
    book.approve(run_id, gate, approver="alice", token=alice)
    book.approve(run_id, gate, approver="alice", token=alice)  # counts once
    second = run(call)
    assert second.isError and "1 of 2 distinct approvers (alice)" in text(second)
    assert ledger_of(ledger) == []  # nothing reached the server
    book.approve(run_id, gate, approver="bob", token=bob)
    assert body(run(call))["execution"] == 1
    assert len(ledger_of(ledger)) == 1


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ({"approvals": 0}, "approvals"),
        ({"on_timeout": "later"}, "on_timeout"),
        ({"on_timeout": "escalate"}, "go together"),
        ({"escalate_to": ["carol"]}, "go together"),
    ],
)
def test_a_policy_with_bad_gate_terms_is_refused_saying_which(entry: dict[str, Any], says: str) -> None:
    from daybook.integrations.mcp import policy_from

    with pytest.raises(daybook.ConfigError, match=says):
        policy_from({"tools": {"wire": entry}}).for_tool("wire", None, {})
