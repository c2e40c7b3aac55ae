"""The inspector answers only its own Host names (DNS rebinding), refuses POSTs from other
origins (CSRF, login CSRF), sends security headers on every answer, and handles the rough edges
of its URLs: a seq that is not ASCII digits, a run id ending in `/events`, a Referer that would
redirect off-site. Each checked in Starlette's TestClient and against a real `daybook web`."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import agents
import httpx
import pytest
from conftest import HERE, cli_in_process, wait_until
from starlette.testclient import TestClient
from webtools import csrf_of, free_port, web_server

import daybook
from daybook import Daybook, RunStatus, Suspended
from daybook.web import build
from daybook.web.guard import HEADERS

ATTACKER = "attacker.example"


@daybook.workflow(name="guard_echo")
def echo(ctx: daybook.Context, text: str) -> str:
    return str(ctx.decide("echo", lambda: text).value)


def gated(book: Daybook, bank_url: str, run_id: str = "sre") -> str:
    """A run suspended on an approval gate for `oncall`; returns the oncall token (rotated)."""
    token = book.add_approver("oncall", roles=["approver", "operator"])
    with pytest.raises(Suspended):
        book.run(agents.restart, bank_url, 3600.0, run_id=run_id)
    return token


def state(book: Daybook, run_id: str) -> tuple[int, str, int]:
    """What a refused request must not change: the run's rows, its status, its inbox."""
    return len(book.journal(run_id)), book.get_run(run_id).status, len(book.store.inbox(run_id))


@contextmanager
def both(db_url: str, *extra: str) -> Iterator[list[tuple[httpx.Client, str]]]:
    """An httpx client on the app in-process (TestClient) and one on a real `daybook web`
    process on 127.0.0.1, each with the Host it is reached by."""
    with (
        Daybook(db_url) as book,
        web_server(db_url, *extra) as base,
        TestClient(build(book)) as local,
        httpx.Client(base_url=base, timeout=30) as real,
    ):
        yield [(local, "testserver"), (real, base.split("://", 1)[1])]


def _sse_status(client: httpx.Client, path: str, **headers: str) -> tuple[int, str]:
    with client.stream("GET", path, headers=headers) as resp:
        return resp.status_code, resp.headers.get("content-type", "")


# The guard answers before any page reads the store: the Host, Origin, header and URL checks
# below are the inspector's own, so each runs on SQLite only (the pages on both stores are
# tested in test_web*.py).
SQLITE_ONLY = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


@SQLITE_ONLY
def test_a_page_of_another_site_rebinding_its_name_reads_nothing(db_url: str) -> None:
    with Daybook(db_url) as book:
        book.run(echo, "secret plan", run_id="r1")
    with both(db_url) as clients:
        for client, host in clients:
            port = host.rsplit(":", 1)[1] if ":" in host else "80"
            for path in ("/", "/runs/r1", "/api/runs", "/api/runs/r1", "/approvals", "/login"):
                refused = client.get(path, headers={"host": f"{ATTACKER}:{port}"})
                assert refused.status_code == 400, (path, refused.status_code)
                assert "secret plan" not in refused.text and "r1" not in refused.text
                assert client.get(path).status_code == 200, path  # by its own name it answers
            code, kind = _sse_status(client, "/runs/r1/events", host=ATTACKER)
            assert code == 400 and "event-stream" not in kind
            assert client.post("/login", headers={"host": ATTACKER}, data={"name": "x"}).status_code == 400
        real, host = clients[1]
        port = host.rsplit(":", 1)[1]
        for name in ("127.0.0.1", "localhost", "[::1]", "LOCALHOST"):
            assert real.get("/api/runs", headers={"host": f"{name}:{port}"}).status_code == 200, name


