"""Take the README's screenshots of the web inspector (docs/web-*.png) in headless Chromium.

    python docs/screenshots.py

A fresh store in a temp folder gets the demo's run, a run waiting at an approval gate and a run
that raised (parked for a person); `daybook web` serves it on a free port and Selenium with the
system chromedriver signs in and photographs each page.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import daybook
from daybook import Daybook, Suspended
from daybook.demo.agent import http_json
from daybook.demo.bank import Bank

HERE = Path(__file__).parent


@daybook.workflow
def restart_api(ctx: daybook.Context) -> str:
    plan = ctx.decide("plan", lambda: {"service": "api", "why": "error rate 12% after deploy 4411"})
    verdict = ctx.gate("restart_service", decision=plan, approvers=["oncall"], about={"service": "api"})
    return "restarted" if verdict.approved else "left alone"


@daybook.tool(retry=daybook.Retry(max_attempts=2, backoff=0.01))
def pay_vendor(*, bank: str, n: int, idempotency_key: str) -> Any:
    """A payment with no status query: when its reply is lost, a person must say what happened."""
    return http_json("POST", f"{bank}/payments", {"n": n}, idempotency_key)


@daybook.workflow
def vendor_payment(ctx: daybook.Context, bank: str) -> str:
    return str(ctx.effect(pay_vendor, bank=bank, n=1)["id"])


@daybook.workflow
def nightly_report(ctx: daybook.Context) -> str:
    rows = ctx.decide("rows", lambda: [1, 2, 3]).value
    raise ValueError(f"report template expects 4 columns, got {len(rows)}")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _store(folder: str) -> tuple[str, str]:
    url = f"sqlite:///{folder}/inspector.db"
    subprocess.run([sys.executable, "-m", "daybook", "demo", "--db", url], check=True, capture_output=True)
    with Daybook(url, inline_wait=0.1) as book:
        token = book.add_approver("oncall", roles=("approver", "operator"))  # the run page's acts too
        with contextlib.suppress(Suspended):
            book.run(restart_api, run_id="sre-restart-api")
        with contextlib.suppress(daybook.DaybookError):
            book.run(nightly_report, run_id="nightly-report-2026-11-24")
        with Bank() as bank:
            bank.faults.drop_after_execute = 1  # the bank pays, the reply is lost
            with contextlib.suppress(daybook.DaybookError):
                book.run(vendor_payment, bank.url, run_id="vendor-acme-invoice-88")
    return url, token


@contextlib.contextmanager
def inspector(url: str, window: str) -> Iterator[tuple[str, Any]]:
    """`daybook web` serving the store `url` on a free port, and a headless Chromium (window size
    `window`, e.g. "1280,900") once the inspector answers: (its base URL, the driver); both are
    stopped after. docs/timeline_screenshot.py uses it too."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    port = _port()
    server = subprocess.Popen([sys.executable, "-m", "daybook", "web", "--db", url, "--port", str(port)])
    base = f"http://127.0.0.1:{port}"
    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={window}"):
        options.add_argument(arg)
    driver = webdriver.Chrome(
        service=Service(os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")), options=options
    )
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(base + "/", timeout=2)
                break
            except OSError:
                time.sleep(0.1)
        yield base, driver
    finally:
        driver.quit()
        server.terminate()
        server.wait()


def main() -> None:
    from selenium.webdriver.common.by import By

    folder = tempfile.mkdtemp(prefix="daybook-shots-")
    url, token = _store(folder)
    with inspector(url, "1280,900") as (base, driver):
        for key in ("dbk1_a-wrong-key", token):  # a refused sign-in, then the right one (the audit log)
            driver.get(base + "/login")
            driver.find_element(By.NAME, "name").send_keys("oncall")
            driver.find_element(By.NAME, "token").send_keys(key)
            driver.find_element(By.CSS_SELECTOR, "#login button").click()
            time.sleep(0.5)
        for name, path in (("runs", "/"), ("approvals", "/approvals"), ("attention", "/attention")):
            driver.get(base + path)
            driver.save_screenshot(str(HERE / f"web-{name}.png"))
        driver.get(base + "/")
        driver.find_element(By.PARTIAL_LINK_TEXT, "treasury-").click()
        time.sleep(0.5)
        driver.save_screenshot(str(HERE / "web-run.png"))
        driver.get(base + "/approvals")
        driver.find_element(By.CSS_SELECTOR, "form.approve input[name=reason]").send_keys(
            "error rate is real"
        )
        driver.find_element(By.CSS_SELECTOR, "form.approve button").click()
        time.sleep(0.5)
        driver.get(base + "/audit")
        driver.save_screenshot(str(HERE / "web-audit.png"))
    print("wrote", ", ".join(str(p) for p in sorted(HERE.glob("web-*.png"))))


if __name__ == "__main__":
    main()
