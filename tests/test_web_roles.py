"""Who may do what in the web inspector: a viewer reads and acts on nothing, an approver decides
only the gates that list them (a clear 403 naming why otherwise), an operator acts on runs;
`--read-only` shows every page without a form and refuses every act, signed in or not;
`--require-sign-in` keeps reads from whoever is not signed in. Forged form fields never change
who acts or on what. In Starlette's TestClient and against the real `daybook web` process, on
both stores, and in a headless Chromium."""

from __future__ import annotations

import html
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import agents
import httpx
import pytest
from conftest import HERE, wait_until
from selenium.webdriver.common.by import By
from starlette.testclient import TestClient
from webtools import csrf_of, sign_in_as, text_of, web_server

import daybook
from daybook import Daybook, NotAuthorized, Suspended
from daybook.gates.audit import entries as audit_entries
from daybook.web import build

IDS = {"run_id": "sre", "gate": "sre/1"}  # the gate `agents.restart` opens, for approvers ["oncall"]
ACTS = ("pause", "resume", "retry", "cancel", "steer", "resolve", "raise-budget")


@pytest.fixture
def people(db_url: str, bank: Any) -> Iterator[tuple[Daybook, dict[str, str]]]:
    """A run suspended at a gate only `oncall` may decide, and one person per role: oncall
    (approver and operator), bob (an approver the gate does not list), olga (operator only),
    vera (viewer); their tokens by name."""
    with Daybook(db_url, inline_wait=0.1) as book:
        with pytest.raises(Suspended):
            book.run(agents.restart, bank.url, 3600.0, run_id="sre")
        tokens = {
            "oncall": book.add_approver("oncall", roles=("approver", "operator")),
            "bob": book.add_approver("bob", roles=("approver",)),
            "olga": book.add_approver("olga", roles=("operator",)),
            "vera": book.add_approver("vera", roles=("viewer",)),
        }
        yield book, tokens


def state(book: Daybook) -> tuple[int, str, list[tuple[Any, Any]]]:
    """What a refused act must not change: the run's rows, its status, its delivered verdicts."""
    delivered = [(v["approver"], v["state"]) for v in book.verdicts("sre") if v["state"] != "refused"]
    return len(book.journal("sre")), book.get_run("sre").status, delivered


def signed_in(app: Any, name: str, token: str) -> tuple[TestClient, str]:
    client = TestClient(app)
    assert client.post("/login", data={"name": name, "token": token}).status_code == 200
    return client, csrf_of(client.get("/").text)  # the sign-out form carries the session's token


def forms(page: str) -> list[str]:
    """The POST targets of a page's forms, but the header's sign-out."""
    found = re.findall(r'<form[^>]*method="post"[^>]*action="([^"]+)"', page)
    return [a for a in found if a != "/logout"]


def said(answer: Any) -> str:
    """What an answer says, as a person reads it (HTML entities decoded)."""
    return html.unescape(answer.text)


def test_a_viewer_reads_every_page_sees_no_action_form_and_every_act_is_refused(
    people: tuple[Daybook, dict[str, str]],
) -> None:
    book, tokens = people
    client, csrf = signed_in(build(book), "vera", tokens["vera"])
    for path in ("/", "/runs/sre", "/approvals", "/attention", "/api/runs", "/api/runs/sre"):
        got = client.get(path)
        assert got.status_code == 200, path
        assert forms(got.text) == [], path
    assert "signed in as vera (viewer)" in client.get("/").text
    assert "vera does not hold the approver role" in client.get("/approvals").text
    before = state(book)
    verdict = client.post("/approvals/approve", data={**IDS, "csrf": csrf})
    assert verdict.status_code == 403 and "does not hold the approver role" in said(verdict)
    for verb in ACTS:
        refused = client.post(f"/runs/sre/{verb}", data={"csrf": csrf, "step": "1", "outcome": "absent"})
        assert refused.status_code == 403 and "operator role" in said(refused), verb
    assert state(book) == before and book.get_run("sre").status == "suspended"
    assert client.get("/audit").status_code == 403  # the audit log is for operators


