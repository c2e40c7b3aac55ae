"""The web inspector (`daybook web`): pages show the journal escaped, approving needs a valid
token and the session's CSRF token and goes through `Daybook.approve`, bad input is a 4xx that
changes nothing (in Starlette's TestClient and against a real uvicorn server), the live stream
gives each committed row, and `daybook journal RUN --follow` prints the same stream."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import agents
import httpx
import pytest
from conftest import HERE, wait_until
from starlette.testclient import TestClient
from webtools import csrf_of, serving, web_server

import daybook
from daybook import Daybook, RunStatus, Suspended
from daybook.store.read_scope import read_scope
from daybook.web import build, is_loopback, pages, views


@daybook.workflow
def echo(ctx: daybook.Context, text: str) -> str:
    return str(ctx.decide("echo", lambda: text).value)


def gated(book: Daybook, bank_url: str, run_id: str = "sre") -> str:
    """A run suspended on an approval gate for `oncall` (who operates runs too); returns the
    oncall token."""
    token = book.add_approver("oncall", roles=["approver", "operator"])
    with pytest.raises(Suspended):
        book.run(agents.restart, bank_url, 3600.0, run_id=run_id)
    return token


def state(book: Daybook, run_id: str) -> tuple[int, str, int]:
    """What a refused request must not change: the run's rows, its status, its inbox."""
    return len(book.journal(run_id)), book.get_run(run_id).status, len(book.store.inbox(run_id))


@pytest.fixture
def gated_book(db_url: str, bank) -> Iterator[tuple[Daybook, str, Any]]:  # type: ignore[no-untyped-def]
    with Daybook(db_url, inline_wait=0.1) as book:
        token = gated(book, bank.url)
        yield book, token, bank


def test_pages_show_the_journal_with_markup_escaped(db_url: str) -> None:
    with Daybook(db_url) as book:
        book.run(echo, "<b>x</b>", run_id="<script>alert(1)</script>")
        client = TestClient(build(book))
        listing = client.get("/")
        assert listing.status_code == 200
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in listing.text
        assert "<script>alert" not in listing.text
        page = client.get("/runs/%3Cscript%3Ealert(1)%3C%2Fscript%3E")
        assert page.status_code == 200 and "&lt;b&gt;x&lt;/b&gt;" in page.text
        assert "<b>x</b>" not in page.text
        assert client.get("/?status=completed").text.count("/runs/") == 1
        assert client.get("/?status=failed").text.count('href="/runs/') == 0


def test_approving_from_the_inbox_needs_the_token_and_the_csrf_token_and_lets_the_run_go_on(
    gated_book: tuple[Daybook, str, Any],
) -> None:
    book, token, bank = gated_book
    client = TestClient(build(book))
    assert "sign in to decide" in client.get("/approvals").text
    refused = client.post("/login", data={"name": "oncall", "token": "guess"})
    assert refused.status_code == 403 and "refused" in refused.text
    ids = {"run_id": "sre", "gate": "sre/1"}
    assert client.post("/approvals/approve", data=ids).status_code == 401  # not signed in
    assert client.post("/login", data={"name": "oncall", "token": token}).status_code == 200
    before = state(book, "sre")
    assert client.post("/approvals/approve", data=ids).status_code == 403  # no CSRF token
    assert state(book, "sre") == before and book.verdicts("sre") == []
    csrf = csrf_of(client.get("/approvals").text)
    done = client.post("/approvals/approve", data={**ids, "csrf": csrf, "reason": "looks fine"})
    assert done.status_code == 200 and "delivered" in done.text
    [verdict] = book.verdicts("sre")
    assert (verdict["state"], verdict["approver"], verdict["reason"]) == ("delivered", "oncall", "looks fine")
    assert bank.stats()["executions_by_key"] == {}  # a verdict alone performs nothing
    assert book.resume("sre")["by"] == "oncall"
    assert bank.stats()["executions_by_key"] == {"sre/1/pay/0": 1}
    assert "No gates waiting" in client.get("/approvals").text
    found = client.get("/?q=sre/1/pay/0").text  # a run found by an effect's key
    assert 'href="/runs/sre"' in found and "(1 runs)" in found


