"""The inspector's views of a run's books (issue 30 items 4-6), on real runs on both stores and
in a real headless Chromium:

- **decisions**: an act next to the decision it followed (its value, policy, alternatives, the
  model and its tokens) and the obligation that decision opened; a secret decision shown as the
  digest the journal holds, never its value;
- **transactions**: a transaction waiting on another held by another process: who holds the
  scope, who waits on whom and for how long, each attempt's epoch and stage;
- **cost**: spend accumulated over the steps against the cap line (moved by a raise), per
  model, saved by replay, and the tree's spend.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import agents
import httpx
import pytest
from conftest import HERE, killed, run_child, wait_until
from selenium.webdriver.common.by import By
from starlette.testclient import TestClient
from tx_child import put_file
from webtools import open_view, table_rows, web_server

import daybook
from daybook import Daybook, Suspended, Why
from daybook.web import build
from daybook.web.decisions import GRAPH

CHILD = str(HERE / "tx_child.py")
# Where the browser tests save what they photographed (docs/images when taking the docs' pictures).
SHOTS = os.environ.get("DAYBOOK_WEB_SHOTS", "")


@daybook.tool
def refund(*, amount: int, idempotency_key: str) -> dict[str, int]:
    return {"refunded": amount}


@daybook.tool
def unlock(*, pin: Any, idempotency_key: str) -> str:
    return "unlocked"


def support_reply(prompt: str) -> str:
    return "Refund $50 to order A-17 by Friday."


@daybook.workflow(name="web_books_support")
def support(ctx: daybook.Context) -> str:
    """A model decides a refund (with its policy and the options not taken), the refund is
    promised (an obligation) and sent; then a secret decision unlocks a locker."""
    reply = ctx.llm(
        daybook.ScriptedLLM(support_reply, model="scripted-1"),
        "customer on order A-17 asks for a refund",
        why=Why(
            policy="refunds",
            version="v3",
            observation={"order": "A-17"},
            alternatives=["apologise", "escalate"],
        ),
    )
    promise = ctx.obligation(
        "refund", owner="support-bot", due_in=2 * 86400, about={"amount": 50}, decision=reply
    )
    ctx.effect(refund, decision=reply, amount=50)
    pin = ctx.decide("pin", lambda: daybook.Secret("pin-8362-never-shown"))
    ctx.effect(unlock, decision=pin, pin=daybook.Secret("pin-8362-never-shown"))
    return promise


# Markup in every place a person's or a model's text reaches the decisions and cost views.
XSS = '<img class="pwn" src="x" onerror="window.pwned=1">'


@daybook.workflow(name="web_books_markup")
def markup(ctx: daybook.Context, text: str) -> None:
    reply = ctx.llm(
        daybook.ScriptedLLM(lambda p: XSS, model=XSS), text, why=Why(policy=XSS, alternatives=[XSS, text])
    )
    ctx.obligation(XSS, owner=XSS, due_in=60.0, about=XSS, decision=reply)
    ctx.effect(refund, decision=reply, amount=1)
    ctx.decide("think", lambda: {"plan": XSS})  # a decision no act followed


def _support_run(db_url: str) -> str:
    with Daybook(db_url) as book:
        book.run(support, run_id="ticket-9")
    return "ticket-9"


def test_the_decisions_view_puts_each_act_beside_its_decision_model_tokens_and_the_obligation_it_opened(
    db_url: str,
) -> None:
    run = _support_run(db_url)
    with Daybook(db_url) as book:
        client = TestClient(build(book))
        found = client.get(f"/api/views/decisions?run={run}").json()
        page = client.get(f"/runs/{run}?view=decisions").text
        digest = next(e for e in book.journal(run) if e.name == "pin").data["value"]["$secret"]
    refund_act, unlock_act = found["acts"]
    assert (refund_act["tool"], refund_act["status"], refund_act["decision"]) == (
        "refund",
        "confirmed",
        f"{run}/1",
    )
    made = {d["id"]: d for d in found["decisions"]}
    llm = made[f"{run}/1"]
    assert (llm["name"], llm["model"], llm["policy"], llm["version"]) == (
        "llm",
        "scripted-1",
        "refunds",
        "v3",
    )
    assert llm["alternatives"] == ["apologise", "escalate"] and llm["observation"] == {"order": "A-17"}
    assert llm["tokens"] == 7 + 8  # the prompt's words in, the reply's words out (ScriptedLLM)
    assert "Refund $50" in llm["value"]["text"]
    assert llm["charged"] == {"usd": 0.0, "tokens": 15.0}  # what the call was charged (unpriced: 0 USD)
    [owed] = found["obligations"]
    assert (owed["kind"], owed["owner"], owed["state"], owed["decision"]) == (
        "refund",
        "support-bot",
        "open",
        f"{run}/1",
    )
    # The secret decision and the act it led to: the journal's digest, never the value.
    assert made[unlock_act["decision"]]["value"] == {"$secret": digest}
    assert "pin-8362-never-shown" not in json.dumps(found) and "pin-8362-never-shown" not in page
    # The page's own table (readable without script) says the same.
    assert 'id="acts"' in page and "scripted-1" in page and "apologise" in page and "support-bot" in page
    assert digest in page


def test_a_decision_no_act_followed_is_listed_apart_and_markup_stays_text(db_url: str) -> None:
    with Daybook(db_url) as book:
        book.run(markup, XSS, run_id="marked")
        client = TestClient(build(book))
        found = client.get("/api/views/decisions?run=marked").json()
        page = client.get("/runs/marked?view=decisions").text
    [idle] = found["idle"]
    assert (idle["id"], idle["name"], idle["value"]) == ("marked/4", "think", {"plan": XSS})
    assert [a["decision"] for a in found["acts"]] == ["marked/1"]
    assert 'id="idle"' in page and XSS not in page and "&lt;img class=&quot;pwn&quot;" in page


@daybook.workflow(name="web_books_many_acts")
def many_acts(ctx: daybook.Context, n: int) -> None:
    for i in range(n):
        made = ctx.decide(f"pick{i}", lambda i=i: i)
        ctx.effect(refund, decision=made, amount=i)


def test_a_run_with_more_acts_than_the_graph_draws_says_how_many_are_in_the_table_only(db_url: str) -> None:
    drawn = GRAPH
    with Daybook(db_url) as book:
        book.run(many_acts, drawn + 5, run_id="busy")
        client = TestClient(build(book))
        found = client.get("/api/views/decisions?run=busy").json()
        page = client.get("/runs/busy?view=decisions").text
    # The graph's data: the latest acts only, each with its decision; the counts beside them.
    assert (found["drawn"], found["shown"], found["total"]) == (drawn, drawn + 5, drawn + 5)
    assert [a["amount"] for a in (act["args"] for act in found["acts"])] == list(range(5, drawn + 5))
    assert {d["id"] for d in found["decisions"]} == {str(a["decision"]) for a in found["acts"]}
    # The page says so, and its table lists every act.
    assert f"The graph draws the latest {drawn} acts; the other 5 below are in the table only." in page
    assert page[page.index('id="acts"') :].count("<tr>") == drawn + 5 + 1  # and the header row


@daybook.workflow(name="web_books_plain")
def plain(ctx: daybook.Context) -> int:
    return 1


def test_a_run_with_no_act_no_transaction_and_no_spend_says_so_in_each_view(db_url: str) -> None:
    with Daybook(db_url) as book:
        book.run(plain, run_id="plain")
        client = TestClient(build(book))
        pages = {v: client.get(f"/runs/plain?view={v}") for v in ("decisions", "transactions", "cost")}
        data = {v: client.get(f"/api/views/{v}?run=plain") for v in pages}
        missing = client.get("/api/views/cost?run=no-such-run")
    assert all(p.status_code == 200 for p in pages.values())
    assert all(d.status_code == 200 for d in data.values())
    assert "This run took no act" in pages["decisions"].text
    assert "This run opened no transaction." in pages["transactions"].text
    assert "This run set no cap and charged nothing." in pages["cost"].text
    assert data["cost"].json()["series"] == {} and data["decisions"].json()["acts"] == []
    assert missing.status_code == 404 and "no-such-run" in missing.json()["error"]


def test_the_cost_view_draws_spend_over_steps_against_a_cap_a_raise_moved_per_model_and_the_saved_calls(
    db_url: str,
) -> None:
    with Daybook(db_url, inline_wait=0) as book:
        with pytest.raises(Suspended):
            book.run(agents.capped_calls, 3, 0.015, run_id="capped")
        paused = TestClient(build(book)).get("/api/views/cost?run=capped").json()
        book.raise_budget("capped", usd=0.01)
        book.resume("capped")  # replays the two recorded calls (saved), makes the third
        found = TestClient(build(book)).get("/api/views/cost?run=capped").json()
        page = TestClient(build(book)).get("/runs/capped?view=cost").text
        spent = book.budget("capped")["spent"]["usd"]
    assert "usd" in paused["paused"]  # what the run was told when it stopped at the cap
    assert found["paused"] is None
    usd = found["series"]["usd"]
    assert [round(p[1], 6) for p in usd["spent"]] == [round(x * agents_call_usd(), 6) for x in range(4)]
    assert usd["spent"][-1][1] == pytest.approx(spent)
    caps = [round(c[1], 6) for c in usd["cap"]]  # the cap in force at each charge
    assert (caps[0], caps[-1], sorted(set(caps))) == (0.015, 0.025, [0.015, 0.025])  # moved by the raise
    assert list(usd["models"]) == ["gpt-4o"]
    steps = [p[0] for p in usd["spent"][1:]]
    assert steps == sorted(steps) and len(set(steps)) == 3  # one point per call, at its step
    assert found["ledger"]["saved_calls"] == 2 and found["ledger"]["calls"] == 3
    assert [r["run_id"] for r in found["tree"]["runs"]] == ["capped"]
    assert 'id="cost-chart-usd"' in page and "saved by replay" in page
    assert f"{100 * spent / 0.025:.0f}% (over the cap)" in page  # the share of the raised cap


def agents_call_usd() -> float:
    return (2 * 2.5 + 1000 * 10.0) / 1_000_000  # "question N" in (2 tokens), 1,000 out, gpt-4o


def test_the_cost_view_marks_a_model_call_a_sigkill_cut_off_and_made_again(db_url: str) -> None:
    # Killed once call 2's reservation is durable (decision rows: reserve 1, call 1, reserve 2).
    proc = run_child(db_url, "start", "cut", "model_calls", json.dumps([3]), "--kill-after", "decision:3")
    assert killed(proc), proc.stdout + proc.stderr
    with Daybook(db_url) as book:
        book.resume("cut")
        client = TestClient(build(book))
        found = client.get("/api/views/cost?run=cut").json()
        page = client.get("/runs/cut?view=cost").text
    [again] = found["respent"]
    assert (again["step"], again["model"], again["attempts"]) == (2, "gpt-4o", 2)
    assert again["usd"] == pytest.approx(agents_call_usd())  # estimated at the recorded call's cost
    assert found["ledger"]["respent_calls"] == 1 and found["ledger"]["saved_calls"] == 1
    # The budget was charged each recorded call once: the spend line ends at 3 calls.
    assert found["series"]["usd"]["spent"][-1][1] == pytest.approx(3 * agents_call_usd())
    assert 'id="cost-respent"' in page


def test_the_cost_view_sums_a_trees_runs(db_url: str) -> None:
    with Daybook(db_url) as book:
        book.run(agents.cost_tree, run_id="family")
        found = TestClient(build(book)).get("/api/views/cost?run=family").json()
        whole = book.cost("family", tree=True)
    assert len(found["tree"]["runs"]) == 3 and found["tree"]["calls"] == 5
    assert found["tree"]["usd"] == pytest.approx(whole.usd)
    assert sum(r["spent"]["usd"] for r in found["tree"]["runs"]) == pytest.approx(whole.usd)
    assert found["tree"]["spent"]["usd"] == pytest.approx(whole.usd)
    assert found["budget"]["spent"]["usd"] == pytest.approx(book_cost_alone(db_url))


def book_cost_alone(db_url: str) -> float:
    with Daybook(db_url) as book:
        return book.cost("family").usd


def _count(db_url: str, run_id: str, root: Path, mode: str) -> subprocess.Popen[str]:
    """tx_child.py's counter: one transaction on fs:ROOT/acct (`hold`: kept open until acct.go)."""
    return subprocess.Popen(
        [sys.executable, CHILD, db_url, "count", run_id, str(root), "acct", "1", mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


class Contention:
    """A holder process keeping a transaction open on a scope and a waiter process blocked
    behind it, until `release()`."""

    def __init__(self, db_url: str, root: Path) -> None:
        self.root = root
        Daybook(db_url).close()  # the store exists before two processes open it
        self.holder = _count(db_url, "holder", root, "hold")
        with Daybook(db_url) as book:
            wait_until(lambda: any(t["status"] == "open" for t in book.transactions("holder")))
            self.waiter = _count(db_url, "waiter", root, "tx")
            wait_until(lambda: any(f["waiting"] for f in book.frontiers()))

    def release(self) -> None:
        (self.root / "acct.go").write_text("go")
        for proc in (self.holder, self.waiter):
            out, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, out + err

    def kill(self) -> None:
        for proc in (self.holder, self.waiter):
            if proc.poll() is None:
                proc.kill()
                proc.communicate()


@pytest.fixture
def contention(db_url: str, tmp_path: Path) -> Iterator[Contention]:
    found = Contention(db_url, tmp_path)
    try:
        yield found
    finally:
        found.kill()


def test_the_transactions_view_shows_who_holds_the_scope_and_who_waits_on_whom_for_how_long(
    db_url: str, contention: Contention
) -> None:
    scope = f"fs:{contention.root}/acct"
    with Daybook(db_url) as book:
        client = TestClient(build(book))
        seen = client.get("/api/views/transactions?run=waiter").json()
        from_holder = client.get("/api/views/transactions?run=holder").json()
        page = client.get("/runs/waiter?view=transactions").text
        contention.release()
        after = client.get("/api/views/transactions?run=waiter").json()
    [edge] = seen["edges"]
    [hold] = book_tx(seen, "holder")
    [wait] = book_tx(seen, "waiter")
    assert (edge["from"], edge["to"], edge["scopes"]) == (wait["tx_id"], hold["tx_id"], [scope])
    assert edge["waited"] >= 0 and wait["epoch"] > hold["epoch"]
    assert (hold["role"], wait["role"], wait["waits_for"]) == ("holding", "waiting", [hold["tx_id"]])
    assert hold["run_status"] == "running" and hold["lease_owner"]  # who: the holder's process
    # The holder's view shows who waits behind it.
    assert [(e["from"], e["to"]) for e in from_holder["edges"]] == [(edge["from"], edge["to"])]
    [attempt] = seen["attempts"]
    assert (attempt["status"], attempt["stage"], attempt["rows"][0]["stage"]) == ("open", "begun", "begin")
    assert attempt["rows"][0]["epoch"] == wait["epoch"]
    assert "waits for" in page and scope in page
    # Once the holder commits, the waiter goes on: nothing waits, both attempts committed.
    assert after["edges"] == [] and after["nodes"] == []
    [done] = after["attempts"]
    assert done["status"] == "committed"
    assert [r["stage"] for r in done["rows"]] == ["begin", "stage", "commit", "end"]  # the write staged
    assert [r.get("status") for r in done["rows"] if r["stage"] == "end"] == ["committed"]


@daybook.workflow(name="web_books_retried")
def retried(ctx: daybook.Context, root: str) -> int:
    with ctx.transaction(scopes=[f"fs:{root}/**"], retries=1) as tx:
        ctx.effect(put_file, root=root, name="a.txt", content="A")
        if tx.attempt == 1:
            raise RuntimeError("the first attempt fails")
    return tx.attempt


def test_the_transactions_view_shows_an_aborted_attempt_and_its_retry_under_a_fresh_epoch(
    db_url: str, tmp_path: Path
) -> None:
    with Daybook(db_url) as book:
        assert book.run(retried, str(tmp_path), run_id="retried") == 2
        found = TestClient(build(book)).get("/api/views/transactions?run=retried").json()
        page = TestClient(build(book)).get("/runs/retried?view=transactions").text
    first, second = found["attempts"]
    assert (first["status"], first["stage"], second["status"], second["stage"]) == (
        "aborted",
        "aborted",
        "committed",
        "committed",
    )
    assert (first["attempt"], second["attempt"]) == (1, 2) and second["epoch"] > first["epoch"]
    stages = [(r["stage"], r.get("status")) for r in first["rows"]]
    assert stages == [("begin", None), ("stage", None), ("abort", "aborting"), ("end", "aborted")]
    assert first["rows"][0]["epoch"] == first["epoch"] and first["rows"][1]["tool"] == "put_file"
    assert first["rows"][2]["error"] == "the first attempt fails" and first["rows"][3]["retry"] is True
    assert found["nodes"] == [] and found["edges"] == []  # nothing open: it holds and waits for nothing
    assert "the first attempt fails" in page and "This run holds no scope now." in page


def book_tx(found: dict[str, Any], run_id: str) -> list[dict[str, Any]]:
    return [n for n in found["nodes"] if n["run_id"] == run_id]


# -- in a real headless Chromium ----------------------------------------------------------------


def _open_view(browser: Any, base: str, run_id: str, view: str) -> None:
    open_view(browser, f"{base}/runs/{run_id}?view={view}")


def _option(browser: Any, element_id: str) -> dict[str, Any]:
    option = browser.execute_script(
        "var el = document.getElementById(arguments[0]);"
        "var chart = echarts.getInstanceByDom(el);"
        "return chart ? JSON.parse(JSON.stringify(chart.getOption())) : null;",
        element_id,
    )
    assert option is not None, f"no chart drawn in #{element_id}"
    return dict(option)


def _shot(browser: Any, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(Path(SHOTS) / name))


def test_in_a_browser_the_decisions_view_draws_the_decision_its_act_and_its_obligation(
    browser: Any, tmp_path: Path
) -> None:
    db_url = f"sqlite:///{tmp_path / 'why.db'}"
    run = _support_run(db_url)
    with web_server(db_url) as base:
        _open_view(browser, base, run, "decisions")
        graph = _option(browser, "decisions-chart")["series"][0]
        labels = [n["name"] for n in graph["data"]]
        assert any(label.startswith(f"{run}/1 llm\nscripted-1") for label in labels)
        assert any(label.startswith("step 3 refund\nconfirmed") for label in labels)
        assert any(label.startswith("refund (open)\nowed by support-bot") for label in labels)
        ids = {n["id"] for n in graph["data"]}
        edges = {(e["source"], e["target"]) for e in graph["links"]}
        assert (f"d:{run}/1", "a:3") in edges and ("a:3", f"o:{run}/2") in edges  # what the act opened
        assert {f"d:{run}/1", "a:3", f"o:{run}/2"} <= ids
        [refund_row, unlock_row] = table_rows(browser, "acts")
        assert refund_row[1].startswith("refund") and refund_row[2] == "confirmed"
        assert (refund_row[4], refund_row[5]) == ("scripted-1", "15")
        assert refund_row[6] == "0.000000"  # scripted-1 is not in the price table: 0 USD
        assert "refunds" in refund_row[8] and "escalate" in refund_row[8]
        assert "refund owed by support-bot" in refund_row[9] and "open" in refund_row[9]
        assert "$secret" in unlock_row[7]
        assert "pin-8362-never-shown" not in browser.page_source
        _shot(browser, "web-decisions.png")


def test_in_a_browser_the_decisions_graph_draws_the_latest_acts_and_the_table_lists_them_all(
    browser: Any, tmp_path: Path
) -> None:
    db_url = f"sqlite:///{tmp_path / 'busy.db'}"
    with Daybook(db_url) as book:
        book.run(many_acts, GRAPH + 5, run_id="busy")
    with web_server(db_url) as base:
        _open_view(browser, base, "busy", "decisions")
        graph = _option(browser, "decisions-chart")["series"][0]
        acts = sorted(int(n["id"][2:]) for n in graph["data"] if n["id"].startswith("a:"))
        decided = [n for n in graph["data"] if n["id"].startswith("d:")]
        assert len(acts) == len(decided) == GRAPH and len(graph["links"]) == GRAPH
        assert len(table_rows(browser, "acts")) == GRAPH + 5
        said = browser.find_element(By.ID, "decisions-drawn").text
        assert said == f"The graph draws the latest {GRAPH} acts; the other 5 below are in the table only."


def test_in_a_browser_the_transactions_view_draws_a_waiter_arrow_to_the_holder_in_another_process(
    browser: Any, tmp_path: Path
) -> None:
    db_url = f"sqlite:///{tmp_path / 'tx.db'}"
    contention = Contention(db_url, tmp_path)
    try:
        with web_server(db_url) as base:
            _open_view(browser, base, "waiter", "transactions")
            graph = _option(browser, "transactions-chart")["series"][0]
            nodes = {n["id"]: n for n in graph["data"]}
            [link] = graph["links"]
            assert (
                nodes[link["source"]]["category"] == "waiting"
                and "run waiter" in nodes[link["source"]]["name"]
            )
            assert (
                nodes[link["target"]]["category"] == "holding"
                and "run holder" in nodes[link["target"]]["name"]
            )
            assert link["label"]["formatter"].startswith("waits ") and "acct" in link["label"]["formatter"]
            [wait_row] = table_rows(browser, "tx-waits")
            assert "run waiter" in wait_row[0] and wait_row[1] == "waits for" and "run holder" in wait_row[2]
            assert wait_row[4].endswith("s")
            [scope_row] = table_rows(browser, "tx-scopes")
            assert (
                scope_row[0].endswith("/acct")
                and "run holder" in scope_row[2]
                and "run waiter" in scope_row[3]
            )
            [attempt] = table_rows(browser, "tx-attempts")
            assert (attempt[4], attempt[5]) == ("open", "begun") and "begin" in attempt[6]
            _shot(browser, "web-transactions.png")
        contention.release()
    finally:
        contention.kill()


def test_in_a_browser_the_cost_view_draws_spend_against_the_cap_line_and_each_model(
    browser: Any, tmp_path: Path
) -> None:
    db_url = f"sqlite:///{tmp_path / 'cost.db'}"
    with Daybook(db_url, inline_wait=0) as book:
        with pytest.raises(Suspended):
            book.run(agents.capped_calls, 3, 0.015, run_id="capped")
        book.raise_budget("capped", usd=0.01)
        book.resume("capped")
    with web_server(db_url) as base:
        assert httpx.get(f"{base}/api/views/cost?run=capped").status_code == 200
        _open_view(browser, base, "capped", "cost")
        option = _option(browser, "cost-chart-usd")
        series = {s["name"]: s for s in option["series"]}
        assert set(series) == {"usd spent", "usd cap", "gpt-4o"}
        spent = [p[1] for p in series["usd spent"]["data"]]
        assert spent == pytest.approx([x * agents_call_usd() for x in range(4)])
        caps = [p[1] for p in series["usd cap"]["data"]]
        assert caps[0] == pytest.approx(0.015) and caps[-1] == pytest.approx(0.025)
        assert series["usd cap"]["lineStyle"]["type"] == "dashed"
        assert option["title"][0]["text"] == "usd spent over steps against its cap"
        totals = {row[0]: row for row in table_rows(browser, "cost-totals")}
        assert totals["saved by replay"][3] == "2 calls" and totals["spent"][3] == "3 calls"
        [usd] = [r for r in table_rows(browser, "cost-caps") if r[0] == "usd"]
        share = f"{100 * 3 * agents_call_usd() / 0.025:.0f}% (over the cap)"  # the last reply passed it
        assert (usd[3], usd[4], usd[5]) == ("0.025", share, share)  # a run alone: its tree is itself
        _shot(browser, "web-cost.png")


def test_in_a_browser_markup_in_a_model_name_a_decision_and_an_obligation_stays_text(
    browser: Any, tmp_path: Path
) -> None:
    db_url = f"sqlite:///{tmp_path / 'xss.db'}"
    with Daybook(db_url) as book:
        book.run(markup, XSS, run_id="marked")
    show_tip = (
        "var chart = echarts.getInstanceByDom(document.getElementById(arguments[0]));"
        "var n = chart.getOption().series[0].data.length;"
        "for (var i = 0; i < n; i++) {"
        "  chart.dispatchAction({type: 'showTip', seriesIndex: 0, dataIndex: i}); }"
        "return n;"
    )
    with web_server(db_url) as base:
        for view, chart in (("decisions", "decisions-chart"), ("cost", "cost-chart-tokens")):
            _open_view(browser, base, "marked", view)
            assert browser.execute_script(show_tip, chart) > 0  # every tooltip shown once
            if view == "cost":  # the model's name, drawn as text on the canvas
                assert XSS in [s["name"] for s in _option(browser, chart)["series"]]
            found = browser.execute_script(
                "return [document.querySelectorAll('img.pwn').length, window.pwned === undefined];"
            )
            assert found == [0, True], view
            assert XSS in browser.find_element(By.ID, "view").text or view == "cost"