def test_allowed_host_adds_a_name_the_inspector_answers(tmp_path: Any) -> None:
    db_url = f"sqlite:///{tmp_path / 'hosts.db'}"
    with Daybook(db_url) as book:
        book.run(echo, "hi", run_id="r1")
    with web_server(db_url, "--allowed-host", "inspector.lan", "--allowed-host", "*.corp.example") as base:
        for host, code in [
            ("inspector.lan:8765", 200),
            ("box.corp.example", 200),
            ("corp.example.attacker.example", 400),
            (ATTACKER, 400),
        ]:
            assert httpx.get(base + "/api/runs", headers={"host": host}).status_code == code, host
    for bad in ("*", "evil/x", "a*.example"):
        refused = cli_in_process("web", "--allowed-host", bad, db=db_url)  # refused before serving
        assert refused.returncode == 2 and "allowed-host" in refused.stderr, (bad, refused.stderr)


def _sign_in(client: httpx.Client, token: str, **headers: str) -> httpx.Response:
    return client.post("/login", data={"name": "oncall", "token": token}, headers=headers)


@SQLITE_ONLY
def test_a_cross_origin_sign_in_or_action_is_refused_and_a_same_origin_one_works(
    db_url: str, bank: Any
) -> None:
    with Daybook(db_url, inline_wait=0.1) as book:
        gated(book, bank.url, "sre0")
        token = gated(book, bank.url, "sre1")  # the approver's token, as rotated last
    with both(db_url) as clients, Daybook(db_url) as book:
        for i, (client, host) in enumerate(clients):
            run = f"/runs/sre{i}/pause"
            client.follow_redirects = False
            for origin in ("http://evil.example", "null", f"http://{host.split(':')[0]}:1"):
                refused = _sign_in(client, token, origin=origin)
                assert refused.status_code == 403 and "refused" in refused.text, origin
                assert "set-cookie" not in refused.headers  # no session planted (login CSRF)
            refused = _sign_in(client, token, referer="http://evil.example/page")
            assert refused.status_code == 403 and "set-cookie" not in refused.headers
            signed = _sign_in(client, token, origin=f"http://{host}")
            assert signed.status_code == 303 and "set-cookie" in signed.headers
            client.cookies = signed.cookies
            csrf = csrf_of(client.get("/approvals").text)
            before = state(book, f"sre{i}")
            for headers in ({"origin": "http://evil.example"}, {"sec-fetch-site": "cross-site"}):
                refused = client.post(run, data={"csrf": csrf}, headers=headers)
                assert refused.status_code == 403, headers
            assert state(book, f"sre{i}") == before
            done = client.post(run, data={"csrf": csrf}, headers={"origin": f"http://{host}"})
            assert done.status_code == 303 and book.get_run(f"sre{i}").status == RunStatus.PAUSED


@SQLITE_ONLY
def test_after_action_redirect_never_leaves_the_inspector(db_url: str, bank: Any) -> None:
    with Daybook(db_url, inline_wait=0.1) as book:
        token = gated(book, bank.url)
    with both(db_url) as clients:
        for client, host in clients:
            client.follow_redirects = False
            client.cookies = _sign_in(client, token).cookies
            csrf = csrf_of(client.get("/approvals").text)
            for referer, path in [
                (f"http://{host}//evil.example/x", "/"),
                (f"http://{host}/\\evil.example/x", "/"),
                (f"http://{host}", "/"),
                (f"http://{host}/runs/sre", "/runs/sre"),
            ]:
                # Every action answers through the same redirect; a pause answers at once (a steer
                # waited 3 s each for an acknowledgement this suspended run never gives).
                moved = client.post("/runs/sre/pause", data={"csrf": csrf}, headers={"referer": referer})
                assert moved.status_code == 303, (referer, moved.text)
                assert moved.headers["location"].split("?")[0] == path, referer


@SQLITE_ONLY
def test_every_answer_carries_the_security_headers(db_url: str) -> None:
    with Daybook(db_url) as book:
        book.run(echo, "hi", run_id="r1")
    with both(db_url) as clients:
        for client, _ in clients:
            answers = [
                client.get("/"),
                client.get("/runs/r1"),
                client.get("/api/runs"),
                client.get("/runs/nope"),
                client.get("/static/live.js"),
                client.get("/", headers={"host": ATTACKER}),
                client.post("/login", data={}, headers={"origin": "http://evil.example"}),
            ]
            with client.stream("GET", "/runs/r1/events") as live:
                assert "event-stream" in live.headers["content-type"]
                answers.append(live)  # type: ignore[arg-type]
            for got in answers:
                for name, value in HEADERS.items():
                    assert got.headers.get(name) == value, (got.request.url, name)
            csp = HEADERS["content-security-policy"]
            assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp


@SQLITE_ONLY
def test_a_seq_that_is_not_ascii_digits_is_a_clean_400(db_url: str) -> None:
    with Daybook(db_url) as book:
        book.run(echo, "hi", run_id="r1")
    with both(db_url) as clients:
        for client, _ in clients:
            for after in ("%C2%B2", "%D9%A3", "-1", "1e3", "9" * 5000):
                code, _ = _sse_status(client, f"/runs/r1/events?after={after}")
                assert code == 400, after
            with client.stream("GET", "/runs/r1/events", headers=[(b"last-event-id", b"\xb2")]) as resp:
                assert resp.status_code == 400
            code, kind = _sse_status(client, "/runs/r1/events?after=2")
            assert code == 200 and "event-stream" in kind


def test_a_run_whose_id_ends_in_events_has_its_own_page(db_url: str) -> None:
    with Daybook(db_url) as book:
        book.run(echo, "the short one", run_id="a")
        book.run(echo, "the long one", run_id="a/events")
    with both(db_url) as clients:
        for client, _ in clients:
            listing = client.get("/").text
            assert 'href="/runs/a%2Fevents"' in listing
            page = client.get("/runs/a%2Fevents")
            assert page.status_code == 200 and "Run a/events" in page.text and "the long one" in page.text
            assert "the short one" in client.get("/runs/a").text
            with client.stream("GET", "/runs/a/events") as short:  # the stream of run `a`
                assert "event-stream" in short.headers["content-type"]
                assert "the short one" in short.read().decode()
            with client.stream("GET", "/runs/a%2Fevents/events") as long:  # the stream of `a/events`
                assert "event-stream" in long.headers["content-type"]
                assert "the long one" in long.read().decode()


def test_listening_off_loopback_warns_that_tokens_cross_the_network_in_clear(tmp_path: Any) -> None:
    # 192.0.2.1 (TEST-NET-1) is on no interface here: the warning is said, then the bind fails,
    # so nothing ever listens off loopback.
    out = subprocess.run(
        [sys.executable, "-m", "daybook", "web", "--db", f"sqlite:///{tmp_path / 'w.db'}",
         "--host", "192.0.2.1", "--port", str(free_port())],
        capture_output=True, text=True, timeout=300, cwd=HERE,
    )  # fmt: skip
    assert "not loopback" in out.stderr and "reads every run" in out.stderr
    assert "plain HTTP" in out.stderr and "token" in out.stderr


def test_in_a_browser_the_pages_work_under_their_content_security_policy(tmp_path: Any, bank: Any) -> None:
    from selenium.webdriver.common.by import By
    from webtools import chromium

    db_url = f"sqlite:///{tmp_path / 'csp.db'}"
    with Daybook(db_url, inline_wait=0.1) as book:
        token = book.add_approver("oncall", roles=["approver", "operator"])
        with pytest.raises(Suspended):
            book.run(agents.restart, bank.url, 3600.0, run_id="sre")
        browser = chromium()
        try:
            with web_server(db_url) as base:
                browser.get(base + "/runs/sre")
                rows = lambda: browser.find_elements(By.CSS_SELECTOR, "#timeline tbody tr")  # noqa: E731
                before = len(rows())
                book.approve("sre", "sre/1", approver="oncall", token=token)
                book.resume("sre")
                wait_until(lambda: len(rows()) == len(book.journal("sre")) > before)  # live.js ran
                header = browser.find_element(By.TAG_NAME, "header")
                assert header.value_of_css_property("background-color") == "rgba(34, 34, 51, 1)"  # styled
                browser.get(base + "/login")
                assert browser.find_element(By.ID, "login").is_displayed()
                logs = browser.get_log("browser")
        finally:
            browser.quit()
    assert not [entry for entry in logs if "Content Security Policy" in entry["message"]], logs
