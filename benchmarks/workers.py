"""Scale-out on PostgreSQL: worker processes sharing one store, one of them SIGKILLed mid-way.

1,000 runs of 20 effects each (``--quick``: 200) are submitted as pending runs; `daybook worker`
processes execute them against the bank (a real HTTP counterparty on 127.0.0.1 in this process).
With 4 workers, one is killed with SIGKILL once 30% of the runs are done; the others take its
runs over when its leases lapse. Checks: every run completes and the bank executed each key
exactly once. Reports effects per second for 1 worker and for 4, and their ratio.

    python benchmarks/workers.py [--quick] [--pg URL]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

from daybook import Daybook
from daybook.demo.bank import Bank

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

from load_app import load_run  # noqa: E402

PG = os.environ.get("DAYBOOK_BENCH_PG", "postgresql://127.0.0.1:5432/test")
EFFECTS = 20


def _count_done(book: Daybook) -> int:
    return len(book.runs("completed", limit=1_000_000))


def _case(pg: str, workers: int, runs: int, kill_one: bool) -> dict[str, Any]:
    schema = f"bench_w{workers}_{uuid.uuid4().hex[:8]}"
    url = f"{pg}{'&' if '?' in pg else '?'}schema={schema}"
    try:
        with Bank() as bank, Daybook(url) as book:
            for i in range(runs):
                book.submit(load_run, bank.url, EFFECTS, run_id=f"load-{i:05d}")
            cmd = [
                sys.executable,
                "-m",
                "daybook",
                "worker",
                "--db",
                url,
                "--app",
                str(HERE / "load_app.py"),
                "--poll",
                "0.05",
                "--lease-ttl",
                "2",
                "--quiet",
            ]
            start = time.perf_counter()
            procs = [
                subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                for _ in range(workers)
            ]
            killed_at = None
            done = 0
            deadline = time.monotonic() + 900
            while done < runs and time.monotonic() < deadline:
                time.sleep(0.2)
                done = _count_done(book)
                if kill_one and killed_at is None and done >= runs * 0.3:
                    procs[0].send_signal(signal.SIGKILL)
                    killed_at = done
            took = time.perf_counter() - start
            for p in procs:
                if p.poll() is None:
                    p.terminate()
            for p in procs:
                p.wait(timeout=30)
            stats = bank.stats()
        executions = stats["executions_by_key"]
        once = len(executions) == runs * EFFECTS and set(executions.values()) == {1}
        return {
            "system": "daybook",
            "backend": "postgresql",
            "measure": f"workers_{workers}",
            "workers": workers,
            "n": runs,
            "effects_per_run": EFFECTS,
            "runs": 1,
            "completed": done,
            "killed_worker_after": killed_at,
            "every_key_once": once,
            "duplicate_keys": sum(1 for v in executions.values() if v > 1),
            "wall_s": round(took, 2),
            "effects_per_s": round(done * EFFECTS / took, 1),
            "us_per_step": round(took * 1e6 / max(1, done * EFFECTS), 1),
        }
    finally:
        with psycopg.connect(pg, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')  # type: ignore[arg-type]


def measure(quick: bool = False, pg: str = PG) -> list[dict[str, Any]]:
    runs = 200 if quick else 1000
    try:
        psycopg.connect(pg, connect_timeout=3).close()
    except psycopg.OperationalError as exc:
        return [
            {
                "system": "daybook",
                "backend": "postgresql",
                "measure": "workers",
                "skipped": True,
                "reason": f"PostgreSQL unreachable: {exc}",
            }
        ]
    one = _case(pg, 1, runs, kill_one=False)
    four = _case(pg, 4, runs, kill_one=True)
    four["speedup_vs_1_worker"] = round(four["effects_per_s"] / one["effects_per_s"], 2)
    return [one, four]


def targets(rows: list[dict[str, Any]]) -> list[str]:
    by = {r.get("workers"): r for r in rows if r.get("measure", "").startswith("workers_")}
    if 4 not in by:
        return []
    four = by[4]
    ok = four["completed"] == four["n"] and four["every_key_once"]
    x = four["speedup_vs_1_worker"]
    # Issue 28, goal 3: N workers reach at least 0.8 x min(N, cores) x one worker.
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    need = round(0.8 * min(4, cores), 2)
    return [
        f"{'PASS' if ok else 'MISS'}  4 workers, one SIGKILLed: {four['completed']}/{four['n']} "
        f"runs finished, every key executed once: {four['every_key_once']}",
        f"{'PASS' if x >= need else 'MISS'}  4 workers reach >= 0.8 x min(4, {cores} cores) = {need:g}x "
        f"the throughput of 1: {x}x ({x / need:.2f}x the target; {four['effects_per_s']} vs "
        f"{by[1]['effects_per_s']} effects/s)",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--pg", default=PG)
    parser.add_argument("--json", default=None)
    opts = parser.parse_args()
    rows = measure(opts.quick, opts.pg)
    for r in rows:
        print(json.dumps(r))
    for line in targets(rows):
        print(line)
    if opts.json:
        Path(opts.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