def _bad_requests(csrf: str) -> list[tuple[str, str, dict[str, Any], int]]:
    form = {"csrf": csrf}
    return [
        ("GET", "/runs/no-such-run", {}, 404),
        ("GET", "/api/runs/no-such-run", {}, 404),
        ("GET", "/runs/no-such-run/events", {}, 404),
        ("GET", "/runs/sre/events?after=minus-one", {}, 400),
        ("GET", "/?page=zero", {}, 400),
        ("GET", "/api/runs?limit=0", {}, 400),
        ("POST", "/runs/no-such-run/pause", {"data": form}, 404),
        ("POST", "/runs/sre/explode", {"data": form}, 400),
        ("POST", "/runs/sre/pause", {"data": {}}, 403),
        ("POST", "/runs/sre/pause", {"data": {"csrf": "forged"}}, 403),
        ("POST", "/runs/sre/resolve", {"data": {**form, "step": "x"}}, 400),
        ("POST", "/runs/sre/steer", {"data": {**form, "kind": "shout", "text": "hi"}}, 400),
        ("POST", "/approvals/approve", {"data": {**form, "run_id": "sre"}}, 400),
        ("POST", "/approvals/approve", {"data": {**form, "run_id": "nope", "gate": "nope/1"}}, 404),
        ("POST", "/approvals/approve", {"data": {**form, "run_id": "sre", "gate": "sre/99"}}, 400),
        ("POST", "/approvals/shrug", {"data": form}, 400),
        (
            "POST",
            "/runs/sre/pause",
            {"content": b"{not json", "headers": {"content-type": "application/json"}},
            400,
        ),
        (
            "POST",
            "/runs/sre/pause",
            {"content": b"[1, 2]", "headers": {"content-type": "application/json"}},
            400,
        ),
        ("POST", "/runs/sre/pause", {"content": b"x" * 70_000}, 413),
        ("POST", "/runs/sre/pause", {"content": b"\xff\xfe", "headers": {"content-type": "text/plain"}}, 400),
        ("POST", "/login", {"content": b"{", "headers": {"content-type": "application/json"}}, 400),
    ]


def _check_bad_input(client: Any, book: Daybook) -> None:
    before = state(book, "sre")
    csrf = csrf_of(client.get("/approvals").text)
    for method, path, kwargs, code in _bad_requests(csrf):
        got = client.request(method, path, **kwargs)
        assert got.status_code == code, (method, path, got.status_code, got.text[:300])
        assert got.text.strip(), (method, path)  # says what was wrong
    assert state(book, "sre") == before
    assert book.verdicts("sre") == []


def test_bad_input_to_every_endpoint_is_a_clear_4xx_and_changes_nothing(
    gated_book: tuple[Daybook, str, Any],
) -> None:
    book, token, _ = gated_book
    client = TestClient(build(book), raise_server_exceptions=True)
    client.post("/login", data={"name": "oncall", "token": token})
    _check_bad_input(client, book)


def test_bad_input_to_a_real_server_is_a_clear_4xx_and_changes_nothing(
    gated_book: tuple[Daybook, str, Any], db_url: str
) -> None:
    book, token, _ = gated_book
    with web_server(db_url) as base, httpx.Client(base_url=base, timeout=30) as client:
        client.post("/login", data={"name": "oncall", "token": token})
        _check_bad_input(client, book)


