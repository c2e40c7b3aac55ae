"""What a daybook journal costs per step, against the raw-database floor under it.

Run:

    python benchmarks/journal_cost.py [--n 1000] [--runs 5] [--json PATH] [--no-postgres]

Every row times N no-op steps in this one process and reports microseconds per step: the median
of `--runs` runs after one warm-up run, with the min and max. Runs of all rows are interleaved
round-robin so that drift in the machine's speed lands on every row alike.

Rows:

- floor, sqlite3: raw `sqlite3`, WAL, autocommit connection, two commits per step (an intent
  INSERT, then an outcome INSERT, each its own transaction) of a ~200-byte JSON row into a table
  keyed by (run_id, seq); with `synchronous=FULL` (fsync per commit) and `synchronous=NORMAL`.
- floor, psycopg: raw psycopg 3 in autocommit mode, two INSERT statements per step (each its own
  commit, so one round trip and one WAL flush) into a similar table in schema `bench_floor`.
- daybook write: a workflow of N `ctx.effect(noop, i=i)` steps on SQLite FULL, SQLite NORMAL and
  PostgreSQL (each a fresh database file or schema; each run a new run id), timed around
  `book.run(...)`, so the run's start and finish records are included. `x floor` divides by the
  floor of the same backend and durability.
- daybook settled: the same workflow with `settled_noop`, a no-op whose unknown daybook settles
  by itself (a status query that answers Confirmed): its outcome is committed with the next
  step's intent (one fsync per step, issue 28 goal 2), so `x floor` is against the same
  two-commit floor (target <= 0.6). With daybook before the deferral it commits twice like `write`.
- daybook replay: a child process runs the same workflow and SIGKILLs itself after its last
  effect; a fresh `Daybook` handle then times `book.resume(run_id)`, which loads the journal,
  replays the N recorded steps without calling the tool, and completes the run. Reported per
  step and as the total wall time of the resume.
- python: the no-op tool function called N times directly, no journal.

Results are printed as a table and written as JSON (`--json`, default
benchmarks/results/journal_cost.json). PostgreSQL rows that cannot run (`--no-postgres`, no
psycopg, server unreachable) are printed and written as skipped, with the reason. The peak RSS
(VmHWM) of the measuring process is printed at the end. `--profile` instead runs one daybook
SQLite NORMAL run of `--n` steps under cProfile and prints the top 15 functions by own time.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import json
import os
import platform
import pstats
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchlib import fs_type, peak_rss_kib, scratch_dir, with_schema
from floors import FLOOR_SCHEMA, ROW_BYTES, Sampler, call_floor, pg_floor, sqlite_floor

import daybook
from daybook import Context, Daybook

try:
    import psycopg
except ImportError:  # pragma: no cover - the PostgreSQL rows are then reported as skipped
    psycopg = None  # type: ignore[assignment]

HERE = Path(__file__).resolve().parent
DEFAULT_JSON = HERE / "results" / "journal_cost.json"
DEFAULT_PG = os.environ.get("DAYBOOK_BENCH_PG", "postgresql://127.0.0.1:5432/test")
DAYBOOK_SCHEMA = "bench_daybook"
REPLAY_SCHEMA = "bench_daybook_replay"
SETTLED_SCHEMA = "bench_daybook_settled"

# Set only in the `--child-crash` process: the workflow then dies right after its last effect.
_CRASH_AFTER_EFFECTS = False


@daybook.tool
def noop(i: int, idempotency_key: str) -> dict[str, Any]:
    return {"ok": True, "i": i}


@daybook.tool(reconcile=lambda key, args: daybook.Confirmed({"ok": True, "i": args["i"]}))
def settled_noop(i: int, idempotency_key: str) -> dict[str, Any]:
    """A no-op whose unknown daybook settles by itself (its status query answers Confirmed)."""
    return {"ok": True, "i": i}


@daybook.workflow
def noop_steps(ctx: Context, n: int, settled: bool = False) -> dict[str, int]:
    tool = settled_noop if settled else noop
    for i in range(n):
        ctx.effect(tool, i=i)
    if _CRASH_AFTER_EFFECTS:
        os.kill(os.getpid(), signal.SIGKILL)
    return {"steps": n}


# -- rows ---------------------------------------------------------------------------------------


@dataclass
class Bench:
    system: str
    backend: str
    measure: str
    durability: str
    once: Sampler | None = None
    close: Callable[[], None] = lambda: None
    skip_reason: str | None = None
    seconds: list[float] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, str]:
        return (self.backend, self.durability)

    @property
    def label(self) -> str:
        return f"{self.system} {self.backend} {self.measure} {self.durability}"


def _median_us(b: Bench, n: int) -> float | None:
    return statistics.median(b.seconds) / n * 1e6 if b.seconds else None


def to_rows(benches: list[Bench], n: int) -> list[dict[str, Any]]:
    floors = {b.key: b for b in benches if b.measure == "floor"}
    lives = {b.key: b for b in benches if b.system == "daybook" and b.measure == "write"}
    rows: list[dict[str, Any]] = []
    for b in benches:
        per_step = [s / n * 1e6 for s in b.seconds]
        us = _median_us(b, n)
        row: dict[str, Any] = {
            "system": b.system,
            "backend": b.backend,
            "measure": b.measure,
            "durability": b.durability,
            "n": n,
            "us_per_step": us,
            "min": min(per_step) if per_step else None,
            "max": max(per_step) if per_step else None,
            "ratio_to_floor": None,
            "floor": None,
            "floor_us_per_step": None,
            "samples_us_per_step": per_step,
            "skipped": b.skip_reason is not None,
            "reason": b.skip_reason,
        }
        floor = floors.get(b.key) if b.measure in ("floor", "write", "settled") else None
        if floor is not None:
            row["floor"] = floor.label
            floor_us = _median_us(floor, n)
            row["floor_us_per_step"] = floor_us
            if us is not None and floor_us:
                row["ratio_to_floor"] = us / floor_us
        if b.measure == "replay":
            row["total_ms"] = statistics.median(b.seconds) * 1e3 if b.seconds else None
            live_us = _median_us(lives[b.key], n) if b.key in lives else None
            row["ratio_to_live"] = us / live_us if us is not None and live_us else None
        rows.append(row)
    return rows


def print_table(rows: list[dict[str, Any]], n: int, runs: int) -> None:
    print(f"\njournal cost: {n} no-op steps; median of {runs} runs (min-max) after 1 warm-up")
    head = (
        f"{'system':<8} {'backend':<10} {'measure':<7} {'durability':<21} "
        f"{'us/step':>9} {'min-max':>17} {'x floor':>8}  note"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        lead = f"{r['system']:<8} {r['backend']:<10} {r['measure']:<7} {r['durability']:<21} "
        if r["skipped"]:
            print(lead + f"skipped: {r['reason']}")
            continue
        spread = f"{_fmt(r['min'])}-{_fmt(r['max'])}"
        ratio = "" if r["ratio_to_floor"] is None else f"{r['ratio_to_floor']:.2f}"
        note = ""
        if r["measure"] == "replay":
            note = f"resume total {r['total_ms']:.1f} ms"
            if r["ratio_to_live"] is not None:
                note += f", {r['ratio_to_live']:.2f}x live"
        print(lead + f"{_fmt(r['us_per_step']):>9} {spread:>17} {ratio:>8}  {note}".rstrip())


def _fmt(us: float) -> str:
    return f"{us:.3f}" if us < 1 else f"{us:.2f}" if us < 100 else f"{us:.1f}"


# -- floors -------------------------------------------------------------------------------------


def python_floor(n: int) -> Sampler:
    return call_floor(noop.fn, n)


# -- daybook ------------------------------------------------------------------------------------


def daybook_write(url: str, n: int, settled: bool = False) -> tuple[Sampler, Callable[[], None]]:
    book = Daybook(url)

    def once() -> float:
        start = time.perf_counter()
        result = book.run(noop_steps, n, settled, run_id=uuid.uuid4().hex)
        elapsed = time.perf_counter() - start
        if result != {"steps": n}:
            raise RuntimeError(f"daybook run on {url} returned {result!r}")
        return elapsed

    return once, book.close


def daybook_replay(url: str, n: int) -> Sampler:
    def once() -> float:
        run_id = uuid.uuid4().hex
        crash_in_child(url, run_id, n)
        with Daybook(url) as book:
            start = time.perf_counter()
            result = book.resume(run_id)
            elapsed = time.perf_counter() - start
            events = book.journal(run_id)
        # Replay must add only the completion row: no attempt, no second outcome, no re-call.
        if result != {"steps": n} or len(events) != 2 * n + 2:
            raise RuntimeError(
                f"replay of {run_id} on {url}: result {result!r}, {len(events)} journal rows "
                f"(expected {2 * n + 2})"
            )
        return elapsed

    return once


def crash_in_child(url: str, run_id: str, n: int) -> None:
    script = str(Path(__file__).resolve())
    cmd = [sys.executable, script, "--child-crash", url, run_id, "--n", str(n)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != -signal.SIGKILL:
        raise RuntimeError(f"crash child for {url} exited {proc.returncode}, not SIGKILL:\n{proc.stderr}")


def child_crash(url: str, run_id: str, n: int) -> None:
    global _CRASH_AFTER_EFFECTS
    _CRASH_AFTER_EFFECTS = True
    Daybook(url).run(noop_steps, n, run_id=run_id)
    raise SystemExit("the workflow should have killed this process")


# -- PostgreSQL ---------------------------------------------------------------------------------


def probe_postgres(url: str, wanted: bool) -> tuple[str | None, str]:
    """(reason to skip or None, synchronous_commit setting)."""
    if not wanted:
        return "--no-postgres given", "?"
    if psycopg is None:
        return "psycopg 3 is not installed (pip install 'daybook-runtime[postgres]')", "?"
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
            row = conn.execute("SHOW synchronous_commit").fetchone()
            for schema in (FLOOR_SCHEMA, DAYBOOK_SCHEMA, REPLAY_SCHEMA, SETTLED_SCHEMA):
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    except psycopg.Error as exc:
        return f"PostgreSQL unreachable at {url}: {str(exc).strip().splitlines()[0]}", "?"
    return None, str(row[0]) if row else "?"


def drop_pg_schemas(url: str) -> None:
    if psycopg is None:
        return
    with contextlib.suppress(psycopg.Error), psycopg.connect(url, autocommit=True) as conn:
        for schema in (FLOOR_SCHEMA, DAYBOOK_SCHEMA, REPLAY_SCHEMA, SETTLED_SCHEMA):
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


# -- driver -------------------------------------------------------------------------------------


def build(n: int, workdir: Path, pg_url: str, pg_skip: str | None, pg_sync: str) -> list[Bench]:
    benches = [Bench("python", "-", "call", "-", once=python_floor(n))]
    for sync in ("FULL", "NORMAL"):
        url = f"sqlite:///{workdir / f'daybook_{sync.lower()}.db'}?synchronous={sync.lower()}"
        replay_url = url.replace("daybook_", "replay_")
        write, close = daybook_write(url, n)
        settled, settled_close = daybook_write(url.replace("daybook_", "settled_"), n, settled=True)
        benches += [
            Bench(
                "sqlite3",
                "sqlite",
                "floor",
                f"synchronous={sync}",
                once=sqlite_floor(workdir / f"floor_{sync.lower()}.db", sync, n),
            ),
            Bench("daybook", "sqlite", "write", f"synchronous={sync}", once=write, close=close),
            Bench("daybook", "sqlite", "settled", f"synchronous={sync}", once=settled, close=settled_close),
            Bench("daybook", "sqlite", "replay", f"synchronous={sync}", once=daybook_replay(replay_url, n)),
        ]
    pg = [
        Bench("psycopg", "postgresql", "floor", f"synchronous_commit={pg_sync}"),
        Bench("daybook", "postgresql", "write", f"synchronous_commit={pg_sync}"),
        Bench("daybook", "postgresql", "settled", f"synchronous_commit={pg_sync}"),
        Bench("daybook", "postgresql", "replay", f"synchronous_commit={pg_sync}"),
    ]
    if pg_skip is not None:
        for b in pg:
            b.skip_reason = pg_skip
    else:
        pg[0].once = pg_floor(pg_url, n)
        pg[1].once, pg[1].close = daybook_write(with_schema(pg_url, DAYBOOK_SCHEMA), n)
        pg[2].once, pg[2].close = daybook_write(with_schema(pg_url, SETTLED_SCHEMA), n, settled=True)
        pg[3].once = daybook_replay(with_schema(pg_url, REPLAY_SCHEMA), n)
    return benches + pg


def measure(benches: list[Bench], runs: int) -> None:
    live = [b for b in benches if b.once is not None]
    for b in live:  # warm-up, discarded
        assert b.once is not None
        b.once()
    for _ in range(runs):
        for b in live:
            assert b.once is not None
            b.seconds.append(b.once())


def profile(n: int, parent: str | None) -> None:
    with scratch_dir(parent) as workdir:
        once, close = daybook_write(f"sqlite:///{workdir / 'profile.db'}?synchronous=normal", n)
        try:
            once()  # warm-up
            prof = cProfile.Profile()
            prof.enable()
            once()
            prof.disable()
        finally:
            close()
    print(f"cProfile: one daybook SQLite NORMAL run of {n} effects, top 15 by own time")
    pstats.Stats(prof).sort_stats("tottime").print_stats(15)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--n", type=int, default=1000, help="no-op steps per run (default 1000)")
    ap.add_argument("--runs", type=int, default=5, help="timed runs after the warm-up (default 5)")
    ap.add_argument("--json", type=Path, default=DEFAULT_JSON, help="where to write the results")
    ap.add_argument("--no-postgres", action="store_true", help="skip the PostgreSQL rows")
    ap.add_argument("--pg", default=DEFAULT_PG, help=f"PostgreSQL URL (default {DEFAULT_PG})")
    ap.add_argument("--dir", default=None, help="parent of the scratch directory (default: TMPDIR)")
    ap.add_argument(
        "--profile", action="store_true", help="only profile one daybook SQLite NORMAL run of --n steps"
    )
    ap.add_argument("--child-crash", nargs=2, metavar=("URL", "RUN_ID"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.n < 1 or args.runs < 1:
        ap.error("--n and --runs must be >= 1")
    if args.child_crash:
        child_crash(args.child_crash[0], args.child_crash[1], args.n)
    if args.profile:
        profile(args.n, args.dir)
        return 0

    pg_skip, pg_sync = probe_postgres(args.pg, not args.no_postgres)
    if pg_skip is not None:
        print(f"PostgreSQL rows skipped: {pg_skip}")
    started = time.perf_counter()
    with scratch_dir(args.dir) as workdir:
        benches = build(args.n, workdir, args.pg, pg_skip, pg_sync)
        try:
            measure(benches, args.runs)
        finally:
            for b in benches:
                b.close()
        scratch_fs = fs_type(workdir)
    if pg_skip is None:
        drop_pg_schemas(args.pg)
    wall = time.perf_counter() - started

    rows = to_rows(benches, args.n)
    print_table(rows, args.n, args.runs)
    rss = peak_rss_kib()
    print(f"\nscratch files on {scratch_fs}; wall time {wall:.1f} s")
    if rss is not None:
        print(
            f"peak RSS (VmHWM) of the measuring process: {rss / 1024:.1f} MiB (replay children not included)"
        )

    meta = {
        "n": args.n,
        "runs": args.runs,
        "warmup_runs": 1,
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "psycopg": getattr(psycopg, "__version__", None),
        "daybook": daybook.__version__,
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "scratch_fs": scratch_fs,
        "row_bytes_floor": ROW_BYTES,
        "postgres_url": None if pg_skip else args.pg,
        "wall_s": wall,
        "peak_rss_kib": rss,
        "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
