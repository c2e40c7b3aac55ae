"""The web inspector as a person uses it, in a real headless Chromium (Selenium with the system
chromedriver): the demo's run in the list and its wire going intent -> unknown -> confirmed;
approving a gate from the inbox (a wrong token refused, the right one lets the run go on); an
open run page updated live when a step commits."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import agents
import pytest
from conftest import run_worker, wait_until
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.common.by import By
from webtools import chromium, web_server

from daybook import Daybook, Suspended


@pytest.fixture
def browser() -> Iterator[Any]:
    driver = chromium()
    try:
        yield driver
    finally:
        driver.quit()


def _rows(driver: Any, table: str) -> list[list[str]]:
    return [
        [td.text for td in tr.find_elements(By.TAG_NAME, "td")]
        for tr in driver.find_elements(By.CSS_SELECTOR, f"#{table} tbody tr")
    ]


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
        wire = [row for row in _rows(browser, "timeline") if row[3] == "send_wire"]
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
        _sign_in(browser, base, "oncall", "not-the-token")
        wait_until(lambda: "refused" in _text(browser, "flash"))
        _sign_in(browser, base, "oncall", token)
        wait_until(lambda: "signed in as oncall" in _text(browser, "flash"))
        browser.find_element(By.CSS_SELECTOR, "form.approve input[name=reason]").send_keys(
            "error rate is real"
        )
        browser.find_element(By.CSS_SELECTOR, "form.approve button").click()
        wait_until(lambda: "delivered" in _text(browser, "flash"))
    assert bank.stats()["executions_by_key"] == {}
    worker = run_worker(db_url)  # the run goes on in a worker, as after `daybook approve`
    assert worker.returncode == 0, worker.stderr
    with Daybook(db_url) as book:
        assert book.get_run("sre").result["by"] == "oncall"
        [verdict] = book.verdicts("sre")
        assert (verdict["approver"], verdict["reason"]) == ("oncall", "error rate is real")
    assert bank.stats()["executions_by_key"] == {"sre/1/pay/0": 1}


def _text(browser: Any, element_id: str) -> str:
    """An element's text, or "" while the page that has it is still loading."""
    try:
        return str(browser.find_element(By.ID, element_id).text)
    except WebDriverException:
        return ""


def _sign_in(browser: Any, base: str, name: str, token: str) -> None:
    browser.get(base + "/login")
    browser.find_element(By.NAME, "name").send_keys(name)
    browser.find_element(By.NAME, "token").send_keys(token)
    browser.find_element(By.CSS_SELECTOR, "#login button").click()


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
            before = len(_rows(browser, "timeline"))
            assert "suspended" in browser.find_element(By.ID, "run-status").text
            book.approve("sre", "sre/1", approver="oncall", token=token)
            book.resume("sre")
            after = len(book.journal("sre"))
            wait_until(lambda: len(_rows(browser, "timeline")) == after)
            live = _rows(browser, "timeline")[before:]
            assert [row[2] for row in live][-1] == "run_completed"
            assert any(row[2] == "outcome" and row[5] == "confirmed" for row in live)
            wait_until(lambda: "completed" in _text(browser, "run-status"))
