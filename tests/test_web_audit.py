"""The inspector's audit log: every sign-in (refused ones too), sign-out, verdict and act taken in
the web inspector, done or refused, is appended with who, from which address and user agent;
`daybook audit` and the /audit page (operators only) show it; no token, session id or CSRF
token is ever in the store's bytes; its rows cannot be changed or deleted. On both stores,
through Starlette's TestClient and the real `daybook web` process."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from typing import Any

import agents
import httpx
import pytest
from conftest import cli_in_process
from starlette.testclient import TestClient
from store_bytes import store_text
from test_append_only import DB_ERRORS, _sql
from webtools import csrf_of, web_server

from daybook import Daybook, Suspended
from daybook.gates import audit
from daybook.web import build

IDS = {"run_id": "sre", "gate": "sre/1"}
AGENT = "audit-test/1.0 (ops laptop)"


@pytest.fixture
def gated(db_url: str, bank: Any) -> Iterator[tuple[Daybook, dict[str, str]]]:
    """A run suspended at a gate for `oncall` (approver and operator); `vera` a viewer."""
    with Daybook(db_url, inline_wait=0.1) as book:
        with pytest.raises(Suspended):
            book.run(agents.restart, bank.url, 3600.0, run_id="sre")
        tokens = {
            "oncall": book.add_approver("oncall", roles=("approver", "operator")),
            "vera": book.add_approver("vera", roles=("viewer",)),
        }
        yield book, tokens


def _act(client: Any, tokens: dict[str, str], pasted: str) -> tuple[str, str, list[tuple[Any, ...]]]:
    """Take one of every kind of action through `client`; returns the session cookie, the CSRF
    token and the entries the log should hold, as (action, who, outcome, status, detail)."""
    refused = client.post("/login", data={"name": "oncall", "token": "guess"})
    assert refused.status_code == 403
    assert client.post("/login", data={"name": pasted, "token": pasted}).status_code == 403
    assert client.post("/login", data={"name": "oncall", "token": tokens["oncall"]}).status_code in (200, 303)
    cookie = str(client.cookies.get("daybook_session"))
    csrf = csrf_of(client.get("/").text)
    approve = {**IDS, "csrf": csrf, "reason": "error rate is real"}
    assert client.post("/approvals/approve", data=approve).status_code in (200, 303)
    assert client.post("/runs/sre/pause", data={"csrf": "forged"}).status_code == 403
    assert client.post("/runs/sre/pause", data={"csrf": csrf}).status_code in (200, 303)
    assert client.post("/logout", data={"csrf": csrf}).status_code in (200, 303)
    assert client.post("/runs/sre/cancel", data={"csrf": csrf}).status_code == 401
    expected = [
        ("sign-in", "oncall", "refused", 403, {}),
        ("sign-in", f"unregistered name #{audit.digest(pasted)}", "refused", 403, {}),
        ("sign-in", "oncall", "done", 200, {}),
        ("approve", "oncall", "done", 200, IDS),
        ("pause", "oncall", "refused", 403, {"run_id": "sre"}),
        ("pause", "oncall", "done", 200, {"run_id": "sre"}),
        ("sign-out", "oncall", "done", 200, {}),
        ("cancel", None, "refused", 401, {"run_id": "sre"}),
    ]
    return cookie, csrf, expected


def _check_log(book: Daybook, expected: list[tuple[Any, ...]], client_address: str, agent: str) -> None:
    found = audit.entries(book.store)
    assert [(e.action, e.who, e.outcome, e.status, e.detail) for e in found] == expected
    assert {e.client for e in found} == {client_address} and {e.user_agent for e in found} == {agent}
    assert "delivered" in found[3].said and "CSRF" in found[4].said
    # One session from sign-in to sign-out, named by a digest; refused sign-ins have none.
    sessions = [e.session for e in found]
    assert sessions[:2] == [None, None] and sessions[7] is None
    assert len(set(sessions[2:7])) == 1 and len(str(sessions[2])) == 16


def test_every_action_in_the_ui_is_in_the_audit_log_with_who_and_from_where(
    gated: tuple[Daybook, dict[str, str]],
) -> None:
    book, tokens = gated
    client = TestClient(build(book), headers={"user-agent": AGENT})
    _, _, expected = _act(client, tokens, "dbk1_pasted-into-the-name-box")
    _check_log(book, expected, "testclient", AGENT)
    assert book.verdicts("sre")[0]["approver"] == "oncall" and book.get_run("sre").status == "paused"


def test_the_real_daybook_web_audits_the_client_address_and_daybook_audit_prints_it(
    gated: tuple[Daybook, dict[str, str]], db_url: str
) -> None:
    book, tokens = gated
    with (
        web_server(db_url) as base,
        httpx.Client(base_url=base, timeout=30, headers={"user-agent": AGENT}) as client,
    ):
        _, _, expected = _act(client, tokens, "dbk1_pasted-into-the-name-box")
    _check_log(book, expected, "127.0.0.1", AGENT)
    listed = cli_in_process("audit", "--json", db=db_url)
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert [(r["action"], r["who"], r["outcome"]) for r in rows] == [e[:3] for e in expected]
    assert rows[0]["client"] == "127.0.0.1" and rows[0]["user_agent"] == AGENT
    table = cli_in_process("audit", db=db_url)
    assert table.returncode == 0 and "approve" in table.stdout and "run_id=sre gate=sre/1" in table.stdout
    recent = json.loads(cli_in_process("audit", "--json", "--since", "1h", db=db_url).stdout)
    assert len(recent) == len(expected)
    assert (
        json.loads(cli_in_process("audit", "--json", "--since", str(time.time() + 60), db=db_url).stdout)
        == []
    )
    assert len(json.loads(cli_in_process("audit", "--json", "--limit", "2", db=db_url).stdout)) == 2
    bad = cli_in_process("audit", "--since", "last tuesday", db=db_url)
    assert bad.returncode == 2 and "--since" in bad.stderr


def test_no_token_session_id_or_csrf_token_is_ever_in_the_store(
    gated: tuple[Daybook, dict[str, str]], db_url: str
) -> None:
    book, tokens = gated
    client = TestClient(build(book))
    pasted = "dbk1_a-second-key-pasted-where-the-name-goes"
    cookie, csrf, _ = _act(client, tokens, pasted)
    viewer = TestClient(build(book))
    assert viewer.post("/login", data={"name": "vera", "token": tokens["vera"]}).status_code == 200
    viewer_csrf = csrf_of(viewer.get("/").text)
    assert viewer.post("/runs/sre/pause", data={"csrf": viewer_csrf}).status_code == 403
    text = store_text(db_url)
    for secret in (
        tokens["oncall"],
        tokens["vera"],
        pasted,
        cookie,
        csrf,
        viewer_csrf,
        str(viewer.cookies.get("daybook_session")),
    ):
        assert len(secret) >= 20 and secret not in text
    # The session is named by a digest of its id, which the log does hold.
    assert hashlib.sha256(cookie.encode()).hexdigest()[:16] in text
    assert "audit" in text and "oncall" in text  # the log itself is there to be read


def test_the_audit_page_and_api_are_for_operators_only(gated: tuple[Daybook, dict[str, str]]) -> None:
    book, tokens = gated
    app = build(book)
    anonymous = TestClient(app)
    assert anonymous.get("/audit").status_code == 403 and anonymous.get("/api/audit").status_code == 403
    viewer = TestClient(app)
    viewer.post("/login", data={"name": "vera", "token": tokens["vera"]})
    refused = viewer.get("/audit")
    assert refused.status_code == 403 and "for operators" in refused.text
    assert 'href="/audit"' not in viewer.get("/").text
    operator = TestClient(app, headers={"user-agent": "<script>alert(1)</script>"})
    operator.post("/login", data={"name": "oncall", "token": tokens["oncall"]})
    page = operator.get("/audit")
    assert page.status_code == 200 and 'href="/audit"' in operator.get("/").text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text and "<script>alert" not in page.text
    assert page.text.count("<tr>") == 1 + 2  # header; vera's and oncall's sign-ins, newest first
    api = operator.get("/api/audit").json()
    assert [(e["action"], e["who"]) for e in api] == [("sign-in", "vera"), ("sign-in", "oncall")]
    assert operator.get("/api/audit?limit=0").status_code == 400
    assert operator.get("/api/audit?since=yesterday").status_code == 400


def test_audit_rows_can_be_neither_changed_nor_deleted(
    gated: tuple[Daybook, dict[str, str]], db_url: str
) -> None:
    book, tokens = gated
    client = TestClient(build(book))
    client.post("/login", data={"name": "oncall", "token": tokens["oncall"]})
    [entry] = audit.entries(book.store)
    where = f"WHERE id = {entry.id}"
    for sql in (
        f"UPDATE daybook_entity_log SET data = '{{}}' {where}",
        f"UPDATE daybook_entity_log SET agent = 'nobody' {where}",
        f"DELETE FROM daybook_entity_log {where}",
    ):
        with pytest.raises(DB_ERRORS):
            _sql(db_url, sql)
    assert audit.entries(book.store) == [entry]


def test_two_inspectors_on_one_store_each_append_and_the_log_reads_as_one(
    gated: tuple[Daybook, dict[str, str]],
) -> None:
    book, tokens = gated
    first, second = TestClient(build(book)), TestClient(build(book))
    for client in (first, second, first):
        assert client.post("/login", data={"name": "vera", "token": tokens["vera"]}).status_code == 200
    found = audit.entries(book.store)
    assert len(found) == 3 and len({e.inspector for e in found}) == 2
    assert [e.at for e in found] == sorted(e.at for e in found)
    assert [lease.name for lease in book.leases()] == []  # not among the leases people coordinate


def test_a_user_agent_or_name_with_control_characters_is_kept_cleaned(
    gated: tuple[Daybook, dict[str, str]],
) -> None:
    book, _ = gated
    client = TestClient(build(book), headers={"user-agent": "evil\x7fagent" + "x" * 1000})
    assert client.post("/login", data={"name": "a\x00b\nc", "token": "t"}).status_code == 403
    [entry] = audit.entries(book.store)
    assert entry.user_agent is not None and len(entry.user_agent) == audit.MAX_TEXT
    assert "\x7f" not in entry.user_agent and entry.who is not None and entry.who.startswith("unregistered")