def test_an_approver_the_gate_does_not_list_sees_no_form_for_it_and_is_refused_naming_why(
    people: tuple[Daybook, dict[str, str]],
) -> None:
    book, tokens = people
    app = build(book)
    bob, csrf = signed_in(app, "bob", tokens["bob"])
    inbox = bob.get("/approvals").text
    assert "not yours to decide: approvers are oncall" in inbox and forms(inbox) == []
    before = state(book)
    for verb in ("approve", "deny"):
        refused = bob.post(f"/approvals/{verb}", data={**IDS, "csrf": csrf, "reason": "sure"})
        assert refused.status_code == 403, refused.text
        assert "'bob' may not decide gate 'sre/1' (allowed: ['oncall'])" in said(refused)
    assert state(book) == before
    assert [(v["approver"], v["state"]) for v in book.verdicts("sre")] == [("bob", "refused")] * 2
    assert forms(bob.get("/runs/sre").text) == []  # an approver of a gate is no operator of runs
    oncall, csrf = signed_in(app, "oncall", tokens["oncall"])
    assert forms(oncall.get("/approvals").text) == ["/approvals/approve", "/approvals/deny"]
    done = oncall.post("/approvals/approve", data={**IDS, "csrf": csrf})
    assert done.status_code == 200 and "delivered" in said(done)


def test_an_operator_without_the_approver_role_acts_on_runs_but_decides_no_gate(
    people: tuple[Daybook, dict[str, str]],
) -> None:
    book, tokens = people
    olga, csrf = signed_in(build(book), "olga", tokens["olga"])
    assert "/runs/sre/pause" in forms(olga.get("/runs/sre").text)
    assert forms(olga.get("/approvals").text) == []
    refused = olga.post("/approvals/approve", data={**IDS, "csrf": csrf})
    assert refused.status_code == 403 and "does not hold the approver role" in said(refused)
    assert olga.post("/runs/sre/pause", data={"csrf": csrf}).status_code == 200
    assert book.get_run("sre").status == "paused"
    assert book.journal("sre")[-1].data.get("by") == "olga"


def test_forged_form_fields_change_neither_who_acts_nor_what_is_acted_on(
    people: tuple[Daybook, dict[str, str]],
) -> None:
    book, tokens = people
    app = build(book)
    _, bob_csrf = signed_in(app, "bob", tokens["bob"])
    oncall, csrf = signed_in(app, "oncall", tokens["oncall"])
    # Another session's CSRF token, and a made-up one, are refused.
    for forged in (bob_csrf, "", "x" * 40):
        assert oncall.post("/runs/sre/pause", data={"csrf": forged}).status_code == 403
    # Who acts is the session's, whatever the form claims.
    claims = {"approver": "cfo", "by": "cfo", "name": "cfo", "author": "cfo", "token": "dbk1_forged"}
    done = oncall.post("/approvals/approve", data={**IDS, **claims, "csrf": csrf, "reason": "ok"})
    assert done.status_code == 200
    assert [(v["approver"], v["state"]) for v in book.verdicts("sre")] == [("oncall", "delivered")]
    # What is acted on is the URL's run, not a run_id field.
    assert oncall.post("/runs/sre/pause", data={"csrf": csrf, "run_id": "other"}).status_code == 200
    assert book.get_run("sre").status == "paused"
    # A field that is not a string (a JSON body) or a verb nobody defined says so.
    assert oncall.post("/runs/sre/explode", data={"csrf": csrf}).status_code == 400
    nested = oncall.post("/runs/sre/pause", json={"csrf": csrf, "by": {"name": "cfo"}})
    assert nested.status_code == 400


def _read_only_checks(client: Any, book: Daybook, csrf: str) -> None:
    """Every page shows, with no action form and the read-only banner; every act is refused
    with a 403 saying the inspector is read-only, and changes nothing."""
    for path in ("/", "/runs/sre", "/approvals", "/attention"):
        got = client.get(path)
        assert got.status_code == 200 and forms(got.text) == [], path
        assert "read-only: this inspector takes no action" in got.text
    before = state(book)
    posts = [("/approvals/approve", IDS), ("/approvals/deny", IDS)]
    posts += [(f"/runs/sre/{verb}", {"step": "1", "outcome": "absent"}) for verb in ACTS]
    for path, data in posts:
        refused = client.post(path, data={**data, "csrf": csrf})
        assert refused.status_code == 403, path
        assert "this inspector is read-only" in said(refused), path
    assert state(book) == before and book.verdicts("sre") == []  # not even a refused verdict


