"""Queue throughput: runs taken from a queue by 1 and 4 worker processes, against the same runs
submitted with a plain `book.submit` (no queue).

N runs (default 400, ``--quick`` 100) of 2 no-op effects each are submitted, then `daybook
worker --until-idle` processes execute them. The time is from the first journal row any worker
wrote to the last run's end, so the workers' Python start-up is not counted (`with_startup_s`
has it). The queue has a concurrency limit (16) that does not bind: what is measured is the
cost of the queued claim (every limit checked in the claim statement, and on PostgreSQL the
queue's row lock taken first) against the plain claim. Reported per backend: runs per second
for each case and the ratio queued / plain.

    python benchmarks/queues.py [--quick] [--n N] [--no-postgres] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from daybook import Daybook

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

from noop_app import bench_noop_steps  # noqa: E402

PG = os.environ.get("DAYBOOK_BENCH_PG", "postgresql://127.0.0.1:5432/test")
EFFECTS = 2


def _case(url: str, workers: int, runs: int, queued: bool) -> dict[str, Any]:
    with Daybook(url) as book:
        if queued:
            book.queue("bench", concurrency=16)
        for i in range(runs):
            extra: dict[str, Any] = {"queue": "bench"} if queued else {}
            book.submit(bench_noop_steps, EFFECTS, run_id=f"q-{i:05d}", **extra)
    cmd = [sys.executable, "-m", "daybook", "worker", "--db", url, "--app", str(HERE / "noop_app.py"),
           "--poll", "0.01", "--until-idle", "--quiet", "--no-schedules"]  # fmt: skip
    if queued:
        cmd += ["--queue", "bench"]
    start = time.perf_counter()
    procs = [subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for _ in range(workers)]
    for p in procs:
        _, err = p.communicate(timeout=900)
        if p.returncode != 0:
            raise SystemExit(f"worker failed: {err.decode()[-2000:]}")
    process_s = time.perf_counter() - start
    with Daybook(url) as book:
        finished = book.runs("completed", limit=1_000_000)
        first = min(book.journal(r.run_id)[1].at for r in finished)
        took = max(r.updated_at for r in finished) - first
    return {
        "system": "daybook",
        "measure": f"{'queued' if queued else 'plain'}_{workers}_workers",
        "workers": workers,
        "queued": queued,
        "n": runs,
        "completed": len(finished),
        "wall_s": round(took, 2),
        "with_startup_s": round(process_s, 2),
        "runs_per_s": round(len(finished) / took, 1),
    }


def _store(backend: str) -> tuple[str, str | None]:
    """A fresh store for one case: (url, PostgreSQL schema to drop afterwards)."""
    if backend == "sqlite":
        return f"sqlite:///{tempfile.mkdtemp()}/q.db", None
    schema = f"bench_q_{uuid.uuid4().hex[:8]}"
    return f"{PG}{'&' if '?' in PG else '?'}schema={schema}", schema


def _drop(schema: str | None) -> None:
    if schema is None:
        return
    import psycopg

    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')  # type: ignore[arg-type]


def measure(runs: int, no_postgres: bool = False) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for backend in ["sqlite"] + ([] if no_postgres else ["postgresql"]):
        by: dict[tuple[int, bool], dict[str, Any]] = {}
        for workers in (1, 4):
            for queued in (False, True):
                url, schema = _store(backend)
                try:
                    row = _case(url, workers, runs, queued)
                finally:
                    _drop(schema)
                row["backend"] = backend
                by[(workers, queued)] = row
                rows.append(row)
        for workers in (1, 4):
            q, p = by[(workers, True)], by[(workers, False)]
            q["ratio_to_plain"] = round(q["runs_per_s"] / p["runs_per_s"], 2)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--n", type=int, default=None)
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--json", default=None)
    opts = parser.parse_args()
    runs = opts.n or (100 if opts.quick else 400)
    rows = measure(runs, opts.no_postgres)
    print(f"{'backend':<11} {'case':<20} {'runs':>5} {'wall s':>7} {'runs/s':>8} {'queued/plain':>13}")
    for r in rows:
        ratio = r.get("ratio_to_plain", "")
        line = f"{r['backend']:<11} {r['measure']:<20} {r['completed']:>5} {r['wall_s']:>7} "
        print(line + f"{r['runs_per_s']:>8} {ratio!s:>13}")
    if opts.json:
        Path(opts.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
