"""Atomix transactions, durable: what the commit rule, a transactional effect and a speculation
cost, printed as ratios (Atomix's figures are in memory, one process; these are durable).

- coordination: 16 concurrent runs (threads of one process) each doing N no-op transactions on
  disjoint scopes, against the raw floor of the same commits (16 threads doing, per
  transaction, the three database commits a transaction makes, each writing a header row and a
  ~200-byte journal row, with the bare driver: sqlite3 / psycopg) and against the same runs
  doing one plain journaled decision per step; tx/s and the ratios;
- per-step overhead: a no-op `ctx.effect` inside a transaction (staged, flushed at commit; one
  transaction per 10 effects) against a plain `ctx.effect`, in µs per step;
- speculation: K no-op branches (K = 2, 4, 8, 16): wall time of one `ctx.speculate`.

    python benchmarks/tx.py [--quick] [--postgres URL]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
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


def _speculation(url: str, k: int, runs: int) -> float:
    with Daybook(url) as book:
        took = []
        for _ in range(runs):
            began = time.perf_counter()
            book.run(spec, k, run_id=uuid.uuid4().hex)
            took.append(time.perf_counter() - began)
        return sorted(took)[len(took) // 2] * 1e3


def report(name: str, url: str, quick: bool, raw: Any) -> None:
    n = 10 if quick else 50
    tx = _concurrent(url, 16, n, True)
    floor = _concurrent(url, 16, n, False)
    bare = raw(16, n)
    print(f"\n{name}: coordination, 16 concurrent runs x {n} no-op transactions (disjoint scopes)")
    print(f"  daybook transactions {tx:,.0f} tx/s")
    print(f"  raw floor of the same commits {bare:,.0f} tx/s ({bare / tx:.1f}x daybook)")
    print(f"  plain journaled steps {floor:,.0f} steps/s ({floor / tx:.1f}x daybook)")
    steps_n = 50 if quick else 200
    with_tx, plain = _per_step(url, steps_n, True), _per_step(url, steps_n, False)
    print(f"{name}: per step, {steps_n} no-op effects (10 per transaction)")
    ratio = with_tx / plain
    print(f"  transactional {with_tx:,.0f} us/step; plain ctx.effect {plain:,.0f} us/step; {ratio:.2f}x")
    print(f"{name}: speculation, median wall time of one ctx.speculate with K no-op branches")
    for k in (2, 4, 8, 16):
        print(f"  K={k:2d}: {_speculation(url, k, 3 if quick else 10):,.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--postgres", default=None, help="a PostgreSQL URL (a fresh schema is best)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        raw = lambda agents, n: _raw_sqlite(Path(tmp) / "floor.db", agents, n)  # noqa: E731
        report("SQLite (synchronous=FULL)", f"sqlite:///{Path(tmp) / 'bench.db'}", args.quick, raw)
    if args.postgres:
        url = args.postgres
        report("PostgreSQL", url, args.quick, lambda agents, n: _raw_postgres(url, agents, n))


if __name__ == "__main__":
    main()
