"""The web inspector on a big store, in headless Chromium, against reading the same rows.

Issue 30, item 8: with the store's count and page queries, the runs list paints in at most
300 ms on 10,000 runs, and a 10,000-step run's timeline in at most 1 s.

A store (SQLite, and PostgreSQL when reachable) gets N runs (completed, parked and suspended,
of three workflows), one run of N steps (decisions and effects, 1.25 N journal rows) and one
of N decisions left waiting (`live`, for the live viewers below), built
through the public API (`book.run`: every row written by daybook's own journal, no bulk path
around it): on SQLite one handle at `synchronous=normal`, about 4 s for N = 10,000 on an idle
machine; on PostgreSQL 8 handles in threads with `synchronous_commit=off` (`fill`). `daybook web`
serves it (uvicorn, its own process); a headless Chromium (Debian's `chromium` and
`chromium-driver`, as tests/webtools.py) opens each page, after one warm-up navigation, and
reads from the browser's own clocks (milliseconds from the navigation's start, the server's time
included):

- the runs list `/` (and a page deep in it, `/?page=K`): first contentful paint
  (`performance.getEntriesByName('first-contentful-paint')`) and the moment the list's table
  `#runs` is in the document (for the N-step run's own page `/runs/long`, reported beside its
  journal's read: its table `#timeline`) (a MutationObserver set before the page loads, through the
  DevTools protocol: no script in the page); floor: what the page reads, the first page of 50
  headers and the counts by status (`store.runs_page({}, 50)` + `store.run_counts({})`);
- every registered view of the N-step run (`daybook.web.views.names()`), `/runs/long?view=NAME`
  until `#view[data-ready="1"]` (the view's script has drawn it); floor: reading its journal
  (`book.journal("long")`). The timeline's is judged against its goal, the others are reported.
  Until the timeline view is registered, its row says "timeline view not present" and is
  skipped.

- 64 idle live viewers of the `live` run (half on its journal stream `/runs/live/events`, half on
  its chunk streams `/runs/live/streams/*`, as pages left open in browsers): the inspector's CPU
  over 5 s and the runs list's time to HTML, against the same with no viewer (audit R13: each
  viewer once reloaded the whole journal every 0.25 s).

Each figure is printed beside its floor, measured in the same process and session, as a ratio.
Also printed: the time to the whole HTML over HTTP (`served_ms`, urllib, no browser) and, for
a view, to its JSON (`data_ms`, `/api/views/NAME?run=long`).

    python benchmarks/web.py [--quick] [--n N] [--no-postgres] [--json PATH] [--db FILE]

`--quick`: fewer navigations (3, not 5), N kept at 10,000 (benchmarks/run.py --quick calls
`measure(True)`); `--n 200` is the smoke size tests/test_bench_web.py runs (no figure judged).
`--db FILE` keeps the filled SQLite store (filled when missing), so two versions of daybook
(PYTHONPATH) can serve the same store in turn. `measure(quick)` and `targets(rows)` are what
benchmarks/run.py prints.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import daybook
from daybook import Daybook
from daybook.errors import RunParked

N = 10_000  # runs, and steps of the long run (the goals' size; --quick keeps it)
PAGE = 50  # runs per page of the list (web/pages.py)
LIST_MS = 300.0
TIMELINE_MS = 1000.0
PG_URL = os.environ.get("DAYBOOK_BENCH_PG", "postgresql://127.0.0.1:5432/test")
TIMELINE = "timeline"


@daybook.tool(idempotent=True)
def note(*, i: int, idempotency_key: str) -> int:
    return i


@daybook.workflow(name="bench_web_one")
def one(ctx: daybook.Context, i: int) -> int:
    return int(ctx.decide("pick", lambda: i).value)


@daybook.workflow(name="bench_web_failing")
def failing(ctx: daybook.Context, i: int) -> int:
    ctx.decide("pick", lambda: i)
    raise ValueError(f"run {i} fails (one in ten does): parked")


@daybook.workflow(name="bench_web_waiting")
def waiting(ctx: daybook.Context, i: int) -> int:
    ctx.decide("pick", lambda: i)
    ctx.wait_for("approval", timeout=30 * 86400)  # suspends: the list shows waiting runs too
    return i


@daybook.workflow(name="bench_web_long")
def long(ctx: daybook.Context, n: int) -> int:
    """N steps: three decisions, then an effect (its intent and its outcome rows), and so on."""
    total = 0
    for i in range(n):
        if i % 4 == 3:
            total += ctx.effect(note, i=i)
        else:
            total += int(ctx.decide("step", lambda i=i: i).value)
    return total


@daybook.workflow(name="bench_web_live")
def live(ctx: daybook.Context, n: int) -> int:
    """N decisions, then a wait: a long run left live, for the live viewers to watch."""
    for i in range(n):
        ctx.decide("step", lambda i=i: i)
    ctx.wait_for("more", timeout=30 * 86400)
    return n


FILLERS = 8  # PostgreSQL: handles filling in parallel threads (SQLite takes one writer at a time)


def fill(url: str, n: int) -> None:
    """N runs of one decision (one in ten parked, one in ten suspended), the N-step run, and a
    run of N decisions left suspended (live), all through `book.run`. On PostgreSQL, FILLERS
    handles write in threads, the long runs beside the short ones, in sessions that do not wait
    for the WAL flush at commit (`synchronous_commit=off`: what is measured is reading the rows,
    not how fast they were written; on a loaded machine the fill took minutes otherwise)."""
    if url.startswith("sqlite"):
        _fill_part(url, range(n), n, ("long", "live"))
        return
    parts: list[tuple[range | list[int], tuple[str, ...]]] = [([], ("long",)), ([], ("live",))]
    parts += [(range(k, n, FILLERS), ()) for k in range(FILLERS)]
    before = os.environ.get("PGOPTIONS")
    os.environ["PGOPTIONS"] = "-c synchronous_commit=off"  # read by libpq at connect
    try:
        with Daybook(url):  # the schema, created once before the threads race to
            pass
        threads = [threading.Thread(target=_fill_part, args=(url, ids, n, big)) for ids, big in parts]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        if before is None:
            os.environ.pop("PGOPTIONS", None)
        else:
            os.environ["PGOPTIONS"] = before
    with Daybook(url) as book:  # a thread that failed left its runs out: say so, not measure less
        found = sum(book.store.run_counts({}).values())
        if found != n + 2:
            raise RuntimeError(f"filled {found} runs, not {n + 2}: a filling thread failed")


def _fill_part(url: str, ids: range | list[int], n: int, big: tuple[str, ...]) -> None:
    with Daybook(url) as book:
        book.inline_wait = 0.0
        for i in ids:
            flow = failing if i % 10 == 3 else waiting if i % 10 == 7 else one
            with contextlib.suppress(RunParked, daybook.Suspended):
                book.run(flow, i, run_id=f"run-{i:06d}")
        if "long" in big:
            book.run(long, n, run_id="long")
        if "live" in big:
            with contextlib.suppress(daybook.Suspended):
                book.run(live, n, run_id="live")


def timed(fn: Callable[[], Any], repeat: int) -> float:
    """Median milliseconds of `fn()`, after one call that warms caches."""
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=120) as resp:
        return bytes(resp.read())


# Set before any page script runs (Page.addScriptToEvaluateOnNewDocument: a DevTools script, not
# the page's, so the CSP that forbids inline scripts does not apply): the moment `#runs` is in the
# document and the moment `#view` gets data-ready="1", in ms from the navigation's start.
WATCH = """
window.__bench = {};
new MutationObserver(() => {
  const b = window.__bench;
  const table = document.getElementById('runs') || document.getElementById('timeline');
  if (b.table === undefined && table) b.table = performance.now();
  const v = document.getElementById('view');
  if (b.ready === undefined && v && v.getAttribute('data-ready') === '1') b.ready = performance.now();
}).observe(document, {childList: true, subtree: true, attributes: true, attributeFilter: ['data-ready']});
"""
READ = """
const fcp = performance.getEntriesByName('first-contentful-paint');
const nav = performance.getEntriesByType('navigation')[0];
const ended = (part) => {
  const r = performance.getEntriesByType('resource').filter((e) => e.name.includes(part));
  return r.length ? r[r.length - 1].responseEnd : null;
};
return {fcp: fcp.length ? fcp[0].startTime : null, table: window.__bench.table ?? null,
        ready: window.__bench.ready ?? null, response: nav ? nav.responseEnd : null,
        loaded: nav && nav.loadEventEnd > 0 ? nav.loadEventEnd : null,
        data: ended('/api/views/'), chart_js: ended('/static/vendor/')};