def test_the_live_stream_gives_each_row_after_it_commits(
    gated_book: tuple[Daybook, str, Any], db_url: str
) -> None:
    book, token, bank = gated_book
    last = book.journal("sre")[-1].seq
    got: list[dict[str, Any]] = []
    with web_server(db_url) as base:

        def listen() -> None:
            with httpx.stream("GET", f"{base}/runs/sre/events?after={last}", timeout=60) as resp:
                kind = ""
                for line in resp.iter_lines():
                    if line.startswith("event: "):
                        kind = line[7:]
                    elif line.startswith("data: "):
                        got.append({"event": kind, **json.loads(line[6:])})

        reader = threading.Thread(target=listen)
        reader.start()
        wait_until(lambda: any(g["event"] == "status" for g in got))
        book.approve("sre", "sre/1", approver="oncall", token=token, reason="ok")
        book.resume("sre")
        reader.join(timeout=60)
    rows = [g for g in got if g["event"] == "row"]
    seqs = [r["seq"] for r in rows]
    assert seqs == sorted(seqs) and seqs[0] == last + 1
    assert len(seqs) == len(book.journal("sre")) - last  # every row after `last`, once
    kinds = [r["kind"] for r in rows]
    assert kinds.index("intent") < kinds.index("outcome") and kinds[-1] == "run_completed"
    assert [g["status"] for g in got if g["event"] == "status"][-1] == RunStatus.COMPLETED
    assert bank.stats()["executions_by_key"] == {"sre/1/pay/0": 1}


