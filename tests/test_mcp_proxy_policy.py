"""What an operator tells the MCP proxy, and what it refuses: the tools policy file's schema (bad
files are refused with the field named, exit 2), distrusting the server's hints, secret
arguments (never in clear in the store, its WAL or `daybook export`; the server still gets them),
and the HTTP listener's Host/Origin checks and bearer token."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

pytest.importorskip("mcp")

from conftest import PG_URL, cli_in_process
from mcp import types
from mcp_support import SERVER, body, client, ledger_of, run, text
from mcp_support import ledger as ledger  # a fixture

from daybook import ConfigError, Daybook
from daybook.integrations.mcp import Policy, load_policy, policy_from
from daybook.integrations.mcp.concealment import says_secret

# -- the policy file --------------------------------------------------------------------------

BAD_POLICIES = [
    ({"tools": {"wire": {"approvers": "alice"}}}, "tools.wire.approvers: Input should be a valid list"),
    ({"tools": {"wire": {"approvers": []}}}, "tools.wire.approvers: List should have at least 1 item"),
    ({"tools": {"wire": {"approvers": [""]}}}, "an approver name must not be empty"),
    ({"tools": {"wire": {"clas": "read"}}}, "tools.wire.clas: unknown key"),
    ({"tools": {"wire": {"gate": "false"}}}, "tools.wire.gate: Input should be a valid boolean"),
    ({"tools": {"wire": {"class": "sometimes"}}}, "tools.wire.class: Input should be 'read'"),
    ({"tools": {"wire": {"timeout": -1}}}, "tools.wire.timeout: Value error, timeout must be seconds"),
    ({"tools": {"wire": {"secrets": "password"}}}, "tools.wire.secrets: Input should be a valid list"),
    ({"tools": {"wire": {"status": 5}}}, "tools.wire.status"),
    ({"tools": ["wire"]}, "tools: Input should be a valid dictionary"),
    ({"trust_hints": "no"}, "trust_hints: Input should be a valid boolean"),
    ({"defaults": {}}, "defaults: unknown key"),
    ([], "Input should be a valid dictionary"),
]


@pytest.mark.parametrize(("raw", "says"), BAD_POLICIES)
def test_a_malformed_policy_is_refused_naming_the_field(raw: Any, says: str) -> None:
    with pytest.raises(ConfigError, match="tools policy") as caught:
        policy_from(raw)
    assert says in str(caught.value)


def test_a_nan_timeout_in_a_json_policy_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text('{"tools": {"wire": {"timeout": NaN}}}')
    with pytest.raises(ConfigError, match=r"tools\.wire\.timeout"):
        load_policy(path)


def test_a_policy_built_in_python_is_checked_by_the_same_schema() -> None:
    with pytest.raises(ConfigError, match="approvers"):
        Policy(tools={"wire": {"approvers": "alice"}})


def proxy_with_policy(tmp_path: Path, db: str, raw: Any) -> subprocess.CompletedProcess[str]:
    # `daybook proxy` through click's runner: the refusal is the command's own parsing and
    # checking against the upstream's tools (the upstream is still a real process).
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(raw))
    return cli_in_process("proxy", "--upstream", SERVER, "--tools-policy", str(path), db=db)


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ({"tools": {"wire": {"approvers": "alice"}}}, "tools.wire.approvers"),
        (
            {"tools": {"Wire": {"class": "read"}}},
            "no tool 'Wire' (its tools: count, put, quote, send, sent, wire)",
        ),
        ({"tools": {"wire": {"key_argument": "nope"}}}, "key_argument 'nope' is not an argument"),
        ({"tools": {"send": {"status": "lookup"}}}, "status tool 'lookup' is not a tool of the upstream"),
        ({"tools": {"wire": {"precheck": "lookup"}}}, "precheck tool 'lookup' is not a tool of the upstream"),
        ({"tools": {"wire": {"precheck": "send"}}}, "precheck tool 'send' is not read-only"),
        ({"tools": {"send": {"precheck": "quote"}}}, "a precheck needs a gated tool"),
        ({"tools": {"wire": {"precheck": {"tool": "quote", "args": []}}}}, "tools.wire.precheck"),
    ],
)
def test_daybook_proxy_refuses_a_bad_policy_with_exit_2_and_no_traceback(
    tmp_path: Path, ledger: Path, raw: Any, says: str
) -> None:
    done = proxy_with_policy(tmp_path, f"sqlite:///{tmp_path / 'j.db'}", raw)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr and "Traceback" not in done.stderr
    assert done.stderr.startswith("error: ")


def test_hints_can_be_distrusted_for_every_tool_or_one() -> None:
    ann = types.ToolAnnotations
    read_only, harmless = ann(readOnlyHint=True), ann(destructiveHint=False, idempotentHint=True)
    distrust = policy_from({"trust_hints": False})
    assert distrust.for_tool("count", read_only, {}).effect_class == "irreversible"
    assert distrust.for_tool("count", read_only, {}).gate
    assert distrust.for_tool("put", harmless, {}).effect_class == "irreversible"
    one = policy_from({"tools": {"count": {"trust_hints": False}}})
    assert one.for_tool("count", read_only, {}).gate and one.for_tool("sent", read_only, {}).read
    back = policy_from({"trust_hints": False, "tools": {"count": {"trust_hints": True}}})
    assert back.for_tool("count", read_only, {}).read


def test_a_distrusted_read_only_tool_is_journaled_and_gated(
    book: Daybook, ledger: Path, tmp_path: Path
) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"trust_hints": False}))

    async def go() -> types.CallToolResult:
        async with client(book, session="distrust", policy=path) as c:
            return await c.call_tool("count", {})

    answer = run(go)
    assert answer.isError and "pending approval" in text(answer)
    (gate,) = book.approvals()
    assert str(gate["run_id"]).startswith("mcp/distrust/count/")


# -- secret arguments -------------------------------------------------------------------------


def test_argument_names_that_say_secret_are_secret_by_default() -> None:
    for name in ("password", "DB_PASSWORD", "apiKey", "x-api-key", "api_key", "private_key", "Authorization"):
        assert says_secret(name), name
    for name in ("to", "amount", "max_tokens", "author", "key", "idempotency_key"):
        assert not says_secret(name), name
    p = policy_from({"tools": {"t": {"secrets": ["PIN"], "default_secrets": False}}}).for_tool("t", None, {})
    assert p.secret("pin") and not p.secret("password")


PASSWORD = "hunter2-SECRET-pw"
PIN = "8x7y6z5w-PIN"
API_KEY = "sk-live-7f3a9c1e"


def store_bytes(db_url: str) -> bytes:
    """Everything the store holds, raw: the SQLite file and its WAL, or every row of every
    table of the PostgreSQL schema as text."""
    if db_url.startswith("sqlite:///"):
        path = Path(db_url.removeprefix("sqlite:///"))
        files = [path, Path(f"{path}-wal"), Path(f"{path}-journal")]
        return b"".join(f.read_bytes() for f in files if f.exists())
    schema = db_url.rsplit("schema=", 1)[1]
    out = []
    with psycopg.connect(PG_URL) as conn:
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,)
        ).fetchall()
        for (table,) in tables:
            for (row,) in conn.execute(f'SELECT t::text FROM "{schema}"."{table}" t'):
                out.append(row.encode())
    return b"\n".join(out)


@pytest.mark.parametrize("conceal", [True, False])
def test_secret_arguments_never_reach_the_store_or_the_export_in_clear(
    db_url: str, ledger: Path, tmp_path: Path, conceal: bool
) -> None:
    """The control (`conceal=False`: a policy that turns concealment off) finds them in clear."""
    policy = tmp_path / "p.json"
    off = {"default": {"default_secrets": False}}
    policy.write_text(json.dumps({"tools": {"send": {"secrets": ["pin"]}}} if conceal else off))
    with Daybook(db_url) as book:
        token = book.add_approver("alice")

        async def calls() -> list[Any]:
            async with client(book, session="sec", policy=policy) as c:
                a = body(await c.call_tool("send", {"to": "x", "amount": 1, "password": PASSWORD}))
                b = body(await c.call_tool("send", {"to": "y", "amount": 2, "pin": PIN}))
                gated = await c.call_tool("wire", {"to": "z", "amount": 3, "api_key": API_KEY})
                assert "pending approval" in text(gated)
                (gate,) = book.approvals()
                shown = gate["about"]["arguments"]["api_key"]  # type: ignore[index,call-overload]
                assert (shown == API_KEY) is not conceal  # concealed, the approver sees a digest
                book.approve(str(gate["run_id"]), str(gate["gate_id"]), approver="alice", token=token)
                w = body(await c.call_tool("wire", {"to": "z", "amount": 3, "api_key": API_KEY}))
                again = body(await c.call_tool("send", {"to": "x", "amount": 1, "password": PASSWORD}))
                return [a, b, w, again]

        a, b, _, again = run(calls)
        run_ids = [r.run_id for r in book.store.list_runs() if r.run_id.startswith("mcp/")]
    assert a["password"] == PASSWORD and b["pin"] == PIN  # the client got the server's answer
    assert again["execution"] == 4  # a second identical call is a second act, by position
    sent = [line["args"] for line in ledger_of(ledger)]  # the server got the real values
    assert [s.get("password") or s.get("pin") or s.get("api_key") for s in sent] == [
        PASSWORD,
        PIN,
        API_KEY,
        PASSWORD,
    ]
    raw = store_bytes(db_url)
    exported = "".join(cli_in_process("export", run_id, db=db_url).stdout for run_id in run_ids)
    assert len(run_ids) == 4 and ('"$secret"' in exported) is conceal
    for value in (PASSWORD, PIN, API_KEY):
        assert (raw.count(value.encode()) == 0) is conceal, value
        assert (exported.count(value) == 0) is conceal, value


# -- the HTTP listener --------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def listening(db_url: str, port: int, env: dict[str, str] | None = None) -> Iterator[None]:
    args = ["--db", db_url, "--run", "http", "--upstream", SERVER, "--listen", f"127.0.0.1:{port}"]
    proc = subprocess.Popen([sys.executable, "-m", "daybook", "proxy", *args], env=env)
    try:
        for _ in range(600):
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert proc.poll() is None, "the proxy exited"
            time.sleep(0.05)
        yield
    finally:
        proc.kill()
        proc.wait()


HELLO = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "page", "version": "0"}}


def drive(port: int, headers: dict[str, str], to: str) -> list[int]:
    """A raw MCP session over HTTP (what a web page could send): initialize, then `send`. The
    status code of each request."""
    url = f"http://127.0.0.1:{port}/mcp"
    base = {"content-type": "application/json", "accept": "application/json, text/event-stream", **headers}
    with httpx.Client(timeout=30) as h:
        first = h.post(
            url, headers=base, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": HELLO}
        )
        sid = first.headers.get("mcp-session-id")
        more = {**base, "mcp-protocol-version": "2025-06-18", **({"mcp-session-id": sid} if sid else {})}
        h.post(url, headers=more, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        call = {"name": "send", "arguments": {"to": to, "amount": 999}}
        second = h.post(
            url, headers=more, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}
        )
    return [first.status_code, second.status_code]


# Host, Origin and the bearer token are the listener's checks; the store plays no part (SQLite only).
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_the_http_listener_refuses_other_hosts_and_origins(db_url: str, ledger: Path) -> None:
    port = free_port()
    with listening(db_url, port):
        host = drive(port, {"host": f"attacker.example:{port}"}, "attacker-host")
        origin = drive(port, {"origin": f"http://attacker.example:{port}"}, "attacker-origin")
        fine = drive(port, {"origin": f"http://127.0.0.1:{port}"}, "friend")  # the control
    assert host == [421, 421] and origin == [403, 403]
    assert fine == [200, 200]
    assert [line["args"]["to"] for line in ledger_of(ledger)] == ["friend"]  # 0 for the attacker


# Host, Origin and the bearer token are the listener's checks; the store plays no part (SQLite only).
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_the_http_listener_requires_the_bearer_token_when_one_is_set(db_url: str, ledger: Path) -> None:
    port = free_port()
    with listening(db_url, port, env={**os.environ, "DAYBOOK_PROXY_TOKEN": "s3cret-token"}):
        none = drive(port, {}, "no-token")
        wrong = drive(port, {"authorization": "Bearer guess"}, "wrong-token")
        right = drive(port, {"authorization": "Bearer s3cret-token"}, "with-token")
    assert none == [401, 401] and wrong == [401, 401] and right == [200, 200]
    assert [line["args"]["to"] for line in ledger_of(ledger)] == ["with-token"]


def test_token_env_names_the_variable_and_must_be_set(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'j.db'}"
    done = cli_in_process(
        "proxy", "--upstream", SERVER, "--listen", "127.0.0.1:1", "--token-env", "NOPE_UNSET", db=db
    )
    assert done.returncode == 2 and "$NOPE_UNSET is not set" in done.stderr and "Traceback" not in done.stderr