"""


def browser_path() -> tuple[str, str] | None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium as tests/webtools.py starts it, with the watcher above on every page."""
    found = browser_path()
    assert found is not None
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = found[0]
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(found[1]), options=options)
    try:
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": WATCH})
        yield driver
    finally:
        driver.quit()


def navigate(driver: Any, url: str, want: str, limit: float = 60.0) -> dict[str, float | None]:
    """Open `url` and wait until the figure `want` (fcp, table, ready) is recorded; the page's clocks."""
    driver.get(url)
    deadline = time.monotonic() + limit
    while True:
        got = driver.execute_script(READ)
        if got[want] is not None and got["fcp"] is not None:
            return {k: None if v is None else float(v) for k, v in got.items()}
        if time.monotonic() > deadline:
            raise RuntimeError(f"{url}: no {want} in {limit:.0f} s (got {got})")
        time.sleep(0.02)


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


VIEWERS = 64  # live viewers: half on the live run's journal stream, half on its chunk streams


class Viewers:
    """K idle live viewers of the `live` run (Server-Sent Event streams held open, read in
    threads), as browsers on its page: half on `/runs/live/events`, half on `/runs/live/streams/*`."""

    def __init__(self, base: str, k: int) -> None:
        host, port = base.removeprefix("http://").split(":")
        self.socks: list[socket.socket] = []
        self.got = [0] * k
        paths = ["/runs/live/events?after=999999999", "/runs/live/streams/*?after=0"]
        for i in range(k):
            sock = socket.create_connection((host, int(port)), timeout=30)
            request = (
                f"GET {paths[i % 2]} HTTP/1.1\r\nHost: {host}:{port}\r\nAccept: text/event-stream\r\n\r\n"
            )
            sock.sendall(request.encode())
            self.socks.append(sock)
        self.threads = [threading.Thread(target=self._read, args=(i,), daemon=True) for i in range(k)]
        for t in self.threads:
            t.start()

    def _read(self, i: int) -> None:
        try:
            while data := self.socks[i].recv(65536):
                self.got[i] += len(data)
        except OSError:
            pass

    def close(self) -> None:
        for sock in self.socks:
            sock.close()


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def live_row(backend: str, n: int, repeat: int, base: str, pid: int) -> dict[str, Any]:
    """The inspector's CPU and the runs list's time to HTML with K idle live viewers of a live
    N-row run, against the same with none (R13: each viewer once reloaded the whole journal every
    0.25 s; one shared reader per run and per stream reads only what is new)."""
    window = 5.0 if n >= N else 1.0  # seconds of CPU counted (the smoke size: a short look)
    repeat = max(repeat, 15)  # the list is served in milliseconds: enough fetches for a median

    def cpu_pct() -> float:
        c, t = cpu_seconds(pid), time.perf_counter()
        time.sleep(window)
        return 100 * (cpu_seconds(pid) - c) / (time.perf_counter() - t)

    idle_cpu = cpu_pct()
    idle_ms = timed(lambda: fetch(base + "/"), repeat)
    viewers = Viewers(base, VIEWERS)
    try:
        time.sleep(window / 2)  # every viewer's first read done
        busy_cpu = cpu_pct()
        busy_ms = timed(lambda: fetch(base + "/"), repeat)
        streaming = sum(1 for g in viewers.got if g > 0)
    finally:
        viewers.close()
    return {
        "system": "daybook",
        "backend": backend,
        "n": n,
        "measure": "live_viewers",
        "page": f"{VIEWERS} live viewers",
        "viewers": VIEWERS,
        "streaming": streaming,
        "cpu_pct": round(busy_cpu, 1),
        "idle_cpu_pct": round(idle_cpu, 1),
        "served_ms": round(busy_ms, 1),
        "floor_ms": round(idle_ms, 2),
        "floor": "the runs list with no viewer",
        "ratio": round(busy_ms / idle_ms, 1),
    }


