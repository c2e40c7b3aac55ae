"""A gated MCP call with a precheck (`"precheck"` in the proxy's tools policy: an upstream
read-only tool called with the call's arguments): its approval request carries the same fields as
a `ctx.gate`/`@tool` gate's (the facts, approvals=N, the deadline and what happens then), the
facts are read again after the approval and before the call is sent, and an approval given on
facts that changed since is asked again with the new facts instead of releasing the call. The
upstream is the real counter server (its ledger is its own count); both stores."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp import types
from mcp_support import body, client, ledger_of, proxy_process, run, text
from mcp_support import ledger as ledger  # a fixture

from daybook import Daybook
from daybook.integrations.mcp.proxy import REQUEST_FIELDS

POLICY = {
    "tools": {
        "wire": {
            "precheck": {"tool": "quote", "arguments": ["to"]},
            "approvals": 2,
            "timeout": 3600,
            "on_timeout": "deny",
        }
    }
}
WIRE = {"to": "bob", "amount": 5}


@pytest.fixture
def rate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The rate the server's read-only `quote` answers (the world a precheck reads)."""
    path = tmp_path / "rate"
    path.write_text("1.0")
    monkeypatch.setenv("MCP_RATE", str(path))
    return path


def policy_file(tmp_path: Path) -> Path:
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(POLICY))
    return path


def request_of(reply: types.CallToolResult) -> dict[str, Any]:
    assert reply.isError and "pending approval" in text(reply)
    assert reply.structuredContent is not None
    return dict(reply.structuredContent["daybook_pending_approval"])


def approve_all(book: Daybook, request: dict[str, Any], tokens: dict[str, str]) -> None:
    for name, token in tokens.items():
        book.approve(str(request["run_id"]), str(request["gate_id"]), approver=name, token=token)


def test_a_gated_mcp_calls_request_carries_the_precheck_facts_approvals_and_expiry(
    book: Daybook, ledger: Path, rate: Path, tmp_path: Path
) -> None:
    async def call() -> types.CallToolResult:
        async with client(book, session="facts", policy=policy_file(tmp_path)) as c:
            return await c.call_tool("wire", WIRE)

    request = request_of(run(call))
    assert request["facts"] == {"to": "bob", "rate": 1.0}  # what `quote` answered for the call
    assert request["approvals"] == 2 and request["given"] == []
    assert isinstance(request["deadline"], float) and request["expiry"] == "deny"
    # The same fields, and the same values, as the gate's request in `daybook approvals`.
    (listed,) = book.approvals()
    assert set(request) == set(REQUEST_FIELDS)
    assert request == {k: listed.get(k) for k in REQUEST_FIELDS}
    said = text(run(call))
    assert 'facts: {"rate": 1.0, "to": "bob"}' in said and "0 of 2 distinct approvers" in said
    assert ledger_of(ledger) == []


def test_an_mcp_approval_given_on_facts_that_changed_is_asked_again_and_the_call_sent_once(
    book: Daybook, ledger: Path, rate: Path, tmp_path: Path
) -> None:
    tokens = {"alice": book.add_approver("alice"), "bob": book.add_approver("bob")}

    async def call() -> types.CallToolResult:
        async with client(book, session="stale", policy=policy_file(tmp_path)) as c:
            return await c.call_tool("wire", WIRE)

    first = request_of(run(call))
    approve_all(book, first, tokens)  # two distinct approvers, on a rate of 1.0
    rate.write_text("1.25")  # the world moves after the approval, before the call is made again
    again = request_of(run(call))
    assert again["gate_id"] != first["gate_id"] and again["run_id"] == first["run_id"]
    assert again["facts"] == {"to": "bob", "rate": 1.25} and again["given"] == []
    assert ledger_of(ledger) == []  # the stale approval released nothing
    approve_all(book, again, tokens)
    done = body(run(call))
    assert done["execution"] == 1 and done["to"] == "bob"
    assert body(run(call))["execution"] == 1  # answered from the journal afterwards
    assert [line["args"] for line in ledger_of(ledger)] == [WIRE]
    # The journal holds both readings: the one approved first, and the one asked again.
    facts = [
        e.data["value"]
        for e in book.journal(str(first["run_id"]))
        if e.kind == "decision" and e.name.startswith(("precheck:", "recheck:"))
    ]
    assert facts == [{"to": "bob", "rate": 1.0}, {"to": "bob", "rate": 1.25}, {"to": "bob", "rate": 1.25}]


# The proxy process runs the precheck logic tested on both stores in-process above; what the
# process adds (argv, policy file, stdio) is not the store's (SQLite only).
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_the_daybook_proxy_process_asks_again_when_the_precheck_facts_changed(
    db_url: str, ledger: Path, rate: Path, tmp_path: Path
) -> None:
    with Daybook(db_url) as book:
        tokens = {"alice": book.add_approver("alice"), "bob": book.add_approver("bob")}
    policy = policy_file(tmp_path)

    async def call() -> types.CallToolResult:
        async with proxy_process(db_url, "proc", policy) as c:  # what an IDE runs
            return await c.call_tool("wire", WIRE)

    first = request_of(run(call))
    with Daybook(db_url) as book:
        approve_all(book, first, tokens)
    rate.write_text("2.0")
    again = request_of(run(call))
    assert again["facts"] == {"to": "bob", "rate": 2.0} and ledger_of(ledger) == []
    with Daybook(db_url) as book:
        approve_all(book, again, tokens)
    assert body(run(call))["execution"] == 1
    assert len(ledger_of(ledger)) == 1


def test_facts_the_precheck_tool_cannot_read_never_release_the_call(
    book: Daybook, ledger: Path, rate: Path, tmp_path: Path
) -> None:
    tokens = {"alice": book.add_approver("alice"), "bob": book.add_approver("bob")}

    async def call() -> types.CallToolResult:
        async with client(book, session="broken", policy=policy_file(tmp_path)) as c:
            return await c.call_tool("wire", WIRE)

    approve_all(book, request_of(run(call)), tokens)
    rate.write_text("not a number")  # `quote` now answers a tool error
    again = request_of(run(call))
    assert "quote answered an error" in again["facts"]["unavailable"]
    assert ledger_of(ledger) == []
