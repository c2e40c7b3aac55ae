"""Many runs at once on one SQLite file: step rate of 32 concurrent runs against one run.

Each run is N no-op effect steps (intent and outcome both committed, synchronous=FULL). The 32
runs execute in 32 threads of one process on one `Daybook`; their commits are shared by group
commit (one fsync covers every write queued while the previous commit was in flight), and no
write returns before the commit holding it is durable.

    python benchmarks/concurrency.py [--quick] [--runs K] [--n N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import daybook
from daybook import Daybook


@daybook.tool
def noop(*, i: int, idempotency_key: str) -> dict[str, int]:
    return {"i": i}


@daybook.workflow(name="bench_concurrency")
def steps(ctx: daybook.Context, n: int) -> int:
    for i in range(n):
        ctx.effect(noop, i=i)
    return n


def _rate(url: str, runs: int, n: int) -> tuple[float, float]:
    """Steps per second with `runs` concurrent runs of n steps; and the mean batch size."""
    with Daybook(url) as book:
        group = getattr(book.store, "_group", None)
        commits0 = group.commits if group else 0
        writes0 = group.writes if group else 0
        ids = [uuid.uuid4().hex for _ in range(runs)]
        errors: list[BaseException] = []

        def one(rid: str) -> None:
            try:
                book.run(steps, n, run_id=rid)
            except BaseException as exc:  # surfaced below: a failed run invalidates the figure
                errors.append(exc)

        threads = [threading.Thread(target=one, args=(rid,)) for rid in ids]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        took = time.perf_counter() - start
        if errors:
            raise errors[0]
        batch = 1.0
        if group and group.commits > commits0:
            batch = (group.writes - writes0) / (group.commits - commits0)
    return runs * n / took, batch


def measure(quick: bool = False, repeats: int | None = None, n: int | None = None) -> list[dict[str, Any]]:
    repeats = repeats or (3 if quick else 5)
    n = n or (200 if quick else 500)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="daybook-conc-") as tmp:
        results: dict[int, list[float]] = {1: [], 32: []}
        batches: dict[int, list[float]] = {1: [], 32: []}
        for r in range(repeats):
            for runs in (1, 32):
                url = f"sqlite:///{Path(tmp) / f'c{runs}-{r}.db'}"
                rate, batch = _rate(url, runs, n if runs == 1 else max(50, n // 4))
                results[runs].append(rate)
                batches[runs].append(batch)
        base = statistics.median(results[1])
        for runs in (1, 32):
            med = statistics.median(results[runs])
            rows.append(
                {
                    "system": "daybook",
                    "backend": "sqlite",
                    "measure": f"concurrent_runs_{runs}",
                    "durability": "synchronous=FULL",
                    "n": n if runs == 1 else max(50, n // 4),
                    "runs": repeats,
                    "concurrent_runs": runs,
                    "steps_per_s": round(med, 1),
                    "us_per_step": round(1e6 / med, 2),
                    "min": round(1e6 / max(results[runs]), 2),
                    "max": round(1e6 / min(results[runs]), 2),
                    "speedup_vs_1_run": round(med / base, 2),
                    "mean_commit_batch": round(statistics.median(batches[runs]), 1),
                }
            )
    return rows


def targets(rows: list[dict[str, Any]]) -> list[str]:
    by = {r["concurrent_runs"]: r for r in rows if r.get("measure", "").startswith("concurrent_runs")}
    if 32 not in by:
        return []
    x = by[32]["speedup_vs_1_run"]
    return [
        f"{'PASS' if x >= 5 else 'MISS'}  32 concurrent runs on one SQLite file reach >= 5x "
        f"the step rate of one run: {x}x (mean commit batch {by[32]['mean_commit_batch']})"
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--runs", type=int, default=None, help="repeats per cell")
    parser.add_argument("--n", type=int, default=None, help="steps per run (single run)")
    parser.add_argument("--json", default=None)
    opts = parser.parse_args()
    rows = measure(opts.quick, opts.runs, opts.n)
    for r in rows:
        print(
            f"{r['concurrent_runs']:>3} runs: {r['steps_per_s']:>9.0f} steps/s "
            f"({r['us_per_step']} us/step, {r['speedup_vs_1_run']}x, "
            f"batch {r['mean_commit_batch']})"
        )
    for line in targets(rows):
        print(line)
    if opts.json:
        Path(opts.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    sys.exit(main())