def view_names() -> list[str]:
    """The registered views (the server runs the same daybook: the same PYTHONPATH)."""
    from daybook.web import views

    return views.names()


@contextmanager
def store(backend: str, db: str | None) -> Iterator[str]:
    """A store's URL for this sitting: a temporary SQLite file (or `db`), or a fresh PostgreSQL
    schema dropped afterwards."""
    if backend == "sqlite":
        folder = tempfile.mkdtemp(prefix="daybook-bench-web-") if db is None else None
        path = Path(db) if db is not None else Path(folder or ".") / "web.db"
        try:
            yield f"sqlite:///{path}?synchronous=normal"
        finally:
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)
        return
    import psycopg

    schema = f"bench_web_{uuid.uuid4().hex[:8]}"
    try:
        yield f"{PG_URL}{'&' if '?' in PG_URL else '?'}schema={schema}"
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def pg_reachable() -> str | None:
    """None if PostgreSQL answers at PG_URL, else why not."""
    try:
        import psycopg

        psycopg.connect(PG_URL, connect_timeout=3).close()
        return None
    except Exception as exc:  # any failure to connect is a reason to skip
        return f"PostgreSQL at {PG_URL} unreachable: {type(exc).__name__}"


def measure_backend(backend: str, n: int, repeat: int, db: str | None = None) -> list[dict[str, Any]]:
    with store(backend, db) as url:
        if backend != "sqlite" or db is None or not Path(db).exists():
            t = time.perf_counter()
            fill(url, n)
            print(
                f"[{backend}] filled {n:,} runs and a run of {n:,} steps in {time.perf_counter() - t:.1f}s",
                file=sys.stderr,
            )
        with Daybook(url) as book:
            floor_list = timed(lambda: (book.store.runs_page({}, PAGE, 0), book.store.run_counts({})), repeat)
            deep = max(n // PAGE // 2, 1)
            floor_deep = timed(
                lambda: (book.store.runs_page({}, PAGE, (deep - 1) * PAGE), book.store.run_counts({})), repeat
            )
            floor_journal = timed(lambda: book.journal("long"), repeat)
            rows_long = len(book.journal("long"))
        server, base = _serve(url)
        try:
            rows = _pages(backend, n, repeat, base, deep, floor_list, floor_deep, floor_journal, rows_long)
            return [*rows, live_row(backend, n, repeat, base, server.pid)]
        finally:
            server.terminate()
            server.wait()


def browse(
    base: str, pages: dict[str, tuple[str, str]], repeat: int
) -> dict[str, list[dict[str, float | None]]]:
    """Each page's clocks in `repeat` navigations (after a warm-up one each), in turn: `pages`
    maps a name to its URL and the figure to wait for (table, ready)."""
    painted: dict[str, list[dict[str, float | None]]] = {name: [] for name in pages}
    with chromium() as driver:
        navigate(driver, base + "/", "table")  # warm-up: the browser's first page
        for u, want in pages.values():
            navigate(driver, u, want)
        for _ in range(repeat):
            for name, (u, want) in pages.items():
                painted[name].append(navigate(driver, u, want))
    return painted


def _pages(
    backend: str,
    n: int,
    repeat: int,
    base: str,
    deep: int,
    floor_list: float,
    floor_deep: float,
    floor_journal: float,
    rows_long: int,
) -> list[dict[str, Any]]:
    common = {"system": "daybook", "backend": backend, "n": n}
    listed = f"store.runs_page({PAGE} headers) + store.run_counts"
    journal = "book.journal(run) of its rows"
    # (page, URL, floor, what the floor reads, goal): the runs list, judged; the long run's own
    # page (its journal's last 500 rows and its books), reported.
    lists = [
        ("runs list, page 1", base + "/", floor_list, listed, LIST_MS),
        (f"runs list, page {deep}", f"{base}/?page={deep}", floor_deep, listed, LIST_MS),
        (f"run page, {n:,} steps", f"{base}/runs/long", floor_journal, journal, None),
    ]
    names = view_names()  # every registered view of the long run; the timeline's is judged
    shown = {f"{name}, {n:,} steps": (f"{base}/runs/long?view={name}", name) for name in names}
    served = {name: timed(lambda u=u: fetch(u), repeat) for name, u, *_ in lists}
    data: dict[str, float] = {}
    for page, (u, name) in shown.items():
        served[page] = timed(lambda u=u: fetch(u), repeat)
        data[page] = timed(lambda name=name: fetch(f"{base}/api/views/{name}?run=long"), repeat)
    no_browser = browser_path() is None
    pages = {name: (u, "table") for name, u, *_ in lists} | {p: (u, "ready") for p, (u, _) in shown.items()}
    painted = {} if no_browser else browse(base, pages, repeat)

    def median(name: str, key: str) -> float | None:
        got = [p[key] for p in painted.get(name, []) if p[key] is not None]
        return round(statistics.median(got), 1) if got else None

    rows = []
    for name, _, floor, reads, goal in lists:
        fcp = median(name, "fcp")
        measure = (
            "web_run_page"
            if name.startswith("run page")
            else "web_" + name.replace(",", "").replace(" ", "_")
        )
        rows.append(
            {
                **common,
                "measure": measure,
                "page": name,
                "served_ms": round(served[name], 1),
                "first_paint_ms": fcp,
                "table_ms": median(name, "table"),
                "floor_ms": round(floor, 2),
                "floor": reads,
                "ratio": None if fcp is None else round(fcp / floor, 1),
                "goal_ms": goal,
                "browser": not no_browser,
            }
        )
    floor_row = {
        "journal_rows": rows_long,
        "floor_ms": round(floor_journal, 2),
        "floor": "book.journal(run) of its rows",
    }
    if TIMELINE not in names:
        rows.append(
            {
                **common,
                **floor_row,
                "measure": "web_view_timeline",
                "page": f"{TIMELINE}, {n:,} steps",
                "goal_ms": TIMELINE_MS,
                "skipped": True,
                "reason": "timeline view not present (views.names())",
            }
        )
    for page, (_, name) in shown.items():
        ready = median(page, "ready")
        rows.append(
            {
                **common,
                **floor_row,
                "measure": f"web_view_{name}",
                "page": page,
                "view": name,
                "served_ms": round(served[page], 1),
                "data_ms": round(data[page], 1),
                "first_paint_ms": median(page, "fcp"),
                # Where the time went, in the browser's clocks: the HTML, its JSON and the chart
                # library each received (the view's script draws once it has both).
                "html_end_ms": median(page, "response"),
                "data_end_ms": median(page, "data"),
                "chart_js_end_ms": median(page, "chart_js"),
                "ready_ms": ready,
                "ratio": None if ready is None else round(ready / floor_journal, 1),
                "goal_ms": TIMELINE_MS if name == TIMELINE else None,
                "browser": not no_browser,
            }
        )
    return rows


def measure(
    quick: bool = False, db: str | None = None, n: int = N, postgres: bool = True
) -> list[dict[str, Any]]:
    repeat = 3 if quick else 5
    rows = measure_backend("sqlite", n, repeat, db)
    why = pg_reachable() if postgres else "--no-postgres"
    if why is None:
        rows += measure_backend("postgresql", n, repeat)
    else:
        rows.append(
            {
                "system": "daybook",
                "backend": "postgresql",
                "measure": "web",
                "n": n,
                "skipped": True,
                "reason": why,
            }
        )
    return rows


def _figure(r: dict[str, Any]) -> tuple[float | None, str]:
    if r.get("ready_ms") is not None:
        return r["ready_ms"], "drawn (data-ready)"
    if r.get("first_paint_ms") is not None:
        return r["first_paint_ms"], "first paint"
    return None, ""


def targets(rows: list[dict[str, Any]]) -> list[str]:
    out = []
    for r in rows:
        if not str(r.get("measure", "")).startswith("web_") or r.get("goal_ms") is None:
            continue
        goal = r["goal_ms"]
        what = f"[{r['backend']}] {r['page']} on {r['n']:,} runs <= {goal:,.0f} ms"
        ms, how = _figure(r)
        if r.get("skipped"):
            out.append(f"SKIP  {what}: {r['reason']}")
        elif r["n"] < N:
            out.append(f"SKIP  {what}: measured at n={r['n']:,} (smoke size)")
        elif ms is None:
            out.append(f"SKIP  {what}: no headless Chromium (served in {r.get('served_ms')} ms)")
        else:
            verdict = "PASS" if ms <= goal else "MISS"
            out.append(
                f"{verdict}  {what}: {how} {ms:,.0f} ms, {ms / r['floor_ms']:.0f}x reading the same rows "
                f"from the store ({r['floor']}: {r['floor_ms']:.1f} ms)"
            )
    return out


def _cell(v: Any, fmt: str = "{:.0f}") -> str:
    return "-" if v is None else fmt.format(v)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="3 navigations per page, not 5")
    parser.add_argument("--n", type=int, default=N, help="runs, and steps of the long run (smoke: 200)")
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--json", default=None)
    parser.add_argument("--db", default=None, help="a SQLite store file to keep (filled when missing)")
    args = parser.parse_args()
    rows = measure(args.quick, args.db, args.n, not args.no_postgres)
    print(
        f"daybook from {os.path.dirname(daybook.__file__)}; headless Chromium: {browser_path() is not None}"
    )
    print(
        f"{'backend':<11} {'page':<26} {'served':>7} {'json':>6} {'paint':>7} {'table':>7} {'drawn':>7} "
        f"{'floor':>8} {'ratio':>7} {'goal':>6}   (ms; ratio = paint or drawn / floor)"
    )
    for r in rows:
        if r.get("skipped"):
            print(f"{r['backend']:<11} {r.get('page', r['measure']):<26} skipped: {r['reason']}")
            continue
        if r["measure"] == "live_viewers":
            continue
        print(
            f"{r['backend']:<11} {r['page']:<26} {_cell(r['served_ms']):>7} {_cell(r.get('data_ms')):>6} "
            f"{_cell(r['first_paint_ms']):>7} "
            f"{_cell(r.get('table_ms')):>7} {_cell(r.get('ready_ms')):>7} {r['floor_ms']:>8.2f} "
            f"{_cell(r.get('ratio'), '{:.1f}x'):>7} {_cell(r['goal_ms']):>6}"
        )
    for r in rows:
        if r.get("view") and r.get("ready_ms") is not None:
            print(
                f"{r['backend']:<11} {r['view']}: HTML received at {_cell(r['html_end_ms'])} ms, its JSON at "
                f"{_cell(r['data_end_ms'])} ms, the chart library at {_cell(r['chart_js_end_ms'])} ms, "
                f"drawn at {_cell(r['ready_ms'])} ms"
            )
    for r in rows:
        if r["measure"] == "live_viewers":
            print(
                f"{r['backend']:<11} {r['viewers']} idle live viewers of a live run of {r['n']:,} rows "
                f"({r['streaming']} streaming): inspector CPU {r['cpu_pct']:.0f}% of a core (none: "
                f"{r['idle_cpu_pct']:.0f}%); runs list served in {r['served_ms']:.0f} ms, {r['ratio']:.1f}x "
                f"the {r['floor_ms']:.0f} ms with no viewer"
            )
    for line in targets(rows):
        print(line)
    if args.json:
        Path(args.json).write_text(json.dumps({"n": args.n, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
