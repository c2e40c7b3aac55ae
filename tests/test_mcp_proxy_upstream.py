"""The MCP proxy when the upstream server dies mid-call, when a gated call is approved in the same
long-lived proxy, and when the client hangs up with calls in flight: against the real counter
server (its own ledger counts executions) and `daybook proxy` as a process of its own, on both
stores."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp import ClientSession, types
from mcp.shared.memory import create_connected_server_and_client_session as connect
from mcp_support import HERE, SERVER, body, direct, ledger_of, proxy_process, run, text
from mcp_support import ledger as ledger  # a fixture

from daybook import Daybook
from daybook.integrations.mcp import open_proxy

CAROL = {"to": "carol", "amount": 100, "delay": 5}


async def executed(ledger: Path, count: int = 1) -> list[dict[str, Any]]:
    """Wait until the server's ledger has `count` lines (the server acted, then sleeps)."""
    for _ in range(1200):
        if len(ledger_of(ledger)) >= count:
            break
        await asyncio.sleep(0.05)
    return ledger_of(ledger)


async def kill_upstream_mid_call(
    c: ClientSession, ledger: Path, tool: str = "send", args: dict[str, Any] = CAROL
) -> types.CallToolResult:
    """Call `send(carol)` and SIGKILL the upstream server after it executed it, before it replied
    (it sleeps `delay` seconds after recording). The proxy itself lives on."""
    task = asyncio.ensure_future(c.call_tool(tool, args))
    (line,) = await executed(ledger)
    os.kill(line["pid"], signal.SIGKILL)
    return await asyncio.wait_for(task, 120)


def restarts_in(db_url: str, session: str) -> list[str]:
    with Daybook(db_url) as book:
        return [r.run_id for r in book.store.list_runs() if r.run_id.startswith(f"mcp/{session}/upstream/")]


@pytest.mark.slow
def test_an_upstream_killed_mid_call_is_unknown_and_the_retry_does_not_execute_it_again(
    db_url: str, ledger: Path, tmp_path: Path
) -> None:
    errlog = (tmp_path / "proxy.err").open("w")

    async def go() -> list[types.CallToolResult]:
        async with proxy_process(db_url, "up", errlog=errlog) as c:
            first = await kill_upstream_mid_call(c, ledger)
            retry = await c.call_tool("send", CAROL)  # the client retries the same call
            fresh = await c.call_tool("send", {"to": "dave", "amount": 1})  # new work, same proxy
            return [first, retry, fresh]

    first, retry, fresh = run(go)
    errlog.close()
    assert first.isError and "unknown outcome" in text(first) and "failed:" not in text(first)
    assert retry.isError and "unknown outcome" in text(retry)
    assert "daybook resolve" in text(first) and "daybook resume" not in text(first)  # it would park it
    assert body(fresh)["to"] == "dave"  # the upstream was restarted: the new call went through
    lines = ledger_of(ledger)
    assert [line["args"]["to"] for line in lines] == ["carol", "dave"]  # carol once, not twice
    assert lines[0]["pid"] != lines[1]["pid"]  # a new upstream process
    assert "restarting it" in (tmp_path / "proxy.err").read_text()
    assert restarts_in(db_url, "up")  # the restart is journaled
    with Daybook(db_url) as book:
        assert sorted(e["status"] for e in book.effects()) == ["confirmed", "unknown"]

    async def after_restart() -> types.CallToolResult:
        async with proxy_process(db_url, "up") as c:  # the proxy restarted on the same run
            return await c.call_tool("send", CAROL)

    again = run(after_restart)
    assert again.isError and "unknown" in text(again) and "daybook resolve" in text(again)
    assert [line["args"]["to"] for line in ledger_of(ledger)] == ["carol", "dave"]