def test_n_viewers_of_a_run_share_one_reader_and_each_gets_every_row_once_in_order(
    gated_book: tuple[Daybook, str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    book, token, _ = gated_book
    last = book.journal("sre")[-1].seq
    loads: list[int] = []
    real = book.store.load

    def load(run_id: str, after: int = 0, until: int | None = None) -> Any:
        loads.append(after)
        return real(run_id, after, until)

    monkeypatch.setattr(book.store, "load", load)
    app = build(book)
    starts = [0, last, last, last - 1, last]  # viewers from different points
    got: list[list[dict[str, Any]]] = [[] for _ in starts]

    def listen(i: int) -> None:
        url = f"{base}/runs/sre/events?after={starts[i]}"
        with httpx.stream("GET", url, timeout=60) as resp:
            kind = ""
            for line in resp.iter_lines():
                if line.startswith("event: "):
                    kind = line[7:]
                elif line.startswith("data: "):
                    got[i].append({"event": kind, **json.loads(line[6:])})

    viewers = [threading.Thread(target=listen, args=(i,)) for i in range(len(starts))]
    with serving(app) as base:
        for v in viewers:
            v.start()
        wait_until(lambda: all(any(g["event"] == "status" for g in mine) for mine in got))
        readers = app.state.readers
        assert readers.started == 1 and list(readers.runs) == ["sre"]
        assert len(readers.runs["sre"].viewers) == len(starts)
        before = len(loads)
        time.sleep(2.0)  # polls at 0.25 s: one reader reads about 8 times, not 8 per viewer
        polled = len(loads) - before
        assert 1 <= polled <= 12, polled
        assert all(after >= last for after in loads[-polled:])  # only the rows after the last seen
        book.approve("sre", "sre/1", approver="oncall", token=token, reason="ok")
        book.resume("sre")
        for v in viewers:
            v.join(timeout=60)
        assert not any(v.is_alive() for v in viewers)
        wait_until(lambda: not readers.runs)  # the reader stops with its last viewer
    final = real("sre")[-1].seq
    for start, mine in zip(starts, got, strict=True):
        seqs = [g["seq"] for g in mine if g["event"] == "row"]
        assert seqs == list(range(start + 1, final + 1))  # every row, once, in order
        assert [g["status"] for g in mine if g["event"] == "status"][-1] == RunStatus.COMPLETED
    assert readers.started == 1


def test_daybook_journal_follow_prints_rows_as_they_commit_until_the_run_ends(
    gated_book: tuple[Daybook, str, Any], db_url: str
) -> None:
    book, token, _ = gated_book
    follower = subprocess.Popen(
        [sys.executable, "-m", "daybook", "journal", "sre", "--follow", "--db", db_url],
        cwd=HERE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert follower.stdout is not None
    first = follower.stdout.readline()
    assert first.startswith("1  -  run_started")
    book.approve("sre", "sre/1", approver="oncall", token=token)
    book.resume("sre")
    out = follower.stdout.read()  # through the same buffer readline filled (not communicate)
    assert follower.wait(timeout=300) == 0
    lines = (first + out).splitlines()
    assert len(lines) == len(book.journal("sre"))
    assert "run_completed" in lines[-1] and any("outcome" in line and "confirmed" in line for line in lines)


@daybook.workflow
def many(ctx: daybook.Context, n: int) -> int:
    return sum(int(ctx.decide("step", lambda i=i: i).value) for i in range(n))


@daybook.workflow
def boom(ctx: daybook.Context, n: int) -> int:
    raise ValueError("boom")


@daybook.workflow
def tally(ctx: daybook.Context, city: str) -> str:
    return str(ctx.decide("tally", lambda: city).value)


def test_the_runs_list_reads_one_page_and_the_counts_with_its_filters_and_pages(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Daybook(db_url) as book:
        with pytest.raises(daybook.DaybookError):
            book.run(boom, 1, run_id="bad")  # parked: another status in the counts; the oldest
        parked = book.get_run("bad").status
        for i in range(pages.PAGE * 2 + 10):  # and 110 more: pages of 50, 50 and 11
            wf = echo if i % 2 else tally
            book.run(wf, "Zürich" if i == 7 else f"city-{i}", run_id=f"run-{i:03d}")
        read: list[tuple[dict[str, Any], int, int]] = []
        real = book.store.runs_page

        def runs_page(filters: dict[str, Any], limit: int, offset: int = 0) -> Any:
            read.append((filters, limit, offset))
            return real(filters, limit, offset)

        monkeypatch.setattr(book.store, "runs_page", runs_page)
        monkeypatch.setattr(book.store, "list_runs", lambda *a: pytest.fail("every header read"))
        client = TestClient(build(book))

        def ids(url: str) -> list[str]:
            got = client.get(url)
            assert got.status_code == 200, got.text
            return re.findall(r'<a href="/runs/(run-\d+)"', got.text)

        first = client.get("/").text
        assert "page 1 of 3 (111 runs)" in first and 'href="/?page=2">next' in first
        assert ids("/")[:2] == ["run-109", "run-108"] and len(ids("/")) == pages.PAGE
        assert read[-1][1:] == (pages.PAGE, 0)  # one page read, not every header
        third = ids("/?page=3")
        assert third == [f"run-{i:03d}" for i in range(9, -1, -1)] and read[-1][1:] == (pages.PAGE, 100)
        assert ids("/?page=4") == []
        counts = re.sub(r"<[^>]+>", "", client.get("/").text.split('id="counts"')[1].split("</p>")[0])
        assert "completed 110" in counts and f"{parked} 1" in counts  # every run, whatever the filter
        assert len(ids("/?status=completed&page=3")) == 10
        assert 'href="/?status=completed&amp;page=1">previous' in client.get("/?status=completed&page=2").text
        odd = ids("/?workflow=echo")
        assert len(odd) == pages.PAGE and all(int(r[4:]) % 2 for r in odd)
        assert "(55 runs)" in client.get("/?workflow=echo").text
        assert ids("/?q=Z%C3%BCrich") == ["run-007"]  # text in the input
        assert ids("/?q=run-10") == [f"run-{i}" for i in range(109, 99, -1)]  # text in the run id
        assert ids("/?since=2000-01-01")[:1] == ["run-109"] and ids("/?since=2999-01-01") == []
        assert client.get("/?since=yesterday").status_code == 400
        tallied = [f"run-{i:03d}" for i in (*range(108, 99, -2), *range(18, 9, -2))]
        assert ids("/?workflow=tally&q=city-1") == tallied  # filters combine


def test_a_long_run_page_shows_a_window_of_its_journal_with_links_to_the_rest(tmp_path: Any) -> None:
    with Daybook(f"sqlite:///{tmp_path / 'long.db'}?synchronous=normal") as book:
        book.run(many, 700, run_id="long")
        client = TestClient(build(book))
        latest = client.get("/runs/long")
        assert latest.status_code == 200
        assert latest.text.count("<tr>") - 1 <= pages.ROWS + 1  # the timeline window, and its header
        assert "rows 203 to 702 of 702" in latest.text and "earlier" in latest.text
        first = client.get("/runs/long?start=1")
        assert "rows 1 to 500 of 702" in first.text and "later" in first.text
        assert client.get("/runs/long?start=x").status_code == 400


def test_a_run_page_and_each_of_its_views_read_the_run_journal_from_the_store_once(
    gated_book: tuple[Daybook, str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each section of a run's page (its timeline, budget, cost, gates, effects) and of a view
    asks for the run's journal; the store reads it once per page (on a run of 10,000 steps the
    repeated reads were most of the page's time: benchmarks/web.py)."""
    book, _, _ = gated_book
    whole: list[str] = []
    inner = book.store.inner  # type: ignore[attr-defined]  # the backend under the payload guard
    real = inner.load

    def load(run_id: str, after: int = 0, until: int | None = None) -> Any:
        if after <= 0 and until is None:
            whole.append(run_id)
        return real(run_id, after, until)

    monkeypatch.setattr(inner, "load", load)
    client = TestClient(build(book))
    urls = ["/runs/sre", *(views.href("sre", n) for n in views.names())]
    urls += [views.data_href("sre", n) for n in views.names() if views.VIEWS[n].data is not None]
    for url in urls:
        whole.clear()
        got = client.get(url)
        assert got.status_code == 200, (url, got.text)
        assert whole.count("sre") == 1, (url, whole)
    assert "sre" in client.get("/runs/sre").text  # the page as before, from the one read


def test_a_read_scope_keeps_the_journal_it_read_and_the_next_one_sees_rows_committed_since(
    gated_book: tuple[Daybook, str, Any],
) -> None:
    book, token, _ = gated_book

    def approve_and_resume() -> None:  # another thread: its reads are its own, never the scope's
        book.approve("sre", "sre/1", approver="oncall", token=token, reason="ok")
        book.resume("sre")

    with read_scope():
        before = book.journal("sre")
        other = threading.Thread(target=approve_and_resume)
        other.start()
        other.join(timeout=60)
        assert book.get_run("sre").status == RunStatus.COMPLETED
        assert book.journal("sre") == before  # the page's snapshot: the rows it began with
        assert book.store.load("sre", before[-1].seq)  # a read after a seq goes to the store
    after = book.journal("sre")
    assert after[: len(before)] == before and after[-1].kind == "run_completed"


@daybook.workflow(name="web_blind")
def web_blind(ctx: daybook.Context, url: str) -> str:
    return str(ctx.effect(agents.pay_blind, bank=url, n=1)["id"])


def _signed_in(book: Daybook) -> tuple[TestClient, str]:
    token = book.add_approver("alice", roles=["approver", "operator"])
    client = TestClient(build(book))
    client.post("/login", data={"name": "alice", "token": token})
    return client, csrf_of(client.get("/approvals").text)


def test_the_attention_panel_resolves_an_unknown_with_evidence_and_the_run_goes_on_once(
    db_url: str,
    bank,  # type: ignore[no-untyped-def]
) -> None:
    bank.faults.drop_after_execute = 1
    with Daybook(db_url) as book:
        with pytest.raises(daybook.NeedsAttention):
            book.run(web_blind, bank.url, run_id="blind")
        client, csrf = _signed_in(book)
        panel = client.get("/attention").text
        assert 'href="/runs/blind"' in panel and "blind/1" in panel and 'class="resolve"' in panel
        wire = bank.records["payments"]["blind/1"]
        done = client.post(
            "/runs/blind/resolve",
            data={"csrf": csrf, "step": "1", "outcome": "confirmed", "ref": wire["id"],
                  "result": json.dumps(wire), "evidence": "bank statement line 7"},
        )  # fmt: skip
        assert done.status_code == 200 and "resolved as confirmed" in done.text
        [effect] = book.effects("blind")
        assert effect["status"] == "confirmed" and effect["ref"] == wire["id"]
        last = book.journal("blind")[-1].data
        assert (last["by"], last["evidence"]) == ("alice", "bank statement line 7")
        assert book.resume("blind") == wire["id"]
    assert bank.stats()["executions_by_key"] == {"blind/1": 1}


def test_pause_cancel_and_steer_from_a_run_page_are_journaled_with_the_approver(
    gated_book: tuple[Daybook, str, Any],
) -> None:
    book, _, bank = gated_book
    client, csrf = _signed_in(book)
    steered = client.post(
        "/runs/sre/steer", data={"csrf": csrf, "kind": "add", "text": "check the canary too"}
    )
    assert steered.status_code == 200 and "queued" in steered.text  # a suspended run reads it later
    assert client.post("/runs/sre/pause", data={"csrf": csrf}).status_code == 200
    assert book.get_run("sre").status == RunStatus.PAUSED
    cancelled = client.post("/runs/sre/cancel", data={"csrf": csrf}, headers={"accept": "application/json"})
    assert cancelled.json() == {"said": "run sre cancelled"}
    kinds = {e.kind: e.data for e in book.journal("sre")}
    assert kinds["run_paused"]["by"] == "alice" and kinds["run_cancelled"]["by"] == "alice"
    again = client.post("/runs/sre/pause", data={"csrf": csrf})
    assert again.status_code == 400 and "cancelled" in again.text  # said, not a 500
    assert bank.stats()["executions_by_key"] == {}


def test_resume_from_a_run_page_continues_a_paused_run_in_the_inspector_with_the_named_code(
    gated_book: tuple[Daybook, str, Any],
) -> None:
    book, token, bank = gated_book
    book.pause("sre")
    book.approve("sre", "sre/1", approver="oncall", token=token)
    client = TestClient(build(book, apps=("agents",)))
    client.post("/login", data={"name": "oncall", "token": token})
    csrf = csrf_of(client.get("/runs/sre").text)
    resumed = client.post("/runs/sre/resume", data={"csrf": csrf})
    assert resumed.status_code == 200 and "resumed" in resumed.text
    wait_until(lambda: book.get_run("sre").status == RunStatus.COMPLETED)
    assert bank.stats()["executions_by_key"] == {"sre/1/pay/0": 1}
    again = client.post("/runs/sre/resume", data={"csrf": csrf})
    assert again.status_code == 400 and "completed" in again.text


def test_only_loopback_addresses_count_as_local() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "::1", "localhost", "127.0.0.2"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "192.168.1.4", "example.com", "::"))


@daybook.tool(retry=daybook.Retry(max_attempts=1))
def pay_then_dawdle(*, bank: str, n: int, idempotency_key: str) -> Any:
    """Done at the bank at once; the reply reaches the journal only 1.5 s later."""
    done = agents.post(f"{bank}/payments", {"n": n}, idempotency_key)
    time.sleep(1.5)
    return done


@daybook.workflow(name="web_dawdle")
def dawdle(ctx: daybook.Context, bank: str) -> str:
    return str(ctx.effect(pay_then_dawdle, bank=bank, n=1)["id"])


def test_the_stream_never_shows_an_effect_done_before_its_outcome_row_commits(
    db_url: str,
    bank,  # type: ignore[no-untyped-def]
) -> None:
    got: list[dict[str, Any]] = []
    with Daybook(db_url) as book, web_server(db_url) as base:
        book.submit(dawdle, bank.url, run_id="slow")

        def listen() -> None:
            with httpx.stream("GET", f"{base}/runs/slow/events", timeout=60) as resp:
                for line in resp.iter_lines():
                    if line.startswith("data: "):
                        got.append(json.loads(line[6:]))

        reader = threading.Thread(target=listen)
        reader.start()
        runner = threading.Thread(target=lambda: book.resume("slow"))
        runner.start()
        wait_until(lambda: bank.stats()["executions_by_key"].get("slow/1") == 1)
        # Executed at the bank; its outcome is not journaled yet: the stream shows the intent only.
        wait_until(lambda: any(g.get("kind") == "intent" for g in got))
        outcomes_in_store = [e for e in book.journal("slow") if e.kind == "outcome"]
        shown = [g for g in got if g.get("kind") == "outcome"]
        assert outcomes_in_store or not shown
        runner.join(timeout=60)
        reader.join(timeout=60)
    statuses = [g.get("status") for g in got if g.get("kind") == "outcome"]
    assert statuses == ["confirmed"]


@daybook.workflow(name="web_secret")
def with_pin(ctx: daybook.Context) -> str:
    ctx.decide("pin", lambda: daybook.Secret("pin-8362-never-shown"))
    return "ok"


def test_a_run_page_shows_a_secret_as_its_digest_never_its_value(tmp_path: Any) -> None:
    with Daybook(f"sqlite:///{tmp_path / 's.db'}") as book:
        book.run(with_pin, run_id="pinned")
        digest = str(book.journal("pinned")[1].data["value"]["$secret"])
        page = TestClient(build(book)).get("/runs/pinned").text
    assert "pin-8362-never-shown" not in page and digest in page


def test_a_web_session_ends_when_its_approvers_key_is_rotated_or_removed(
    gated_book: tuple[Daybook, str, Any],
) -> None:
    """Audit R11: the old session cancelled a run after `approvers add` rotated the key."""
    book, token, _ = gated_book
    client = TestClient(build(book))
    assert client.post("/login", data={"name": "oncall", "token": token}).status_code == 200
    csrf = csrf_of(client.get("/approvals").text)
    book.add_approver("oncall")  # rotated (`daybook approvers add oncall` again)
    before = state(book, "sre")
    for path, data in (("/runs/sre/cancel", {}), ("/approvals/approve", {"run_id": "sre", "gate": "sre/1"})):
        assert client.post(path, data={**data, "csrf": csrf}).status_code == 401  # signed out
    assert state(book, "sre") == before and book.get_run("sre").status == "suspended"
    fresh = book.add_approver("oncall")
    assert client.post("/login", data={"name": "oncall", "token": fresh}).status_code == 200
    csrf = csrf_of(client.get("/approvals").text)
    assert book.remove_approver("oncall")  # removed: the session ends too
    assert client.post("/runs/sre/pause", data={"csrf": csrf}).status_code == 401
    assert book.get_run("sre").status == "suspended"


def test_a_gate_approver_without_the_operator_role_cannot_act_on_runs_from_the_web(
    db_url: str,
    bank,  # type: ignore[no-untyped-def]
) -> None:
    with Daybook(db_url, inline_wait=0.1) as book:
        with pytest.raises(Suspended):
            book.run(agents.restart, bank.url, 3600.0, run_id="sre")
        token = book.add_approver("oncall")  # the approver role only
        client = TestClient(build(book))
        client.post("/login", data={"name": "oncall", "token": token})
        csrf = csrf_of(client.get("/approvals").text)
        before = state(book, "sre")
        for verb in ("pause", "cancel", "retry", "steer", "resolve", "resume"):
            refused = client.post(f"/runs/sre/{verb}", data={"csrf": csrf, "compensate": "1"})
            assert refused.status_code == 403 and "operator role" in refused.text, verb
        assert state(book, "sre") == before
        done = client.post("/approvals/approve", data={"csrf": csrf, "run_id": "sre", "gate": "sre/1"})
        assert done.status_code == 200 and "delivered" in done.text  # deciding its gate is its role
        assert book.resume("sre")["by"] == "oncall"
