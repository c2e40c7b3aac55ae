"""The web inspector as a person uses it, in a real headless Chromium (Selenium with the system
chromedriver): the demo's run in the list and its wire going intent -> unknown -> confirmed;
approving a gate from the inbox (a wrong token refused, the right one lets the run go on); an
open run page updated live when a step commits."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import agents
import pytest
from conftest import run_worker, wait_until
from selenium.webdriver.common.by import By
from webtools import sign_in_as, table_rows, text_of, web_server

from daybook import Daybook, Suspended


def test_in_a_browser_the_demo_run_is_listed_and_its_wire_goes_intent_unknown_confirmed(
    browser: Any, tmp_path: Path
) -> None:
    db_url = f"sqlite:///{tmp_path / 'demo.db'}"
    demo = subprocess.run(
        [sys.executable, "-m", "daybook", "demo", "--db", db_url], capture_output=True, text=True, timeout=120
    )
    assert demo.returncode == 0, demo.stderr
    with web_server(db_url) as base:
        browser.get(base + "/")
        link = browser.find_element(By.CSS_SELECTOR, "#runs a")
        assert link.text.startswith("treasury-")
        assert "completed 1" in browser.find_element(By.ID, "counts").text
        link.click()
        wire = [row for row in table_rows(browser, "timeline") if row[3] == "send_wire"]
        assert [(row[2], row[5]) for row in wire] == [
            ("intent", ""),
            ("outcome", "unknown"),
            ("outcome", "confirmed"),
        ]
        assert "wire-000001" in wire[-1][7]


def test_in_a_browser_a_wrong_token_is_refused_and_the_right_one_approves_and_the_run_goes_on(
    browser: Any, tmp_path: Path, bank: Any
) -> None:
    db_url = f"sqlite:///{tmp_path / 'gate.db'}"
    with Daybook(db_url, inline_wait=0.1) as book:
        token = book.add_approver("oncall")
        with pytest.raises(Suspended):
            book.run(agents.restart, bank.url, 3600.0, run_id="sre")
    with web_server(db_url) as base:
        browser.get(base + "/approvals")
        assert "sign in to decide" in browser.find_element(By.ID, "gates").text
        sign_in_as(browser, base, "oncall", "not-the-token")
        wait_until(lambda: "refused" in text_of(browser, "flash"))
        sign_in_as(browser, base, "oncall", token)
        wait_until(lambda: "signed in as oncall" in text_of(browser, "flash"))
        browser.find_element(By.CSS_SELECTOR, "form.approve input[name=reason]").send_keys(
            "error rate is real"
        )
        browser.find_element(By.CSS_SELECTOR, "form.approve button").click()
        wait_until(lambda: "delivered" in text_of(browser, "flash"))
    assert bank.stats()["executions_by_key"] == {}
    worker = run_worker(db_url)  # the run goes on in a worker, as after `daybook approve`
    assert worker.returncode == 0, worker.stderr
    with Daybook(db_url) as book:
        assert book.get_run("sre").result["by"] == "oncall"
        [verdict] = book.verdicts("sre")
        assert (verdict["approver"], verdict["reason"]) == ("oncall", "error rate is real")
    assert bank.stats()["executions_by_key"] == {"sre/1/pay/0": 1}


def test_in_a_browser_an_open_run_page_shows_a_step_when_it_commits(
    browser: Any, tmp_path: Path, bank: Any
) -> None:
    db_url = f"sqlite:///{tmp_path / 'live.db'}"
    with Daybook(db_url, inline_wait=0.1) as book:
        token = book.add_approver("oncall")
        with pytest.raises(Suspended):
            book.run(agents.restart, bank.url, 3600.0, run_id="sre")
        with web_server(db_url) as base:
            browser.get(base + "/runs/sre")
            before = len(table_rows(browser, "timeline"))
            assert "suspended" in browser.find_element(By.ID, "run-status").text
            book.approve("sre", "sre/1", approver="oncall", token=token)
            book.resume("sre")
            after = len(book.journal("sre"))
            wait_until(lambda: len(table_rows(browser, "timeline")) == after)
            live = table_rows(browser, "timeline")[before:]
            assert [row[2] for row in live][-1] == "run_completed"
            assert any(row[2] == "outcome" and row[5] == "confirmed" for row in live)
            wait_until(lambda: "completed" in text_of(browser, "run-status"))