@pytest.mark.slow
def test_an_upstream_killed_mid_call_is_settled_by_the_status_query_and_executed_once(
    db_url: str, ledger: Path, tmp_path: Path
) -> None:
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"tools": {"send": {"status": {"tool": "sent", "argument": "key"}}}}))

    async def go() -> types.CallToolResult:
        async with proxy_process(db_url, "ask", policy) as c:
            return await kill_upstream_mid_call(c, ledger)

    async def repeated() -> types.CallToolResult:
        async with proxy_process(db_url, "ask", policy) as c:  # restarted, the agent repeats it
            return await c.call_tool("send", CAROL)

    first = run(go)
    retry = run(repeated)
    assert body(first) == body(retry) == {"execution": 1, "tool": "send", "to": "carol", "amount": 100}
    assert len(ledger_of(ledger)) == 1  # the server acted once; the status query told the proxy
    with Daybook(db_url) as book:
        assert [e["status"] for e in book.effects()] == ["confirmed"]


@pytest.mark.slow
def test_an_idempotent_call_lost_with_the_upstream_is_re_sent_under_its_key_and_deduped(
    db_url: str, ledger: Path
) -> None:
    put = {"name": "a", "value": "1", "delay": 5}

    async def go() -> types.CallToolResult:
        async with proxy_process(db_url, "idem") as c:
            return await kill_upstream_mid_call(c, ledger, "put", put)

    answer = run(go)
    assert body(answer)["execution"] == 1  # the re-send met the server's own dedupe by key
    (line,) = ledger_of(ledger)  # executed once
    with Daybook(db_url) as book:
        (effect,) = book.effects()
        assert effect["status"] == "confirmed" and line["key"] == effect["key"]


@pytest.mark.slow
def test_without_daybook_a_client_that_retries_after_the_server_died_executes_twice(ledger: Path) -> None:
    """The control: the same crash with the client talking to the server directly."""

    async def go() -> None:
        try:
            async with direct() as c:
                await kill_upstream_mid_call(c, ledger)
        except Exception:  # the connection to the killed server breaks: expected
            pass
        async with direct() as c:
            await c.call_tool("send", {**CAROL, "delay": 0})

    run(go)
    assert [line["args"]["to"] for line in ledger_of(ledger)] == ["carol", "carol"]


BOB = {"to": "bob", "amount": 5}


def approve_waiting(db_url: str, token: str) -> str:
    """Approve the one gate waiting (as alice); its run id."""
    with Daybook(db_url) as book:
        (gate,) = book.approvals()
        book.approve(str(gate["run_id"]), str(gate["gate_id"]), approver="alice", token=token)
        return str(gate["run_id"])


def waiting(db_url: str) -> list[str]:
    with Daybook(db_url) as book:
        return [str(g["run_id"]) for g in book.approvals()]


@pytest.mark.slow
def test_an_approved_call_is_sent_once_by_the_same_long_lived_proxy(db_url: str, ledger: Path) -> None:
    with Daybook(db_url) as book:
        token = book.add_approver("alice")

    async def one_proxy() -> list[types.CallToolResult]:
        async with proxy_process(db_url, "ide") as c:
            pending = await c.call_tool("wire", BOB)
            again = await c.call_tool("wire", BOB)  # asked again before approval: the same gate
            gated = waiting(db_url)
            approve_waiting(db_url, token)
            sent = await c.call_tool("wire", BOB)  # the approved call, same proxy: sent
            next_one = await c.call_tool("wire", BOB)  # another identical call: its own gate
            assert len(gated) == 1, gated
            return [pending, again, sent, next_one]

    pending, again, sent, next_one = run(one_proxy)
    assert pending.isError and "pending approval" in text(pending)
    assert again.isError and "pending approval" in text(again)
    assert body(sent)["execution"] == 1
    assert next_one.isError and "pending approval" in text(next_one)
    assert [line["args"] for line in ledger_of(ledger)] == [BOB]  # sent once
    assert len(waiting(db_url)) == 1  # one gate for the one call waiting, not one per retry


