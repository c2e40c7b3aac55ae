"""The MCP proxy against a real MCP server (a stdio subprocess that counts its own executions in a
ledger file) and a real MCP client from the SDK, on both stores. Every assertion about how many
times a tool ran reads the server's own ledger, never the journal."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp import ClientSession, types
from mcp.shared.memory import create_connected_server_and_client_session
from mcp_support import HERE, SERVER, body, client, direct, ledger_of, proxy_process, run, text
from mcp_support import ledger as ledger  # a fixture

from daybook import Daybook
from daybook.integrations.mcp import KEY_META, load_policy, open_proxy


def test_each_tool_call_is_a_journaled_effect_with_its_key_sent_upstream(book: Daybook, ledger: Path) -> None:
    async def go() -> tuple[Any, Any]:
        async with client(book) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            assert {"send", "wire", "put", "sent", "count"} <= names
            first = body(await c.call_tool("send", {"to": "bob", "amount": 5}))
            counted = body(await c.call_tool("count", {}))
            return first, counted

    first, counted = run(go)
    assert first["execution"] == 1 and counted == {"count": 1}
    lines = ledger_of(ledger)
    assert len(lines) == 1
    effects = book.effects()
    assert len(effects) == 1  # the read (`count`) passed through, not journaled as an effect
    effect = effects[0]
    assert effect["status"] == "confirmed"
    assert lines[0]["key"] == effect["key"]  # the key that names the call reached the server
    run_id = book.find_effect(str(effect["key"]))[0]
    assert run_id == effect["key"] and run_id.startswith("mcp/s1/send/")


def test_a_client_retry_under_the_same_key_does_not_execute_again(book: Daybook, ledger: Path) -> None:
    async def go() -> list[types.CallToolResult]:
        async with client(book) as c:
            meta = {KEY_META: "refund-42"}
            a = await c.call_tool("send", {"to": "bob", "amount": 5}, meta=meta)
            b = await c.call_tool("send", {"to": "bob", "amount": 5}, meta=meta)
            other = await c.call_tool("send", {"to": "bob", "amount": 500}, meta=meta)
        async with client(book, session="another-session") as c:  # the key outlives the session
            d = await c.call_tool("send", {"amount": 5, "to": "bob"}, meta=meta)
        return [a, b, other, d]

    a, b, other, d = run(go)
    assert body(a) == body(b) == body(d) == {"execution": 1, "tool": "send", "to": "bob", "amount": 5}
    assert other.isError and "already used" in text(other)  # a key names one call, not another
    lines = ledger_of(ledger)
    assert [line["key"] for line in lines] == ["mcp/key/send/refund-42"]


def test_the_idempotency_key_argument_is_filled_with_the_call_key(book: Daybook, ledger: Path) -> None:
    async def go() -> Any:
        async with client(book) as c:
            return body(await c.call_tool("put", {"name": "a", "value": "1"}))

    assert run(go)["execution"] == 1
    (line,) = ledger_of(ledger)
    assert line["args"]["idempotency_key"] == line["key"] and line["key"].startswith("mcp/s1/put/")


def test_a_restarted_proxy_on_the_same_run_answers_repeated_calls_from_the_journal(
    book: Daybook, ledger: Path
) -> None:
    calls = [
        ("send", {"to": "bob", "amount": 5}),
        ("send", {"to": "bob", "amount": 5}),
        ("send", {"to": "amy", "amount": 1}),
    ]

    async def session(name: str) -> list[Any]:
        async with client(book, session=name) as c:
            return [body(await c.call_tool(tool, args)) for tool, args in calls]

    first = run(lambda: session("agent-7"))
    assert [r["execution"] for r in first] == [1, 2, 3]  # two identical calls are two acts
    again = run(lambda: session("agent-7"))  # the agent repeats its calls after a restart
    assert again == first
    assert len(ledger_of(ledger)) == 3
    run(lambda: session("agent-8"))  # a new session is new work
    assert len(ledger_of(ledger)) == 6


@pytest.mark.parametrize("through", ["direct", "daybook"])
def test_a_client_that_times_out_and_retries(book: Daybook, ledger: Path, through: str) -> None:
    """The same scenario with and without daybook: the client gives up waiting (the reply is
    slow) and sends the same call again while the first is still running. Direct to the
    server it executes twice (so this test can fail); through the proxy the retry joins it."""

    async def go() -> Any:
        @asynccontextmanager
        async def connect() -> AsyncIterator[ClientSession]:
            if through == "daybook":
                async with client(book) as c:
                    yield c
                return
            async with direct() as c:
                yield c

        async with connect() as c:
            args = {"to": "bob", "amount": 5, "delay": 2}
            with suppress(Exception):
                await c.call_tool("send", args, read_timeout_seconds=timedelta(seconds=0.5))
            return body(await c.call_tool("send", args))

    result = run(go)
    assert result["execution"] == 1 if through == "daybook" else result["execution"] == 2
    assert len(ledger_of(ledger)) == (1 if through == "daybook" else 2)


def test_an_irreversible_tool_is_gated_until_approved_and_the_approval_is_bound_to_the_call(
    book: Daybook, ledger: Path
) -> None:
    token = book.add_approver("alice")

    async def call(args: dict[str, Any]) -> types.CallToolResult:
        async with client(book, session="gated") as c:
            return await c.call_tool("wire", args)

    pending = run(lambda: call({"to": "bob", "amount": 5}))
    assert pending.isError and "pending approval" in text(pending) and "daybook approve" in text(pending)
    assert ledger_of(ledger) == []  # nothing reached the server
    (gate,) = book.approvals()
    assert gate["run_id"].startswith("mcp/gated/wire/")
    assert (
        book.approve(str(gate["run_id"]), str(gate["gate_id"]), approver="alice", token=token) == "delivered"
    )
    other = run(lambda: call({"to": "bob", "amount": 500}))  # another call: the approval is not its
    assert other.isError and "pending approval" in text(other)
    done = run(lambda: call({"to": "bob", "amount": 5}))  # the approved call, made again
    assert body(done)["execution"] == 1
    again = run(lambda: call({"to": "bob", "amount": 5}))
    assert body(again)["execution"] == 1
    assert [line["args"] for line in ledger_of(ledger)] == [{"to": "bob", "amount": 5}]
    waiting = [g for g in book.approvals() if g["run_id"] != gate["run_id"]]
    assert len(waiting) == 1
    book.approve(
        str(waiting[0]["run_id"]), str(waiting[0]["gate_id"]), approver="alice", token=token, approve=False
    )
    declined = run(lambda: call({"to": "bob", "amount": 500}))
    assert declined.isError and "not approved (declined by alice" in text(declined)
    assert len(ledger_of(ledger)) == 1


SLOW_SEND = {"to": "bob", "amount": 5, "delay": 120}


async def kill_proxy_mid_call(
    db_url: str, ledger: Path, policy: Path | None, *, daybook: bool = True
) -> None:
    """Send a call through a proxy process and SIGKILL the proxy after the server executed it
    and before its reply came back (the server sleeps after recording it). Without daybook: the
    client talks to the server directly, and the connection dies the same way."""
    try:
        async with proxy_process(db_url, "crashy", policy) if daybook else direct() as c:
            task = asyncio.ensure_future(c.call_tool("send", SLOW_SEND))
            for _ in range(1200):
                if ledger_of(ledger) or task.done():
                    break
                await asyncio.sleep(0.05)
            (line,) = ledger_of(ledger)
            if daybook:
                os.kill(line["ppid"], signal.SIGKILL)  # the proxy, mid-call
            os.kill(line["pid"], signal.SIGKILL)  # and its orphaned upstream, sleeping
            with suppress(Exception):
                await asyncio.wait_for(task, 30)
    except Exception:  # the client's connection to the killed proxy breaks: expected
        pass


@pytest.mark.slow
def test_a_proxy_killed_mid_call_leaves_it_unknown_until_resolved_never_sent_twice(
    db_url: str, ledger: Path
) -> None:
    run(lambda: kill_proxy_mid_call(db_url, ledger, None))
    with Daybook(db_url) as book:
        assert len(book.effects()) == 1 and book.effects()[0]["status"] != "confirmed"
        key = str(book.effects()[0]["key"])

    async def again() -> types.CallToolResult:
        async with proxy_process(db_url, "crashy") as c:  # restarted, same run
            return await c.call_tool("send", SLOW_SEND)

    unknown = run(again)
    assert unknown.isError and "unknown" in text(unknown) and "daybook resolve" in text(unknown)
    assert len(ledger_of(ledger)) == 1  # not re-sent blindly
    with Daybook(db_url) as book:
        assert book.effects()[0]["status"] == "unknown"
        # A person asks the server, and records what it says.
        book.resolve(key, confirmed={"execution": 1, "tool": "send", "to": "bob", "amount": 5}, by="ops")
    resolved = run(again)
    assert body(resolved) == {"execution": 1, "tool": "send", "to": "bob", "amount": 5}
    assert len(ledger_of(ledger)) == 1


@pytest.mark.slow
def test_a_proxy_killed_mid_call_asks_the_server_on_restart_and_answers_once(
    db_url: str, ledger: Path, tmp_path: Path
) -> None:
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"tools": {"send": {"status": {"tool": "sent", "argument": "key"}}}}))
    run(lambda: kill_proxy_mid_call(db_url, ledger, policy))

    async def again() -> types.CallToolResult:
        async with proxy_process(db_url, "crashy", policy) as c:
            return await c.call_tool("send", SLOW_SEND)

    first = run(again)
    assert body(first) == {"execution": 1, "tool": "send", "to": "bob", "amount": 5}
    assert body(run(again)) == body(first)
    assert len(ledger_of(ledger)) == 1  # one execution at the server
    with Daybook(db_url) as book:
        (effect,) = book.effects()
        assert effect["status"] == "confirmed"


@pytest.mark.slow
def test_without_daybook_the_same_crash_sends_the_call_twice(db_url: str, ledger: Path) -> None:
    """The control for the two tests above (so they can fail): the connection dies after the
    server acted and before the reply; the client reconnects and makes the same call again."""
    run(lambda: kill_proxy_mid_call(db_url, ledger, None, daybook=False))

    async def again() -> Any:
        async with direct() as c:
            return body(await c.call_tool("send", {**SLOW_SEND, "delay": 0}))

    assert run(again)["execution"] == 2
    assert len(ledger_of(ledger)) == 2  # the duplicate daybook prevents


def test_the_example_runs_and_each_act_executes_once() -> None:
    example = HERE.parent / "examples" / "mcp_proxy.py"
    done = subprocess.run([sys.executable, str(example)], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert "pending approval" in done.stdout
    assert done.stdout.strip().splitlines()[-1] == "result: 3 executions at the server for 3 distinct acts"


def test_the_cli_names_the_proxy_and_the_core_does_not_import_the_sdk() -> None:
    code = "import sys, daybook, daybook.cli; assert 'mcp' not in sys.modules, 'mcp imported'"
    assert subprocess.run([sys.executable, "-c", code], timeout=300).returncode == 0
    shown = subprocess.run(
        [sys.executable, "-m", "daybook", "proxy", "--help"], capture_output=True, text=True
    )
    assert shown.returncode == 0 and "--upstream-url" in shown.stdout and "--tools-policy" in shown.stdout


def test_annotations_are_read_conservatively_and_a_policy_file_overrides_them(tmp_path: Path) -> None:
    from daybook import ConfigError
    from daybook.integrations.mcp import Policy

    ann = types.ToolAnnotations
    schema = {"type": "object", "properties": {"idempotency_key": {"type": "string"}}}
    policy = Policy()
    assert policy.for_tool("t", None, {}).effect_class == "irreversible"  # unannotated
    assert policy.for_tool("t", None, {}).gate
    assert policy.for_tool("t", ann(readOnlyHint=True), {}).read
    assert (
        policy.for_tool("t", ann(idempotentHint=True), {}).effect_class == "irreversible"
    )  # destructive by default
    assert policy.for_tool("t", ann(destructiveHint=False, idempotentHint=True), schema).idempotent
    assert policy.for_tool("t", ann(destructiveHint=False), schema).key_argument == "idempotency_key"
    path = tmp_path / "p.toml"
    path.write_text('[tools.t]\nclass = "reversible"\nstatus = "lookup"\napprovers = ["ops"]\n')
    t = load_policy(path).for_tool("t", None, {})
    assert (t.effect_class, t.gate, t.status and t.status.tool, t.approvers) == (
        "reversible",
        False,
        "lookup",
        ("ops",),
    )
    bad = tmp_path / "bad.json"
    bad.write_text('{"tools": {"t": {"class": "sometimes"}}}')
    with pytest.raises(ConfigError, match=r"tools\.t\.class: Input should be 'read'"):
        load_policy(bad)
    with pytest.raises(ConfigError, match="cannot read the tools policy"):
        load_policy(tmp_path / "missing.json")


def test_a_streamable_http_upstream_is_journaled_the_same_way(book: Daybook, ledger: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, str(HERE / "mcp_http_server.py"), str(port)])
    try:

        async def go() -> list[Any]:
            url = f"http://127.0.0.1:{port}/mcp"
            for _ in range(200):  # until the server listens
                with socket.socket() as probe:
                    if probe.connect_ex(("127.0.0.1", port)) == 0:
                        break
                await asyncio.sleep(0.05)
            connect = create_connected_server_and_client_session
            async with open_proxy(book, url=url, session="h") as proxy, connect(proxy.server()) as c:
                meta = {KEY_META: "pay-1"}
                return [
                    body(await c.call_tool("send", {"to": "bob", "amount": 5}, meta=meta)) for _ in range(2)
                ]

        first, second = run(go)
        assert first == second and first["execution"] == 1
        assert len(ledger_of(ledger)) == 1
        assert [e["status"] for e in book.effects()] == ["confirmed"]
    finally:
        server.kill()
        server.wait()


def test_bad_calls_get_mcp_errors_and_the_proxy_keeps_serving(book: Daybook, ledger: Path) -> None:
    async def go() -> list[types.CallToolResult]:
        async with client(book, session="bad") as c:
            return [
                await c.call_tool("nope", {}),
                await c.call_tool("send", {"to": "bob", "amount": 5, "blob": "x" * 300_000}),
                await c.call_tool("send", {"to": "bob", "amount": -1}),
                await c.call_tool("send", {"to": "bob", "amount": 1}),
            ]

    unknown_tool, oversized, refused, fine = run(go)
    assert unknown_tool.isError and "no tool 'nope'" in text(unknown_tool)
    assert oversized.isError and "the proxy takes at most" in text(oversized)
    assert refused.isError and "amount must be positive" in text(refused)  # the server's own error
    assert body(fine)["execution"] == 1
    assert len(ledger_of(ledger)) == 1


def test_concurrent_calls_from_one_client_are_each_journaled_once(book: Daybook, ledger: Path) -> None:
    async def go() -> list[Any]:
        async with client(book, session="many") as c:
            calls = [c.call_tool("send", {"to": f"p{i}", "amount": i, "delay": 0.2}) for i in range(5)]
            calls.append(c.call_tool("send", {"to": "p0", "amount": 0, "delay": 0.2}))  # joins the first
            return [body(r) for r in await asyncio.gather(*calls)]

    results = run(go)
    assert sorted(r["execution"] for r in results[:5]) == [1, 2, 3, 4, 5]
    assert results[5] == results[0]
    assert len(ledger_of(ledger)) == 5
    assert sorted(e["status"] for e in book.effects()) == ["confirmed"] * 5


# The HTTP transport is the subject; the proxy's calls run on both stores in-process above (SQLite only).
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_the_proxy_serves_clients_over_streamable_http(db_url: str, ledger: Path) -> None:
    import socket

    from mcp.client.streamable_http import streamable_http_client

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = ["--db", db_url, "--run", "http", "--upstream", SERVER, "--listen", f"127.0.0.1:{port}"]
    proc = subprocess.Popen([sys.executable, "-m", "daybook", "proxy", *args])
    try:

        async def go() -> list[Any]:
            for _ in range(400):
                with socket.socket() as probe:
                    if probe.connect_ex(("127.0.0.1", port)) == 0:
                        break
                await asyncio.sleep(0.05)
            url = f"http://127.0.0.1:{port}/mcp"
            async with streamable_http_client(url) as (r, w, _), ClientSession(r, w) as c:
                await c.initialize()
                meta = {KEY_META: "over-http"}
                return [
                    body(await c.call_tool("send", {"to": "bob", "amount": 5}, meta=meta)) for _ in range(2)
                ]

        first, second = run(go)
        assert first == second and first["execution"] == 1
        assert len(ledger_of(ledger)) == 1
    finally:
        proc.kill()
        proc.wait()
    with Daybook(db_url) as book:
        assert [e["key"] for e in book.effects()] == ["mcp/key/send/over-http"]


def test_a_call_settled_by_the_status_query_is_answered_as_the_tool_itself_would_answer() -> None:
    """After a crash the answer comes from the status query: a string result is the text as is,
    and structured content is there (wrapped as the SDKs wrap a non-object result), so a client
    whose tool declares an output schema accepts it (docs/durable/mcp.md runs the whole path)."""
    from mcp import types as mcp_types

    from daybook import Confirmed
    from daybook.integrations.mcp.answers import status_answer, tool_result

    said = '{"status": "confirmed", "result": "paid 5 to bob"}'
    reply = mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text=said)])
    settled = status_answer(reply)
    assert isinstance(settled, Confirmed)
    answer = tool_result(settled.result)
    assert answer.content[0].text == "paid 5 to bob"  # type: ignore[union-attr]
    assert answer.structuredContent == {"result": "paid 5 to bob"}
