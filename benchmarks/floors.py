"""The raw-database floors under daybook's journal: what two commits per step cost with nothing
on top. Shared by journal_cost.py and run.py; psycopg is imported only by the PostgreSQL floor, so
a process measuring a SQLite floor holds nothing else in memory.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

Sampler = Callable[[], float]  # one timed run of N steps; returns seconds

ROW_BYTES = 200
FLOOR_SCHEMA = "bench_floor"

_PAD = "x" * (
    ROW_BYTES
    - len(
        json.dumps(
            {"kind": "outcome", "key": uuid.uuid4().hex + "/0", "step": 0, "args": {"i": 0}, "pad": ""},
            separators=(",", ":"),
        )
    )
)


def row_json(run_id: str, i: int, kind: str) -> str:
    """A ~200-byte JSON journal row, encoded per row as any journal must."""
    return json.dumps(
        {"kind": kind, "key": f"{run_id}/{i}", "step": i, "args": {"i": i}, "pad": _PAD},
        separators=(",", ":"),
    )


def remove_sqlite(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{path}{suffix}")


def sqlite_floor(path: Path, synchronous: str, n: int) -> Sampler:
    """Raw sqlite3, WAL, autocommit: an intent INSERT and an outcome INSERT per step, each a commit."""

    def once() -> float:
        remove_sqlite(path)
        db = sqlite3.connect(path, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode = WAL")
            db.execute(f"PRAGMA synchronous = {synchronous}")
            db.execute(
                "CREATE TABLE journal (run_id TEXT NOT NULL, seq INTEGER NOT NULL, "
                "kind TEXT NOT NULL, data TEXT NOT NULL, PRIMARY KEY (run_id, seq)) WITHOUT ROWID"
            )
            sql = "INSERT INTO journal (run_id, seq, kind, data) VALUES (?, ?, ?, ?)"
            run_id = uuid.uuid4().hex
            start = time.perf_counter()
            for i in range(n):
                db.execute(sql, (run_id, 2 * i + 1, "intent", row_json(run_id, i, "intent")))
                db.execute(sql, (run_id, 2 * i + 2, "outcome", row_json(run_id, i, "outcome")))
            return time.perf_counter() - start
        finally:
            db.close()

    return once


def pg_floor(conninfo: str, n: int, schema: str = FLOOR_SCHEMA) -> Sampler:
    """Raw psycopg 3, autocommit: two INSERT statements per step, each its own commit."""
    import psycopg

    def once() -> float:
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
            conn.execute(f"SET search_path TO {schema}")
            conn.execute("DROP TABLE IF EXISTS journal")
            conn.execute(
                "CREATE TABLE journal (run_id TEXT NOT NULL, seq INTEGER NOT NULL, "
                "kind TEXT NOT NULL, data JSONB NOT NULL, PRIMARY KEY (run_id, seq))"
            )
            sql = "INSERT INTO journal (run_id, seq, kind, data) VALUES (%s, %s, %s, %s::jsonb)"
            run_id = uuid.uuid4().hex
            start = time.perf_counter()
            for i in range(n):
                conn.execute(sql, (run_id, 2 * i + 1, "intent", row_json(run_id, i, "intent")))
                conn.execute(sql, (run_id, 2 * i + 2, "outcome", row_json(run_id, i, "outcome")))
            return time.perf_counter() - start

    return once


def call_floor(fn: Callable[..., Any], n: int) -> Sampler:
    """`fn(i=i, idempotency_key=...)` called n times directly: no journal at all."""

    def once() -> float:
        start = time.perf_counter()
        for i in range(n):
            fn(i=i, idempotency_key="k")
        return time.perf_counter() - start

    return once
