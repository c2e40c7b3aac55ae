"""Atomix transactions, durable: what the commit rule, a transactional effect and a speculation
cost, printed as ratios (Atomix's figures are in memory, one process; these are durable).

- coordination: 16 concurrent runs (threads of one process) each doing N no-op transactions on
  disjoint scopes, against the raw floor of the same commits (16 threads doing, per
  transaction, the three database commits a transaction makes, each writing a header row and a
  ~200-byte journal row, with the bare driver: sqlite3 / psycopg) and against the same runs
  doing one plain journaled decision per step; tx/s and the ratios;
- per-step overhead: a no-op `ctx.effect` inside a transaction (staged, flushed at commit; one
  transaction per 10 effects) against a plain `ctx.effect`, in µs per step; on SQLite also the
  commits per step of each, counted from the statement trace of the store's connections (a
  figure the machine's load does not move);
- speculation: K no-op branches (K = 2, 4, 8, 16): wall time of one `ctx.speculate`.

Atomix's own figures (an in-memory library) are printed beside ours. `measure(quick)` and
`targets(rows)` are what benchmarks/run.py calls (PostgreSQL at $DAYBOOK_BENCH_PG, if reachable).

    python benchmarks/tx.py [--quick] [--postgres URL] [--json FILE]
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


@daybook.tool(idempotent=True, irreversible=False)
def bench_noop(*, i: int, idempotency_key: str) -> int:
    return i


@daybook.tool(idempotent=True, irreversible=False, bufferable=True)
def bench_staged(*, i: int, idempotency_key: str) -> int:
    return i


@daybook.workflow(name="bench_tx_coord")
def coord(ctx: daybook.Context, me: int, n: int, transactional: bool) -> int:
    for i in range(n):
        if transactional:
            with ctx.transaction(scopes=[f"bench:agent:{me}"]):
                pass
        else:
            ctx.decide("step", lambda i=i: i)
    return n


@daybook.workflow(name="bench_tx_steps")
def steps(ctx: daybook.Context, n: int, transactional: bool) -> int:
    for start in range(0, n, 10):
        if transactional:
            with ctx.transaction(scopes=["bench:**"]):
                for i in range(start, min(n, start + 10)):
                    ctx.effect(bench_staged, i=i)
        else:
            for i in range(start, min(n, start + 10)):
                ctx.effect(bench_noop, i=i)
    return n


@daybook.workflow(name="bench_tx_spec")
def spec(ctx: daybook.Context, k: int) -> Any:
    branches = {f"b{j}": (lambda c, j=j: {"j": j}) for j in range(k)}
    return ctx.speculate(branches, choose=lambda r: min(r, key=lambda name: r[name]["j"]))


def _concurrent(url: str, agents: int, n: int, transactional: bool) -> float:
    with Daybook(url) as book:
        threads = [
            threading.Thread(
                target=book.run, args=(coord, me, n, transactional), kwargs={"run_id": uuid.uuid4().hex}
            )
            for me in range(agents)
        ]
        began = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return agents * n / (time.perf_counter() - began)


def _threads(agents: int, n: int, one: Any) -> float:
    """Transactions per second of `agents` threads each calling `one(me, i)` n times."""
    threads = [threading.Thread(target=lambda me=me: [one(me, i) for i in range(n)]) for me in range(agents)]
    began = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return agents * n / (time.perf_counter() - began)


_ROW = json.dumps({"kind": "decision", "name": "tx:mark", "value": {"tx_id": "x" * 40}, "pad": "x" * 100})


def _raw_sqlite(path: Path, agents: int, n: int) -> float:
    """The raw floor on SQLite: per transaction three commits (begin, commit decided, ended),
    each a header write and a journal row, WAL and synchronous=FULL, one shared connection."""
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("CREATE TABLE h (tx TEXT PRIMARY KEY, status TEXT)")
    db.execute("CREATE TABLE e (tx TEXT, seq INTEGER, data TEXT)")
    lock = threading.Lock()

    def one(me: int, i: int) -> None:
        tx = f"{me}/{i}"
        for seq, status in enumerate(("open", "committing", "committed")):
            with lock:
                db.execute("BEGIN IMMEDIATE")
                db.execute("INSERT OR REPLACE INTO h VALUES (?, ?)", (tx, status))
                db.execute("INSERT INTO e VALUES (?, ?, ?)", (tx, seq, _ROW))
                db.execute("COMMIT")

    try:
        return _threads(agents, n, one)
    finally:
        db.close()


def _raw_postgres(url: str, agents: int, n: int) -> float:
    """The raw floor on PostgreSQL: the same three commits per transaction, one statement each
    (a header upsert and a journal row), a connection per thread, autocommit."""
    import psycopg

    base = url.split("?")[0]
    schema = f"bench_txfloor_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(base, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
        admin.execute(f"CREATE TABLE {schema}.h (tx TEXT PRIMARY KEY, status TEXT)")
        admin.execute(f"CREATE TABLE {schema}.e (tx TEXT, seq INTEGER, data JSON)")
    conns = [psycopg.connect(base, autocommit=True) for _ in range(agents)]
    sql = (
        f"WITH u AS (INSERT INTO {schema}.h VALUES (%s, %s) ON CONFLICT (tx) DO UPDATE "
        f"SET status = excluded.status RETURNING tx) INSERT INTO {schema}.e SELECT tx, %s, %s FROM u"
    )

    def one(me: int, i: int) -> None:
        for seq, status in enumerate(("open", "committing", "committed")):
            conns[me].execute(sql, (f"{me}/{i}", status, seq, _ROW))

    try:
        return _threads(agents, n, one)
    finally:
        for c in conns:
            c.close()
        with psycopg.connect(base, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA {schema} CASCADE")


def _per_step(url: str, n: int, transactional: bool) -> float:
    with Daybook(url) as book:
        began = time.perf_counter()
        book.run(steps, n, transactional, run_id=uuid.uuid4().hex)
        return (time.perf_counter() - began) / n * 1e6


class _Commits:
    """Counts write transactions on the sqlite3 connections opened while installed, from their
    statement trace (a BEGIN..COMMIT, or a write outside one, is one commit). The trace holds the
    statement with its values bound, and may repeat it: a repeat in a row is counted once."""

    def __init__(self) -> None:
        self.commits = 0
        self._open: set[int] = set()
        self._last: dict[int, str] = {}

    def tracer(self, conn_id: int) -> Any:
        def trace(statement: str) -> None:
            if self._last.get(conn_id) == statement:
                return
            self._last[conn_id] = statement
            head = statement.lstrip()[:8].upper()
            if head.startswith("BEGIN"):
                self._open.add(conn_id)
            elif head.startswith(("COMMIT", "END")) and conn_id in self._open:
                self._open.discard(conn_id)
                self.commits += 1
            elif head.startswith(("INSERT", "UPDATE", "DELETE", "REPLACE")) and conn_id not in self._open:
                self.commits += 1  # autocommit: a write outside a transaction commits by itself

        return trace


def _commits_per_step(url: str, n: int, transactional: bool) -> float:
    """Store commits per step of the `steps` workflow on SQLite (the run's start and end included)."""
    counter = _Commits()
    connect = sqlite3.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn: sqlite3.Connection = connect(*args, **kwargs)
        conn.set_trace_callback(counter.tracer(id(conn)))
        return conn

    sqlite3.connect = traced  # type: ignore[assignment]
    try:
        with Daybook(url) as book:
            book.run(steps, n, transactional, run_id=uuid.uuid4().hex)
    finally:
        sqlite3.connect = connect
    return counter.commits / n


def _speculation(url: str, k: int, runs: int) -> float:
    with Daybook(url) as book:
        took = []
        for _ in range(runs):
            began = time.perf_counter()
            book.run(spec, k, run_id=uuid.uuid4().hex)
            took.append(time.perf_counter() - began)
        return sorted(took)[len(took) // 2] * 1e3


# Atomix's own figures (the paper: an in-memory library, one process), printed beside ours.
ATOMIX_TX_PER_S = 14_209  # 16 runs, no-op transactions
ATOMIX_SPECULATE_MS = {2: 0.097, 4: 0.165, 8: 0.365, 16: 1.025}  # total of one ctx.speculate
# Issue 28, goal 4 (on this machine, durable).
TARGET_TX_PER_S = {"sqlite": 2000, "postgresql": 1000}
TARGET_STEP_RATIO = 1.2
TARGET_SPECULATE_MS = 10.0
PG = os.environ.get("DAYBOOK_BENCH_PG", "postgresql://127.0.0.1:5432/test")


def _median(xs: list[float]) -> float:
    return statistics.median(xs)


def _backend(backend: str, url: str, quick: bool, raw: Any) -> list[dict[str, Any]]:
    repeats = 3 if quick else 5
    n = 10 if quick else 50
    tx = _median([_concurrent(url, 16, n, True) for _ in range(repeats)])
    plain = _median([_concurrent(url, 16, n, False) for _ in range(repeats)])
    bare = raw(16, n)
    steps_n = 50 if quick else 200
    with_tx = _median([_per_step(url, steps_n, True) for _ in range(repeats)])
    alone = _median([_per_step(url, steps_n, False) for _ in range(repeats)])
    commits = {}
    if backend == "sqlite":
        commits = {
            "commits_per_step_tx": round(_commits_per_step(url, 200, True), 3),
            "commits_per_step_plain": round(_commits_per_step(url, 200, False), 3),
        }
    rows: list[dict[str, Any]] = [
        {
            "system": "daybook", "backend": backend, "measure": "tx_concurrent_16", "n": n,
            "runs": repeats, "tx_per_s": round(tx, 1), "plain_steps_per_s": round(plain, 1),
            "raw_floor_tx_per_s": round(bare, 1), "atomix_in_memory_tx_per_s": ATOMIX_TX_PER_S,
        },
        {
            "system": "daybook", "backend": backend, "measure": "tx_step", "n": steps_n, "runs": repeats,
            "us_per_step_tx": round(with_tx, 1), "us_per_step_plain": round(alone, 1),
            "ratio": round(with_tx / alone, 2), **commits,
        },
    ]  # fmt: skip
    for k in (2, 4, 8, 16):
        ms = _speculation(url, k, 3 if quick else 10)
        rows.append(
            {
                "system": "daybook", "backend": backend, "measure": "speculate", "k": k, "ms": round(ms, 2),
                "atomix_in_memory_ms": ATOMIX_SPECULATE_MS[k],
            }
        )  # fmt: skip
    return rows


def measure(quick: bool = False, pg: str | None = PG) -> list[dict[str, Any]]:
    """Goal 4's figures on SQLite (synchronous=FULL) and, if `pg` is reachable, PostgreSQL."""
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="daybook-tx-") as tmp:
        raw = lambda agents, n: _raw_sqlite(Path(tmp) / f"floor-{uuid.uuid4().hex}.db", agents, n)  # noqa: E731
        rows += _backend("sqlite", f"sqlite:///{Path(tmp) / 'bench.db'}", quick, raw)
    if not pg:
        return rows
    import psycopg

    base = pg.split("?")[0]
    try:
        psycopg.connect(base, connect_timeout=3).close()
    except psycopg.OperationalError as exc:
        rows.append({"system": "daybook", "backend": "postgresql", "measure": "tx", "skipped": True,
                     "reason": f"PostgreSQL unreachable: {exc}"})  # fmt: skip
        return rows
    schema = f"bench_tx_{uuid.uuid4().hex[:8]}"
    try:
        url = f"{base}?schema={schema}"
        rows += _backend("postgresql", url, quick, lambda agents, n: _raw_postgres(base, agents, n))
    finally:
        with psycopg.connect(base, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    return rows


def targets(rows: list[dict[str, Any]]) -> list[str]:
    out = []
    for r in rows:
        backend = r.get("backend", "")
        if r.get("measure") == "tx_concurrent_16":
            goal = TARGET_TX_PER_S[backend]
            x = r["tx_per_s"] / goal
            out.append(
                f"{'PASS' if x >= 1 else 'MISS'}  {backend}: 16 concurrent durable transactions >= "
                f"{goal:,} tx/s: {r['tx_per_s']:,.0f} tx/s ({x:.2f}x the target; Atomix in memory "
                f"{r['atomix_in_memory_tx_per_s']:,})"
            )
        elif r.get("measure") == "tx_step":
            x = r["ratio"]
            counted = ""
            if "commits_per_step_tx" in r:
                tx, plain = r["commits_per_step_tx"], r["commits_per_step_plain"]
                counted = f"; commits per step {tx:.2f} vs {plain:.2f}, {tx / plain:.2f}x"
            out.append(
                f"{'PASS' if x <= TARGET_STEP_RATIO else 'MISS'}  {backend}: a transactional step <= "
                f"{TARGET_STEP_RATIO}x a plain one: {x:.2f}x ({x / TARGET_STEP_RATIO:.2f}x the target)"
                f"{counted}"
            )
        elif r.get("measure") == "speculate" and r["k"] == 16:
            x = r["ms"] / TARGET_SPECULATE_MS
            out.append(
                f"{'PASS' if x <= 1 else 'MISS'}  {backend}: ctx.speculate at K=16 <= "
                f"{TARGET_SPECULATE_MS:g} ms durable: {r['ms']:,.1f} ms ({x:.2f}x the target; Atomix "
                f"in memory {r['atomix_in_memory_ms']} ms)"
            )
    return out


def _print(rows: list[dict[str, Any]]) -> None:
    for r in rows:
        name = "SQLite (synchronous=FULL)" if r["backend"] == "sqlite" else "PostgreSQL"
        if r.get("skipped"):
            print(f"\n{name}: skipped ({r['reason']})")
        elif r["measure"] == "tx_concurrent_16":
            tx, bare, plain = r["tx_per_s"], r["raw_floor_tx_per_s"], r["plain_steps_per_s"]
            print(
                f"\n{name}: coordination, 16 concurrent runs x {r['n']} no-op transactions (disjoint scopes)"
            )
            print(f"  daybook transactions {tx:,.0f} tx/s (median of {r['runs']})")
            print(f"  raw floor of the same commits {bare:,.0f} tx/s ({bare / tx:.1f}x daybook)")
            print(f"  plain journaled steps {plain:,.0f} steps/s ({plain / tx:.1f}x daybook)")
            print(f"  Atomix (in memory, the paper) {r['atomix_in_memory_tx_per_s']:,} tx/s")
        elif r["measure"] == "tx_step":
            print(f"{name}: per step, {r['n']} no-op effects (10 per transaction)")
            print(
                f"  transactional {r['us_per_step_tx']:,.0f} us/step; plain ctx.effect "
                f"{r['us_per_step_plain']:,.0f} us/step; {r['ratio']:.2f}x"
            )
            if "commits_per_step_tx" in r:
                print(
                    f"  commits per step: transactional {r['commits_per_step_tx']:.2f}, plain "
                    f"{r['commits_per_step_plain']:.2f}"
                )
        elif r["measure"] == "speculate":
            if r["k"] == 2:
                print(f"{name}: speculation, median wall time of one ctx.speculate with K no-op branches")
            print(f"  K={r['k']:2d}: {r['ms']:,.1f} ms (Atomix in memory {r['atomix_in_memory_ms']} ms)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--postgres", default=None, help="a PostgreSQL URL (a fresh schema is made in it)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    rows = measure(args.quick, args.postgres)
    _print(rows)
    print()
    for line in targets(rows):
        print(line)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
