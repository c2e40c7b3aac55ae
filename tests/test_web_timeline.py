"""A run's timeline in the web inspector (`/runs/RUN?view=timeline`): every step a bar on the lane
of its kind, coloured by what became of it, the run's crashes and resumes marked, a bar's rows on
a click. The data on real runs on both stores; then what a person sees in a real headless
Chromium: the demo's run (its agent killed with SIGKILL mid-wire, then resumed by a new process),
a run with a step on every lane, and a 10,000-step run."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import timeline_app
from conftest import wait_until
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from starlette.testclient import TestClient
from webtools import open_view, web_server

import daybook
from daybook import Daybook
from daybook.web.app import build
from daybook.web.timeline import LANES, STATUSES

HERE = Path(__file__).parent


def _timeline(book: Daybook, run_id: str, **query: str) -> Any:
    with TestClient(build(book)) as client:
        answer = client.get("/api/views/timeline", params={"run": run_id, **query})
    assert answer.status_code == 200, answer.text
    return answer.json()


def _bars(found: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(lane, name, status) of each bar, in order of its first row."""
    cols = found["bar_columns"]
    lane, status, name = cols.index("lane"), cols.index("status"), cols.index("name")
    return [(LANES[b[lane]], found["names"][b[name]], STATUSES[b[status]]) for b in found["bars"]]


