"""Many runs at once on one SQLite file: step rate of 32 concurrent runs against one run.

Each run is N no-op effect steps (intent and outcome both committed, synchronous=FULL). The 32
runs execute in 32 threads of one process on one `Daybook`; their commits are shared by group
commit (one fsync covers every write queued while the previous commit was in flight), and no
write returns before the commit holding it is durable.

1 run and 32 are alternated K times in one sitting after a warm-up; the speedup is the median of
the paired ratios. Printed with it, to say where 32 runs stand against the ideal: the load
average, the CPU per step (32 runs share one interpreter lock: 1e6 / CPU per step is their
ceiling), the share of the wall time they compute, the bare sqlite3 commit on this disk now (one
run's step is two of them plus daybook's own time), commits per step and the share of writes
committed in batches of each size.

    python benchmarks/concurrency.py [--quick] [--runs K] [--n N]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
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


def _group_of(book: Daybook) -> Any:
    """The store's group commit, under the guard that wraps the store (None if it has none)."""
    store: Any = book.store
    while store is not None:
        group = getattr(store, "_group", None)
        if group is not None:
            return group
        store = getattr(store, "inner", None)
    return None


def _cell(url: str, runs: int, n: int) -> dict[str, Any]:
    """`runs` concurrent runs of n steps: wall rate, CPU per step, commits and batch sizes."""
    with Daybook(url) as book:
        group = _group_of(book)
        commits0 = group.commits if group else 0
        writes0 = group.writes if group else 0
        batches0 = dict(group.batches) if group and hasattr(group, "batches") else {}
        ids = [uuid.uuid4().hex for _ in range(runs)]
        errors: list[BaseException] = []

        def one(rid: str) -> None:
            try:
                book.run(steps, n, run_id=rid)
            except BaseException as exc:  # surfaced below: a failed run invalidates the figure
                errors.append(exc)

        threads = [threading.Thread(target=one, args=(rid,)) for rid in ids]
        load0 = os.getloadavg()[0]
        cpu0 = time.process_time()
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        took = time.perf_counter() - start
        cpu = time.process_time() - cpu0
        if errors:
            raise errors[0]
        commits = (group.commits - commits0) if group else 0
        writes = (group.writes - writes0) if group else 0
        sizes: dict[int, int] = {}
        if group and hasattr(group, "batches"):
            sizes = {k: v - batches0.get(k, 0) for k, v in group.batches.items() if v > batches0.get(k, 0)}
            # a lone writer's commit (the solo path) is counted in `commits` only: a batch of one
            solo = commits - sum(sizes.values())
            if solo > 0:
                sizes[1] = sizes.get(1, 0) + solo
    steps_done = runs * n
    return {
        "rate": steps_done / took,
        "cpu_us": cpu * 1e6 / steps_done,
        "commits": commits,
        "writes": writes,
        "sizes": sizes,
        "load": max(load0, os.getloadavg()[0]),
    }


