"""The web inspector on a big store: first paint and list paging.

A SQLite store gets N runs (one decision each) and one run of N steps; `daybook web` serves it
(uvicorn, its own process). Measured:

- the runs list: first page, and a page deep in the list (`?page=K`), server time to the whole
  HTML over HTTP, against the floor of reading the same runs from the store (`store.list_runs`);
- the big run's page: time to the whole HTML, against the floor of reading its journal
  (`store.load`);
- in headless Chromium (when installed): first contentful paint of the list and the run page
  (the browser's own `performance` paint entry).

    python benchmarks/web.py [--quick] [--json PATH]      # N = 10,000 (1,000 with --quick)
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import daybook
from daybook import Daybook


@daybook.workflow(name="bench_web_one")
def one(ctx: daybook.Context, i: int) -> int:
    return int(ctx.decide("pick", lambda: i).value)


@daybook.workflow(name="bench_web_long")
def long(ctx: daybook.Context, n: int) -> int:
    total = 0
    for i in range(n):
        total += int(ctx.decide("step", lambda i=i: i).value)
    return total


def fill(url: str, n: int) -> None:
    with Daybook(url) as book:
        for i in range(n):
            book.run(one, i, run_id=f"run-{i:06d}")
        book.run(long, n, run_id="long")


def timed(fn: Any, repeat: int = 5) -> float:
    """Median seconds of `fn()`."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=120) as resp:
        return bytes(resp.read())


def paint(urls: list[str]) -> dict[str, float]:
    """First contentful paint (ms) of each page in headless Chromium; {} without a browser."""
    if not shutil.which("chromium") or not shutil.which("chromedriver"):
        return {}
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    found = {}
    try:
        for url in urls:
            driver.get(url)
            script = (
                "const e = performance.getEntriesByName('first-contentful-paint');"
                " return e.length ? e[0].startTime : null"
            )
            fcp = None
            for _ in range(50):  # the entry is recorded just after the paint
                fcp = driver.execute_script(script)
                if fcp is not None:
                    break
                time.sleep(0.05)
            found[url] = float(fcp) if fcp is not None else float("nan")
    finally:
        driver.quit()
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    n = 1_000 if args.quick else 10_000
    folder = tempfile.mkdtemp(prefix="daybook-bench-web-")
    url = f"sqlite:///{folder}/web.db?synchronous=normal"
    t = time.perf_counter()
    fill(url, n)
    print(f"filled {n} runs and a run of {n} steps in {time.perf_counter() - t:.1f}s", file=sys.stderr)
    with Daybook(url) as book:
        floor_list = timed(lambda: book.store.list_runs(None, 1_000_000))
        floor_run = timed(lambda: book.store.load("long"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "daybook", "web", "--db", url, "--port", str(port)])
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                fetch(base + "/api/runs?limit=1")
                break
            except OSError:
                time.sleep(0.1)
        deep = n // 50 // 2
        pages = {
            "runs list, page 1": base + "/",
            f"runs list, page {deep}": f"{base}/?page={deep}",
            f"run of {n} steps": base + "/runs/long",
        }
        served = {name: timed(lambda u=u: fetch(u), repeat=3) for name, u in pages.items()}
        painted = paint(list(pages.values()))
    finally:
        server.terminate()
        server.wait()
    floors = {
        "runs list, page 1": floor_list,
        f"runs list, page {deep}": floor_list,
        f"run of {n} steps": floor_run,
    }
    rows = []
    for name, u in pages.items():
        rows.append(
            {
                "page": name,
                "served_ms": served[name] * 1000,
                "floor_ms": floors[name] * 1000,
                "ratio": served[name] / floors[name],
                "first_paint_ms": painted.get(u),
            }
        )
    print(f"{'page':<24} {'served ms':>10} {'store read ms':>14} {'ratio':>7} {'first paint ms':>15}")
    for r in rows:
        fcp = "-" if r["first_paint_ms"] is None else f"{r['first_paint_ms']:.0f}"
        print(f"{r['page']:<24} {r['served_ms']:>10.1f} {r['floor_ms']:>14.1f} {r['ratio']:>6.1f}x {fcp:>15}")
    if args.json:
        Path(args.json).write_text(json.dumps({"n": n, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
