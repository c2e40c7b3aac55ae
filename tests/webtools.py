"""Helpers for the web inspector's tests: a real `daybook web` server process, signing in."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def web_server(db_url: str, *extra: str) -> Iterator[str]:
    """`daybook web --db URL` in its own process (uvicorn on 127.0.0.1); yields its base URL."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "daybook", "web", "--db", db_url, "--port", str(port), *extra],
        cwd=HERE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                # /login: open to everyone, also with --require-sign-in (where / redirects to it)
                if httpx.get(base + "/login", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                _, err = proc.communicate(timeout=10)
                raise AssertionError(f"daybook web did not start: {err}")
            time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """An ASGI app built in this process served by uvicorn on 127.0.0.1 in a thread (so a test
    can look at the app's state while real clients stream from it); yields its base URL."""
    import threading

    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{server.config.port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, "no CSRF token on the page (not signed in?)"
    return found.group(1)


def chromium() -> Any:
    """A headless Chromium driven by the system chromedriver (Debian's `chromium` and
    `chromium-driver`); the test is skipped, saying why, when they are not installed."""
    import shutil

    import pytest

    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if not browser or not driver_path:
        pytest.skip("no chromium/chromedriver (apt-get install chromium chromium-driver; .ci/run does)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # console: CSP violations
    return webdriver.Chrome(service=Service(driver_path), options=options)


def reset(driver: Any) -> None:
    """Leave a Chromium as `chromium()` starts one: the page (and its live streams) closed,
    cookies and cache cleared (for every origin: the servers of the tests share 127.0.0.1 on
    different ports), the console read empty, the window at its first size."""
    driver.get("about:blank")
    driver.execute_cdp_cmd("Network.clearBrowserCookies", {})
    driver.execute_cdp_cmd("Network.clearBrowserCache", {})
    driver.execute_cdp_cmd("Storage.clearDataForOrigin", {"origin": "*", "storageTypes": "all"})
    driver.set_window_size(1400, 1000)
    driver.get_log("browser")


# -- in the browser (`browser`, the fixture in conftest.py, is a `chromium()`) -----------------


def text_of(driver: Any, element_id: str) -> str:
    """An element's text, or "" while the page that has it is still loading."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By

    try:
        return str(driver.find_element(By.ID, element_id).text)
    except WebDriverException:
        return ""


def table_rows(driver: Any, table: str) -> list[list[str]]:
    """The cells of each body row of the table `#TABLE`, as the page shows them."""
    from selenium.webdriver.common.by import By

    return [
        [td.text for td in tr.find_elements(By.TAG_NAME, "td")]
        for tr in driver.find_elements(By.CSS_SELECTOR, f"#{table} tbody tr")
    ]


def sign_in_as(driver: Any, base: str, name: str, token: str) -> None:
    """Fills and sends the sign-in form (the caller waits for the flash it expects)."""
    from selenium.webdriver.common.by import By

    driver.get(base + "/login")
    driver.find_element(By.NAME, "name").send_keys(name)
    driver.find_element(By.NAME, "token").send_keys(token)
    driver.find_element(By.CSS_SELECTOR, "#login button").click()


def wait_drawn(driver: Any, timeout: float = 120.0) -> None:
    """Waits until the view's script has drawn it (`#view[data-ready="1"]`)."""
    from conftest import wait_until
    from selenium.webdriver.common.by import By

    wait_until(lambda: driver.find_element(By.ID, "view").get_attribute("data-ready") == "1", timeout=timeout)


def open_view(driver: Any, url: str) -> None:
    """Opens a view's page, waits until it is drawn, and checks the console said no error (a CSP
    refusal or a script error)."""
    driver.get(url)
    wait_drawn(driver, timeout=60)
    said = driver.get_log("browser")
    errors = [e for e in said if e["level"] == "SEVERE" and "favicon" not in e["message"]]
    assert errors == [], errors