def _demo(db_url: str) -> str:
    """`daybook demo`: its agent process is SIGKILLed after the bank executed the wire, before the
    outcome was journaled; a second process resumes the run. Returns the run's id."""
    done = subprocess.run(
        [sys.executable, "-m", "daybook", "demo", "--db", db_url], capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SIGKILL" in done.stdout
    with Daybook(db_url) as book:
        return book.runs(None, 1)[0].run_id


def test_a_crashed_and_resumed_run_shows_the_wire_unknown_then_resolved_and_where_it_crashed_and_resumed(
    db_url: str,
) -> None:
    run_id = _demo(db_url)
    with Daybook(db_url) as book:
        found = _timeline(book, run_id)
        events = book.journal(run_id)
    effects = [(name, status) for lane, name, status in _bars(found) if lane == "effects"]
    assert effects == [("send_wire", "resolved"), ("book_custody", "confirmed"), ("post_gl", "confirmed")]
    kinds = [m[0] for m in found["marks"]]
    assert kinds == ["started", "crashed", "resumed", "completed"]
    crashed, resumed = found["marks"][1], found["marks"][2]
    intent = next(ev for ev in events if ev.kind == "intent" and ev.name == "send_wire")
    # The crash is at the dead process's last row (the wire's intent); the resume at the first
    # row the next process wrote.
    assert crashed[2] == intent.seq and resumed[2] == intent.seq + 1
    assert "send_wire" in crashed[3] and "in flight" in resumed[3]
    assert crashed[1] < resumed[1]


@pytest.mark.slow
def test_a_process_killed_inside_a_model_call_is_marked_crashed_there_and_resumed_where_it_called_again(
    db_url: str, tmp_path: Path
) -> None:
    from test_framework_cost import child, out_of

    killed = child(
        db_url, tmp_path / "calls", "killed", "pydantic_ai", '{"usd": 100000}', "fail", "--die-at-call", "2"
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    out_of(child(db_url, tmp_path / "calls", "killed", "pydantic_ai", '{"usd": 100000}', "fail", "--resume"))
    with Daybook(db_url) as book:
        found = _timeline(book, "killed")
        events = book.journal("killed")
    calls = [(name, status) for lane, name, status in _bars(found) if "model.request" in name]
    # Named with the model that answered; the one cut off answered when it was called again.
    assert calls == [("pydantic_ai:pa__model.request (scripted-pa)", "confirmed")] * 2
    crashed, resumed = (m for m in found["marks"] if m[0] in ("crashed", "resumed"))
    reserved = [ev.seq for ev in events if ev.status == "reserved"]
    assert crashed[2] == reserved[1]  # the reservation whose completion never came
    assert resumed[2] > crashed[2] and resumed[2] <= reserved[2]


def test_each_kind_of_step_is_a_bar_on_its_lane_with_its_status(
    db_url: str, bank: Any, tmp_path: Path
) -> None:
    with Daybook(db_url, inline_wait=5.0) as book:
        book.run(timeline_app.every_lane, bank.url, str(tmp_path), run_id="lanes")
        found = _timeline(book, "lanes")
    bars = _bars(found)
    assert ("decisions and model calls", "plan", "confirmed") in bars
    assert ("decisions and model calls", "llm (scripted-1)", "confirmed") in bars
    assert ("effects", "pay", "confirmed") in bars
    assert ("waits and gates", "sleep", "confirmed") in bars
    assert ("obligations", "obligation:confirm", "confirmed") in bars
    assert ("subtasks", "child run lanes~child18", "confirmed") in bars
    tx = [(name, status) for lane, name, status in bars if lane == "transactions"]
    assert tx == [
        ("transaction lanes/tx/6 (attempt 1)", "compensated"),  # aborted: its leg was undone
        ("transaction lanes/tx/12 (attempt 2)", "confirmed"),
    ]
    legs = [status for lane, name, status in bars if name == "book_leg"]
    assert legs == ["compensated", "confirmed"]
    assert ("effects", "cancel_leg", "confirmed") in bars
    # Compact: one array per bar, no repeated keys.
    assert all(isinstance(b, list) and len(b) == len(found["bar_columns"]) for b in found["bars"])


def test_a_step_a_retry_ran_again_after_a_fix_shows_its_first_run_superseded(
    db_url: str, tmp_path: Path
) -> None:
    flag = tmp_path / "fixed"
    with Daybook(db_url) as book:
        with pytest.raises(daybook.DaybookError):
            book.run(timeline_app.needs_a_fix, str(flag), run_id="fix")
        flag.write_text("fixed")
        assert book.retry("fix", app="timeline_app") == "fixed"
        found = _timeline(book, "fix")
    assert [(n, s) for _, n, s in _bars(found)] == [
        ("plan", "confirmed"),
        ("read_flag", "superseded"),
        ("read_flag", "confirmed"),
    ]
    assert [m[0] for m in found["marks"]] == ["started", "needs attention", "retried", "completed"]


def test_a_run_waiting_at_an_approval_gate_shows_the_gate_open_on_the_waits_lane(
    db_url: str, bank: Any
) -> None:
    from agents import restart

    with Daybook(db_url, inline_wait=0.1) as book:
        book.add_approver("oncall")
        with pytest.raises(daybook.Suspended):
            book.run(restart, bank.url, 3600.0, run_id="sre")
        found = _timeline(book, "sre")
        rows = _timeline(book, "sre", bar="1")
    assert _bars(found) == [
        ("decisions and model calls", "plan", "confirmed"),
        ("waits and gates", "gate:restart_service", "open"),  # its request and the wait for its verdict
    ]
    assert [r[2] for r in rows["rows"]] == ["decision", "signal"]


def test_a_recovered_run_shows_the_steps_its_branch_ran_again_superseded_then_run_again(
    book: Daybook, tmp_path: Path
) -> None:
    import dart_schedule as ds

    cal = str(tmp_path / "calendar.db")
    ds.calendar(cal)
    ds.arm(cal, "confirm")  # the producer's confirmation fails once, after its consumers committed
    sink = ds.Sink().start()
    try:
        with pytest.raises(daybook.RunFailed):
            book.run(ds.schedule, cal, "127.0.0.1", sink.port, run_id="sched", hold=True)
        rec = book.recover("sched")
    finally:
        sink.stop()
    found = _timeline(book, "sched")
    cols = found["bar_columns"]
    by_step: dict[int, list[str]] = {}
    for b in found["bars"]:
        by_step.setdefault(b[cols.index("step")], []).append(STATUSES[b[cols.index("status")]])
    for step in rec.superseded:
        assert by_step[step] == ["superseded", "confirmed"], step
    assert all(statuses == ["confirmed"] for step, statuses in by_step.items() if step not in rec.superseded)
    with TestClient(build(book)) as client:
        page = client.get("/runs/sched", params={"view": "timeline"}).text
    listed = page[page.index('id="timeline-notable"') :]
    assert listed.count('<span class="status s-superseded">superseded</span>') == len(rec.superseded)
    recovered = [m for m in found["marks"] if m[0] == "recovered"]
    assert len(recovered) == 1 and str(rec.superseded[0]) in recovered[0][3]


def test_an_unwound_saga_shows_each_leg_compensated_by_its_undo(db_url: str, bank: Any) -> None:
    from agents import saga

    with Daybook(db_url) as book:
        book.run(saga, bank.url, 2, -1, "none", run_id="saga")
        found = _timeline(book, "saga")
    assert [(n, s) for _, n, s in _bars(found)] == [
        ("book_leg", "compensated"),
        ("book_leg", "compensated"),
        ("cancel_leg", "confirmed"),
        ("cancel_leg", "confirmed"),
    ]


def test_a_bar_s_rows_are_its_journal_rows_and_a_bad_bar_number_is_refused(book: Daybook, bank: Any) -> None:
    from agents import payments

    book.run(payments, bank.url, 2, run_id="pay")
    found = _timeline(book, "pay")
    second = [i for i, (_, name, _) in enumerate(_bars(found)) if name == "pay"][1]
    rows = _timeline(book, "pay", bar=str(second))
    cols = rows["row_columns"]
    assert [(r[cols.index("kind")], r[cols.index("status")]) for r in rows["rows"]] == [
        ("intent", None),
        ("outcome", "confirmed"),
    ]
    assert json.loads(rows["rows"][1][cols.index("data")])["result"]["n"] == 1
    with TestClient(build(book)) as client:
        for bad in ("99", "-1", "x"):
            answer = client.get("/api/views/timeline", params={"run": "pay", "bar": bad})
            assert answer.status_code == 400 and "bar" in answer.json()["error"]
        assert client.get("/api/views/timeline", params={"run": "nope"}).status_code == 404


def test_without_script_the_page_has_the_counts_by_lane_and_the_marks(book: Daybook, bank: Any) -> None:
    from agents import payments

    book.run(payments, bank.url, 3, run_id="pay")
    with TestClient(build(book)) as client:
        page = client.get("/runs/pay", params={"view": "timeline"})
    assert page.status_code == 200
    assert 'id="timeline-summary"' in page.text and 'id="timeline-marks"' in page.text
    assert "<td>effects</td><td>3</td>" in page.text  # three confirmed payments
    assert "None: every step was confirmed." in page.text
    assert 'src="/static/timeline.js"' in page.text and "<script>" not in page.text


# -- in a browser -------------------------------------------------------------------------------


_OPTION = """
var chart = echarts.getInstanceByDom(document.getElementById('timeline-chart'));
var o = chart.getOption();
return {lanes: o.yAxis[0].data, series: o.series.map(function (s) {
  return {name: s.name, data: s.data.map(function (d) { return d.value ? [d.name, d.value] : d; })};
})};
"""


def _open(driver: Any, base: str, run_id: str) -> dict[str, Any]:
    open_view(driver, f"{base}/runs/{quote(run_id, safe='')}?view=timeline")
    option: dict[str, Any] = driver.execute_script(_OPTION)
    return option


def _drawn(option: dict[str, Any], names: list[str], bars: list[list[Any]]) -> list[tuple[str, str, str]]:
    """(lane, name, status) of each bar as the chart holds it (its series is its status)."""
    lanes = [label.rsplit(" (", 1)[0] for label in option["lanes"]]
    out = []
    for series in option["series"]:
        if series["name"] in STATUSES:
            for item in series["data"]:
                out.append((lanes[item[2]], names[bars[item[3]][7]], series["name"]))
    return out


def _click_bar(driver: Any, lane: int, x: float, click: bool = True) -> None:
    """A real mouse click (or only the pointer moved there) at data point (x, lane) of the chart."""
    box = driver.find_element(By.ID, "timeline-chart")
    px, py = driver.execute_script(
        "var chart = echarts.getInstanceByDom(arguments[0]);"
        "return chart.convertToPixel({gridIndex: 0}, [arguments[1], arguments[2]]);",
        box,
        x,
        lane,
    )
    size = box.size
    moved = ActionChains(driver).move_to_element_with_offset(
        box, round(px - size["width"] / 2) + 1, round(py - size["height"] / 2)
    )
    (moved.click() if click else moved).perform()


def test_in_a_browser_the_demo_s_timeline_shows_the_wire_resolved_the_crash_the_resume_and_rows_on_a_click(
    browser: Any, tmp_path: Path
) -> None:
    db_url = f"sqlite:///{tmp_path / 'demo.db'}"
    run_id = _demo(db_url)
    with web_server(db_url) as base:
        option = _open(browser, base, run_id)
        found = httpx.get(f"{base}/api/views/timeline", params={"run": run_id}).json()
        assert [label.rsplit(" (", 1)[0] for label in option["lanes"]] == list(LANES)
        drawn = _drawn(option, found["names"], found["bars"])
        assert sorted(d for d in drawn if d[0] == "effects") == [
            ("effects", "book_custody", "confirmed"),
            ("effects", "post_gl", "confirmed"),
            ("effects", "send_wire", "resolved"),
        ]
        marks = next(s for s in option["series"] if s["name"] == "executions")["data"]
        assert [m[0] for m in marks] == ["started", "crashed", "resumed", "completed"]
        wire = next(b for b in found["bars"] if found["names"][b[7]] == "send_wire")
        _click_bar(browser, wire[0], (wire[2] + wire[3]) / 2, click=False)
        tip = browser.find_element(By.ID, "timeline-tip")
        wait_until(tip.is_displayed)
        assert tip.text.startswith("send_wire (step 4, resolved)")
        _click_bar(browser, wire[0], (wire[2] + wire[3]) / 2)
        wait_until(lambda: browser.find_element(By.ID, "timeline-rows").get_attribute("data-loaded") == "1")
        panel = browser.find_element(By.ID, "timeline-rows")
        assert "send_wire" in panel.find_element(By.TAG_NAME, "h2").text
        rows = [
            [td.text for td in tr.find_elements(By.TAG_NAME, "td")]
            for tr in panel.find_elements(By.CSS_SELECTOR, "#bar-rows tbody tr")
        ]
        assert [(r[2], r[5]) for r in rows] == [
            ("intent", ""),
            ("outcome", "unknown"),
            ("outcome", "confirmed"),
        ]
        assert "in flight when the process that sent it stopped" in rows[1][8]
        assert "wire-000001" in rows[2][8]


def test_in_a_browser_markup_in_a_step_s_rows_is_shown_as_text(
    browser: Any, tmp_path: Path, bank: Any
) -> None:
    db_url = f"sqlite:///{tmp_path / 'lanes.db'}"
    with Daybook(db_url, inline_wait=5.0) as book:
        book.run(timeline_app.every_lane, bank.url, str(tmp_path), run_id="lanes")
    with web_server(db_url) as base:
        option = _open(browser, base, "lanes")
        found = httpx.get(f"{base}/api/views/timeline", params={"run": "lanes"}).json()
        drawn = _drawn(option, found["names"], found["bars"])
        assert {lane for lane, _, _ in drawn} == set(LANES)  # a bar on every lane
        plan = found["bars"][0]
        assert found["names"][plan[7]] == "plan"
        _click_bar(browser, plan[0], plan[2])
        wait_until(lambda: browser.find_element(By.ID, "timeline-rows").get_attribute("data-loaded") == "1")
        panel = browser.find_element(By.ID, "timeline-rows")
        assert "<img src=x onerror=alert(1)>" in panel.text
        assert not panel.find_elements(By.TAG_NAME, "img")


def test_in_a_browser_a_10000_step_run_is_drawn_and_zooms_to_journal_order(
    browser: Any, tmp_path: Path
) -> None:
    db_url = f"sqlite:///{tmp_path / 'long.db'}"
    with Daybook(db_url) as book:
        book.run(timeline_app.many_steps, 10_000, run_id="long")
    with web_server(db_url) as base:
        option = _open(browser, base, "long")
        drawn = sum(len(s["data"]) for s in option["series"] if s["name"] in STATUSES)
        assert drawn == 10_000
        assert browser.find_element(By.ID, "timeline-chart").get_attribute("data-bars") == "10000"
        browser.find_element(By.ID, "axis-order").click()
        wait_until(lambda: browser.find_element(By.ID, "view").get_attribute("data-axis") == "order")
        xmax = browser.execute_script(
            "var box = document.getElementById('timeline-chart');"
            "return echarts.getInstanceByDom(box).getOption().xAxis[0].max;"
        )
        assert xmax == 10_002.5  # run_started, 10,000 decisions, run_completed: one slot each
        # Zoomed in to ten rows in the middle, a click on row 5,005 shows that row's step.
        browser.execute_script(
            "echarts.getInstanceByDom(document.getElementById('timeline-chart'))"
            ".dispatchAction({type: 'dataZoom', startValue: 5000, endValue: 5010});"
        )
        _click_bar(browser, 0, 5005)
        wait_until(lambda: browser.find_element(By.ID, "timeline-rows").get_attribute("data-loaded") == "1")
        rows = browser.find_elements(By.CSS_SELECTOR, "#bar-rows tbody tr td")
        assert [td.text for td in rows[:3]] == ["5005", "5004", "decision"]


def test_in_a_browser_an_open_timeline_of_a_waiting_run_follows_it_to_its_end(
    browser: Any, tmp_path: Path, bank: Any
) -> None:
    from agents import approval

    db_url = f"sqlite:///{tmp_path / 'live.db'}"
    with Daybook(db_url, inline_wait=0.1) as book, pytest.raises(daybook.Suspended):
        book.run(approval, bank.url, run_id="waits")
    with web_server(db_url) as base:
        option = _open(browser, base, "waits")
        found = httpx.get(f"{base}/api/views/timeline", params={"run": "waits"}).json()
        assert _drawn(option, found["names"], found["bars"]) == [
            ("waits and gates", "signal:approve", "open")
        ]
        with Daybook(db_url) as book:
            book.signal("waits", "approve", {"ok": True}, sender="cfo")
            book.resume("waits", app="agents")
        ended = httpx.get(f"{base}/api/views/timeline", params={"run": "waits"}).json()
        wait_until(
            lambda: (
                browser.find_element(By.ID, "view").get_attribute("data-last-seq") == str(ended["last_seq"])
            )
        )
        option = browser.execute_script(_OPTION)
        assert sorted(_drawn(option, ended["names"], ended["bars"])) == [
            ("effects", "pay", "confirmed"),
            ("waits and gates", "signal:approve", "confirmed"),
        ]