@pytest.mark.slow
def test_after_a_restart_each_approval_releases_exactly_one_send(db_url: str, ledger: Path) -> None:
    with Daybook(db_url) as book:
        token = book.add_approver("alice")

    async def calls(n: int) -> list[types.CallToolResult]:
        async with proxy_process(db_url, "ide") as c:
            return [await c.call_tool("wire", BOB) for _ in range(n)]

    (pending,) = run(lambda: calls(1))
    assert "pending approval" in text(pending)
    approve_waiting(db_url, token)  # approved while no proxy runs
    first, second = run(lambda: calls(2))  # restarted: the approved call is sent, the next waits
    assert body(first)["execution"] == 1
    assert second.isError and "pending approval" in text(second)
    assert len(ledger_of(ledger)) == 1
    replayed, waits = run(lambda: calls(2))  # restarted again: the agent repeats both calls
    assert body(replayed) == body(first)  # from the journal
    assert waits.isError and "pending approval" in text(waits)
    assert len(ledger_of(ledger)) == 1 and len(waiting(db_url)) == 1
    approve_waiting(db_url, token)
    results = run(lambda: calls(3))
    assert [body(r)["execution"] for r in results[:2]] == [1, 2]
    assert "pending approval" in text(results[2])
    assert len(ledger_of(ledger)) == 2  # two approvals, two sends


@pytest.mark.slow
@pytest.mark.parametrize("drain", ["30", "0"])
def test_a_client_that_hangs_up_mid_call_still_gets_the_outcome_journaled(
    db_url: str, ledger: Path, drain: str
) -> None:
    """The client closes stdin 1 s into a 3 s call: the proxy waits for it before exiting. The
    control (`--drain 0`: no wait) leaves the call in flight or unknown, the server done."""
    delay = 3 if drain != "0" else 8  # the control's call outlasts a slow exit under load
    args = ["-m", "daybook", "proxy", "--db", db_url, "--run", "eof", "--upstream", SERVER, "--drain", drain]
    proc = subprocess.Popen([sys.executable, *args], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    assert proc.stdin is not None
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "send", "arguments": {"to": "erin", "amount": 3, "delay": delay}},
        },
    ]
    for message in messages:
        proc.stdin.write(json.dumps(message).encode() + b"\n")
        proc.stdin.flush()
    run(lambda: executed(ledger))
    time.sleep(1.0)
    proc.stdin.close()  # the client hangs up while the call is in flight
    assert proc.wait(timeout=120) == 0
    assert len(ledger_of(ledger)) == 1
    with Daybook(db_url) as book:
        (effect,) = book.effects()
        if drain == "30":
            assert effect["status"] == "confirmed"
        else:  # abandoned: the server acted, the journal cannot say so
            assert effect["status"] in ("in flight", "unknown")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_server(port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(HERE / "mcp_http_server.py"), str(port)], stderr=subprocess.DEVNULL
    )


async def listening(port: int) -> None:
    for _ in range(600):
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        await asyncio.sleep(0.05)


@pytest.mark.slow
def test_an_http_upstream_killed_mid_call_is_unknown_and_reconnected(book: Daybook, ledger: Path) -> None:
    port = free_port()
    servers = [http_server(port)]

    async def go() -> list[types.CallToolResult]:
        await listening(port)
        url = f"http://127.0.0.1:{port}/mcp"
        async with open_proxy(book, url=url, session="h") as proxy, connect(proxy.server()) as c:
            task = asyncio.ensure_future(c.call_tool("send", {"to": "bob", "amount": 1, "delay": 30}))
            await executed(ledger)
            servers[0].kill()  # after it executed, before it replied
            first = await asyncio.wait_for(task, 60)  # noticed by the proxy's ping, not the timeout
            servers.append(http_server(port))
            fresh = await asyncio.wait_for(c.call_tool("send", {"to": "carl", "amount": 2}), 120)
            return [first, fresh]

    try:
        first, fresh = run(go)
    finally:
        for server in servers:
            server.kill()
            server.wait()
    assert first.isError and "unknown outcome" in text(first)
    assert body(fresh)["to"] == "carl"  # reconnected to the server once it was back
    assert [line["to"] for line in ledger_of(ledger)] == ["bob", "carl"]
    assert sorted(e["status"] for e in book.effects()) == ["confirmed", "unknown"]
