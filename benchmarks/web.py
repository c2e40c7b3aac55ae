"""The web inspector on a big store: the runs list's first paint, against reading its rows.

A SQLite store gets N runs (one decision each) and one run of N steps; `daybook web` serves it
(uvicorn, its own process). Measured:

- the runs list: first page, and a page deep in the list (`?page=K`), server time to the whole
  HTML over HTTP, against the floor of reading the same rows from the store (the page's 50
  headers, `store.list_runs(None, 50)`; reading every header, as the list did before it read one
  page and the counts, is printed beside it);
- the big run's page: time to the whole HTML, against the floor of reading its journal
  (`store.load`);
- in headless Chromium (when installed): first contentful paint of each page (the browser's own
  `performance` paint entry, from the navigation's start: the server's time included), the
  median of 3 navigations after a warm-up one.

Target (issue 28, goal 5): the runs list paints in at most 300 ms on 10,000 runs.

    python benchmarks/web.py [--quick] [--json PATH] [--db FILE]   # N = 10,000 (quick too)

`--db FILE` keeps the filled store (filled when missing): the same store can then be served by
two versions of daybook in turn (PYTHONPATH), alternated in one sitting. `measure(quick)` and
`targets(rows)` are what benchmarks/run.py prints.
"""

from __future__ import annotations

import argparse
import json
import os
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

N = 10_000  # runs (the target's size; --quick keeps it, with fewer repeats)
PAGE = 50  # runs per page of the list (web/pages.py)
TARGET_MS = 300.0


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


def paint(urls: list[str], repeat: int) -> dict[str, float]:
    """Median first contentful paint (ms) of each page in headless Chromium; {} without one."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if not browser or not shutil.which("chromedriver"):
        return {}
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    script = (
        "const e = performance.getEntriesByName('first-contentful-paint');"
        " return e.length ? e[0].startTime : null"
    )
    found: dict[str, list[float]] = {u: [] for u in urls}
    try:
        driver.get(urls[0].split("/?")[0].rstrip("/") + "/login")  # warm-up: a browser's first page
        for _ in range(repeat):
            for url in urls:
                driver.get(url)
                fcp = None
                for _ in range(50):  # the entry is recorded just after the paint
                    fcp = driver.execute_script(script)
                    if fcp is not None:
                        break
                    time.sleep(0.05)
                found[url].append(float(fcp) if fcp is not None else float("nan"))
    finally:
        driver.quit()
    return {u: statistics.median(v) for u, v in found.items()}


def _serve(url: str) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "daybook", "web", "--db", url, "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            fetch(base + "/api/runs?limit=1")
            return server, base
        except OSError:
            if server.poll() is not None:
                raise RuntimeError("daybook web did not start") from None
            time.sleep(0.1)
    server.terminate()
    raise RuntimeError("daybook web did not answer in 60 s")


def measure(quick: bool = False, db: str | None = None) -> list[dict[str, Any]]:
    n = N
    folder = tempfile.mkdtemp(prefix="daybook-bench-web-") if db is None else None
    path = Path(db) if db is not None else Path(folder or ".") / "web.db"
    url = f"sqlite:///{path}?synchronous=normal"
    if not path.exists():
        t = time.perf_counter()
        fill(url, n)
        print(f"filled {n} runs and a run of {n} steps in {time.perf_counter() - t:.1f}s", file=sys.stderr)
    repeat = 3 if quick else 5
    try:
        with Daybook(url) as book:
            floor_page = timed(lambda: book.store.list_runs(None, PAGE), repeat)
            floor_all = timed(lambda: book.store.list_runs(None, 1_000_000), repeat)
            floor_run = timed(lambda: book.store.load("long"), repeat)
        server, base = _serve(url)
        deep = n // PAGE // 2
        pages = {
            "runs list, page 1": (base + "/", floor_page),
            f"runs list, page {deep}": (f"{base}/?page={deep}", floor_page),
            f"run of {n} steps": (base + "/runs/long", floor_run),
        }
        try:
            for u, _ in pages.values():
                fetch(u)  # warm: the server's first request of each page imports and caches
            served = {name: timed(lambda u=u: fetch(u), repeat) for name, (u, _) in pages.items()}
            painted = paint([u for u, _ in pages.values()], 3 if quick else 5)
        finally:
            server.terminate()
            server.wait()
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
    rows = []
    for name, (u, floor) in pages.items():
        fcp = painted.get(u)
        rows.append(
            {
                "system": "daybook",
                "backend": "sqlite",
                "measure": "web_" + name.replace(",", "").replace(" ", "_"),
                "page": name,
                "n": n,
                "served_ms": round(served[name] * 1000, 1),
                "floor_ms": round(floor * 1000, 2),
                "floor": "its journal read (store.load)" if "steps" in name else f"its {PAGE} headers read",
                "every_header_ms": round(floor_all * 1000, 1) if "list" in name else None,
                "ratio": round(served[name] / floor, 1),
                "first_paint_ms": None if fcp is None else round(fcp, 1),
                "paint_ratio": None if fcp is None else round(fcp / 1000 / floor, 1),
            }
        )
    return rows


def targets(rows: list[dict[str, Any]]) -> list[str]:
    out = []
    for r in rows:
        if not r.get("measure", "").startswith("web_runs_list"):
            continue
        painted = r.get("first_paint_ms")
        ms, what = (
            (painted, "first paint") if painted is not None else (r["served_ms"], "served (no browser)")
        )
        verdict = "PASS" if ms <= TARGET_MS else "MISS"
        out.append(
            f"{verdict}  the runs list ({r['page']}) on {r['n']:,} runs paints in <= {TARGET_MS:.0f} ms: "
            f"{what} {ms:.0f} ms, {ms / r['floor_ms']:.0f}x reading its {PAGE} rows from the store "
            f"({r['floor_ms']:.1f} ms; every header {r['every_header_ms']:.0f} ms)"
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None)
    parser.add_argument("--db", default=None, help="a store file to keep (filled when missing)")
    args = parser.parse_args()
    rows = measure(args.quick, args.db)
    print(f"daybook from {os.path.dirname(daybook.__file__)}")
    print(
        f"{'page':<24} {'served ms':>10} {'store read ms':>14} {'ratio':>7} "
        f"{'first paint ms':>15} {'paint ratio':>12}"
    )
    for r in rows:
        fcp = "-" if r["first_paint_ms"] is None else f"{r['first_paint_ms']:.0f}"
        pr = "-" if r["paint_ratio"] is None else f"{r['paint_ratio']:.0f}x"
        print(
            f"{r['page']:<24} {r['served_ms']:>10.1f} {r['floor_ms']:>14.2f} {r['ratio']:>6.1f}x "
            f"{fcp:>15} {pr:>12}"
        )
    for line in targets(rows):
        print(line)
    if args.json:
        Path(args.json).write_text(json.dumps({"n": rows[0]["n"], "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