def test_a_read_only_inspector_shows_every_page_and_refuses_every_act_from_a_valid_session(
    people: tuple[Daybook, dict[str, str]],
) -> None:
    book, tokens = people
    client, csrf = signed_in(build(book, read_only=True), "oncall", tokens["oncall"])
    _read_only_checks(client, book, csrf)
    assert client.post("/logout", data={"csrf": csrf}).status_code == 200  # signing out works


def test_the_real_daybook_web_read_only_refuses_every_act_from_a_valid_session(
    people: tuple[Daybook, dict[str, str]], db_url: str
) -> None:
    book, tokens = people
    with web_server(db_url, "--read-only") as base, httpx.Client(base_url=base, timeout=30) as client:
        signed = client.post("/login", data={"name": "oncall", "token": tokens["oncall"]})
        assert signed.status_code == 303
        _read_only_checks(client, book, csrf_of(client.get("/").text))


def _sign_in_required_checks(client: Any, sign_in: Any) -> None:
    page = client.get("/runs/sre")
    assert page.status_code == 303 and page.headers["location"].startswith("/login")
    for path in ("/api/runs", "/api/runs/sre", "/runs/sre/events"):
        refused = client.get(path)
        assert refused.status_code == 401 and "sign in" in refused.json()["error"], path
    assert "sre" not in client.get("/api/runs").text
    assert client.get("/login").status_code == 200 and client.get("/static/live.js").status_code == 200
    sign_in()
    assert client.get("/runs/sre").status_code == 200
    assert [r["run_id"] for r in client.get("/api/runs").json()] == ["sre"]


def test_require_sign_in_keeps_every_read_from_whoever_is_not_signed_in_and_a_viewer_reads(
    people: tuple[Daybook, dict[str, str]],
) -> None:
    book, tokens = people
    client = TestClient(build(book, require_sign_in=True), follow_redirects=False)

    def sign_in() -> None:
        assert client.post("/login", data={"name": "vera", "token": tokens["vera"]}).status_code == 303

    _sign_in_required_checks(client, sign_in)


def test_the_real_daybook_web_require_sign_in_lets_only_a_signed_in_viewer_read(
    people: tuple[Daybook, dict[str, str]], db_url: str
) -> None:
    _, tokens = people
    with (
        web_server(db_url, "--require-sign-in") as base,
        httpx.Client(base_url=base, timeout=30) as client,
    ):

        def sign_in() -> None:
            assert client.post("/login", data={"name": "vera", "token": tokens["vera"]}).status_code == 303

        _sign_in_required_checks(client, sign_in)


