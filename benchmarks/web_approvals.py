"""The approvals inbox (`/approvals`, `Daybook.approvals`) with one waiting run of 20,000 rows.

`python benchmarks/web_approvals.py [--rows N] [--repeat K]`: fills a SQLite store with a run
that records N decisions and then waits at a gate, and prints the median time of K reads of the
inbox (the API and the page), beside reading that run's whole journal. The inbox reads only the
rows its gates are made of (`store.load_named`), so it does not grow with the waiting run.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import time
from pathlib import Path

from starlette.testclient import TestClient

import daybook
from daybook import Daybook
from daybook.errors import Suspended
from daybook.web import build


@daybook.workflow(name="bench_long_gate")
def long_gate(ctx: daybook.Context, rows: int) -> str:
    for i in range(rows):
        ctx.decide(f"s{i}", lambda i=i: i)
    return str(ctx.gate("refund", approvers=["alice"], timeout=86400).outcome)


def _median(fn: object, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, Daybook(f"sqlite:///{Path(tmp) / 'gates.db'}") as book:
        book.inline_wait = 0.05
        with contextlib.suppress(Suspended):
            book.run(long_gate, args.rows, run_id="long")
        rows = len(book.journal("long"))
        assert len(book.approvals()) == 1
        client = TestClient(build(book))
        api = _median(book.approvals, args.repeat)
        page = _median(lambda: client.get("/approvals"), args.repeat)
        journal = _median(lambda: book.store.load("long"), args.repeat)
    print(f"daybook from {daybook.__file__}")
    print(f"one waiting run of {rows} rows: Daybook.approvals {api:.1f} ms, GET /approvals {page:.1f} ms")
    print(f"(reading that run's whole journal: {journal:.1f} ms)")


if __name__ == "__main__":
    main()