def _raw_commit_us(path: Path, commits: int = 100) -> float:
    """The bare sqlite3 cost of one durable commit (synchronous=FULL, WAL) on this disk now: one
    run's step is two of these plus daybook's own time; what 32 runs can gain depends on it."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = FULL")
        db.execute("CREATE TABLE IF NOT EXISTS t (v TEXT)")
        start = time.perf_counter()
        for _ in range(commits):
            db.execute("INSERT INTO t VALUES ('x')")
        return (time.perf_counter() - start) * 1e6 / commits
    finally:
        db.close()


def _spread(sizes: dict[int, int]) -> dict[str, float]:
    """Share of the writes committed in batches of each size class (1, 2-3, 4-7, ...)."""
    total = sum(k * v for k, v in sizes.items()) or 1
    out: dict[str, float] = {}
    lo = 1
    while lo <= max(sizes, default=1):
        hi = lo * 2 - 1
        w = sum(k * v for k, v in sizes.items() if lo <= k <= hi)
        if w:
            out[f"{lo}" if lo == hi else f"{lo}-{hi}"] = round(w / total, 3)
        lo *= 2
    return out


def measure(quick: bool = False, repeats: int | None = None, n: int | None = None) -> list[dict[str, Any]]:
    """1 run and 32 runs alternated in one sitting (the order swapped each repeat, after a warm-up
    of each), so a change in the machine's load falls on both: the speedup is the median of the
    paired ratios. The CPU per step shows how far 32 runs are from being CPU-bound."""
    repeats = repeats or (5 if quick else 7)
    n = n or (200 if quick else 500)
    size = {1: n, 32: max(50, n // 4)}
    cells: dict[int, list[dict[str, Any]]] = {1: [], 32: []}
    raw: list[float] = []
    with tempfile.TemporaryDirectory(prefix="daybook-conc-") as tmp:
        for runs in (1, 32):  # warm-up: imports, the first file's creation, the page cache
            _cell(f"sqlite:///{Path(tmp) / f'warm{runs}.db'}", runs, max(10, size[runs] // 10))
        for r in range(repeats):
            for runs in (1, 32) if r % 2 == 0 else (32, 1):
                url = f"sqlite:///{Path(tmp) / f'c{runs}-{r}.db'}"
                cells[runs].append(_cell(url, runs, size[runs]))
            raw.append(_raw_commit_us(Path(tmp) / "raw.db"))
    ratios = [b["rate"] / a["rate"] for a, b in zip(cells[1], cells[32], strict=True)]
    rows: list[dict[str, Any]] = []
    for runs in (1, 32):
        got = cells[runs]
        rates = [c["rate"] for c in got]
        med = statistics.median(rates)
        commits = sum(c["commits"] for c in got)
        writes = sum(c["writes"] for c in got)
        sizes: dict[int, int] = {}
        for c in got:
            for k, v in c["sizes"].items():
                sizes[k] = sizes.get(k, 0) + v
        cpu = statistics.median(c["cpu_us"] for c in got)
        rows.append(
            {
                "system": "daybook",
                "backend": "sqlite",
                "measure": f"concurrent_runs_{runs}",
                "durability": "synchronous=FULL",
                "n": size[runs],
                "runs": repeats,
                "concurrent_runs": runs,
                "steps_per_s": round(med, 1),
                "us_per_step": round(1e6 / med, 2),
                "min": round(1e6 / max(rates), 2),
                "max": round(1e6 / min(rates), 2),
                "cpu_us_per_step": round(cpu, 1),
                "speedup_vs_1_run": round(statistics.median(ratios), 2) if runs == 32 else 1.0,
                "speedups": [round(x, 2) for x in ratios] if runs == 32 else [],
                "commits_per_step": round(commits / max(1, size[runs] * runs * repeats), 3),
                "mean_commit_batch": round(writes / max(1, commits), 1),
                "batch_share_of_writes": _spread(sizes),
                "load_1min": [round(min(c["load"] for c in got), 2), round(max(c["load"] for c in got), 2)],
            }
        )
    one, many = rows
    # If 32 runs were limited by CPU alone (one core's worth: the GIL), their rate would be
    # 1e6 / cpu_us_per_step; how much of that they reach says what else they wait on.
    many["cpu_bound_speedup"] = round(one["us_per_step"] / many["cpu_us_per_step"], 2)
    # The share of the wall time 32 runs spend computing; the rest, every run waits on the disk
    # (a batch holds every run's write: none computes during its fsync).
    many["cpu_busy"] = round(many["cpu_us_per_step"] / many["us_per_step"], 2)
    one["raw_commit_us"] = round(statistics.median(raw), 1)
    return rows


def targets(rows: list[dict[str, Any]]) -> list[str]:
    by = {r["concurrent_runs"]: r for r in rows if r.get("measure", "").startswith("concurrent_runs")}
    if 32 not in by:
        return []
    x = by[32]["speedup_vs_1_run"]
    return [
        f"{'PASS' if x >= 5 else 'MISS'}  32 concurrent runs on one SQLite file reach >= 5x "
        f"the step rate of one run: {x}x (median of {by[32]['speedups']}; mean commit batch "
        f"{by[32]['mean_commit_batch']}, load {by[32]['load_1min']})"
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
            f"cpu {r['cpu_us_per_step']} us/step, "
            + (f"raw sqlite3 commit {r['raw_commit_us']} us, " if "raw_commit_us" in r else "")
            + f"{r['commits_per_step']} commits/step, "
            f"batch {r['mean_commit_batch']} {r['batch_share_of_writes']})"
        )
    for line in targets(rows):
        print(line)
    if opts.json:
        Path(opts.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