def test_daybook_web_help_names_the_roles_and_both_modes() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "daybook", "web", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=HERE,
    )
    assert out.returncode == 0
    for words in ("--read-only", "--require-sign-in", "viewer", "operator", "daybook audit"):
        assert words in out.stdout, words
    roles = subprocess.run(
        [sys.executable, "-m", "daybook", "approvers", "add", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=HERE,
    )
    assert "viewer" in roles.stdout


_POST_APPROVE = """
const done = arguments[arguments.length - 1];
const body = new URLSearchParams({run_id: "sre", gate: "sre/1",
    csrf: document.querySelector("#logout input[name=csrf]").value});
fetch("/approvals/approve", {method: "POST", body, headers: {accept: "application/json"}})
    .then(r => r.text().then(t => done([r.status, t])));
"""


def test_in_a_browser_a_viewer_sees_no_action_button_and_an_unlisted_approver_cannot_approve(
    browser: Any, tmp_path: Path, bank: Any
) -> None:
    db_url = f"sqlite:///{tmp_path / 'roles.db'}"
    with Daybook(db_url, inline_wait=0.1) as book:
        with pytest.raises(Suspended):
            book.run(agents.restart, bank.url, 3600.0, run_id="sre")
        vera = book.add_approver("vera", roles=("viewer",))
        bob = book.add_approver("bob", roles=("approver",))
    with web_server(db_url) as base:
        sign_in_as(browser, base, "vera", vera)
        wait_until(lambda: "signed in as vera" in text_of(browser, "flash"))
        for path in ("/approvals", "/runs/sre", "/attention", "/"):
            browser.get(base + path)
            posting = "form[method=post]:not(#logout) button"
            assert browser.find_elements(By.CSS_SELECTOR, posting) == [], path
            assert text_of(browser, "who") == "signed in as vera (viewer)"
        browser.get(base + "/approvals")
        assert "vera does not hold the approver role" in text_of(browser, "gates")
        browser.find_element(By.CSS_SELECTOR, "#logout button").click()
        wait_until(lambda: "signed out" in text_of(browser, "flash"))
        sign_in_as(browser, base, "bob", bob)
        wait_until(lambda: "signed in as bob" in text_of(browser, "flash"))
        browser.get(base + "/approvals")
        assert "not yours to decide: approvers are oncall" in text_of(browser, "gates")
        assert browser.find_elements(By.CSS_SELECTOR, "form.approve") == []
        # Posting anyway (as a crafted request from bob's own page would) is refused.
        status, text = browser.execute_async_script(_POST_APPROVE)
        assert status == 403 and "'bob' may not decide gate 'sre/1'" in text
    with Daybook(db_url) as book:
        assert book.get_run("sre").status == "suspended"
        assert [(v["approver"], v["state"]) for v in book.verdicts("sre")] == [("bob", "refused")]
    assert bank.stats()["executions_by_key"] == {}


def test_a_viewers_key_signs_nothing_outside_the_inspector_either(
    people: tuple[Daybook, dict[str, str]],
) -> None:
    """A viewer only reads: its key gives no verdict, no act on a run and no signal."""
    book, tokens = people
    key = tokens["vera"]
    before = state(book)
    with pytest.raises(NotAuthorized, match="does not hold the approver role"):
        book.approve("sre", "sre/1", approver="vera", token=key)
    with pytest.raises(NotAuthorized, match="is a viewer, not an operator of runs"):
        book.pause("sre", by="vera", token=key)
    with pytest.raises(NotAuthorized, match="is a viewer: it reads"):
        book.signal("sre", "go", {"ok": True}, sender="vera", token=key)
    assert state(book) == before and book.get_run("sre").status == "suspended"


@daybook.workflow
def capped(ctx: daybook.Context) -> float:
    """Two $0.04 spends under a $0.05 cap: the second waits for a person to raise it."""
    ctx.budget.cap(usd=0.05)
    for _ in range(2):
        ctx.budget.admit(usd=0.04)
        ctx.budget.charge(usd=0.04)
    return float(ctx.budget.spent.get("usd", 0.0))


def test_an_operator_raises_a_budget_from_a_run_page_and_a_viewer_cannot(
    people: tuple[Daybook, dict[str, str]],
) -> None:
    book, tokens = people
    with pytest.raises(Suspended):
        book.run(capped, run_id="capped")
    app = build(book)
    vera, vera_csrf = signed_in(app, "vera", tokens["vera"])
    form = {"quantity": "usd", "amount": "1"}
    refused = vera.post("/runs/capped/raise-budget", data={**form, "csrf": vera_csrf})
    assert refused.status_code == 403 and "operator role" in said(refused)
    olga, csrf = signed_in(app, "olga", tokens["olga"])
    assert "/runs/capped/raise-budget" in forms(olga.get("/runs/capped").text)
    for bad in ({"quantity": "usd", "amount": "-1"}, {"quantity": "", "amount": "1"}, {"quantity": "by"}):
        assert olga.post("/runs/capped/raise-budget", data={**bad, "csrf": csrf}).status_code == 400, bad
    done = olga.post("/runs/capped/raise-budget", data={**form, "csrf": csrf})
    assert done.status_code == 200 and "raise #" in said(done)
    assert book.resume("capped") == pytest.approx(0.08)
    assert book.budget("capped")["caps"]["usd"] == pytest.approx(1.05)
    [raised] = [e for e in audit_entries(book.store) if e.action == "raise-budget" and e.outcome == "done"]
    assert (raised.who, raised.detail) == ("olga", {"run_id": "capped", "quantity": "usd", "amount": "1"})
