"""What a named durable stream reader costs per chunk, against following the same stream by cursor.

Run:

    python benchmarks/stream_readers.py [--n 2000] [--runs 3] [--no-postgres] [--json PATH]

One run writes N chunks to stream `s` (committed in groups, as `ctx.stream` does); then each row
reads all N of them, timed, and reports microseconds per chunk (the median of `--runs`, with the
min and max):

- read by cursor: `book.chunks(run_id, stream="s")`, the reader keeping no position (the floor:
  what reading the chunks costs by itself; `book.follow` by cursor reads the same rows, then
  sleeps its poll interval before it sees the run has ended);
- named reader: `book.follow(run_id, stream="s", reader=NAME)` under a new name each run, storing
  its position once per chunk (the acknowledgement: one append to its entity log, one commit);
- the same with `ack_every=64`: the position stored once per 64 chunks.

`x floor` divides the named reader by reading by cursor on the same backend. Results are printed
and written as JSON (default benchmarks/results/stream_readers.json).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from benchlib import scratch_dir, with_schema

import daybook
from daybook import Daybook

PG_URL = os.environ.get("DAYBOOK_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")


@daybook.workflow
def writes(ctx: daybook.Context, n: int) -> int:
    out = ctx.stream("s")
    for i in range(n):
        out.write(i)
    return n


def _read(book: Daybook, name: str, every: int) -> int:
    return sum(1 for _ in book.follow("bench-stream", stream="s", reader=name, ack_every=every))


def _time(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(url: str, n: int, runs: int) -> dict[str, Any]:
    with Daybook(url) as book:
        book.run(writes, n, run_id="bench-stream")
        floor: list[float] = []
        named: list[float] = []
        batched: list[float] = []
        for _ in range(runs):
            floor.append(_time(lambda: len(book.chunks("bench-stream", stream="s"))) / n)
            name = "r" + uuid.uuid4().hex[:8]
            named.append(
                _time(lambda name=name: sum(1 for _ in book.follow("bench-stream", stream="s", reader=name)))
                / n
            )
            every = "b" + uuid.uuid4().hex[:8]
            batched.append(_time(lambda every=every: _read(book, every, 64)) / n)

    def row(xs: list[float]) -> dict[str, float]:
        return {"us": statistics.median(xs) * 1e6, "min_us": min(xs) * 1e6, "max_us": max(xs) * 1e6}

    return {
        "follow": row(floor),
        "reader": row(named),
        "x_floor": statistics.median(named) / statistics.median(floor),
        "reader_every_64": row(batched),
        "every_64_x_floor": statistics.median(batched) / statistics.median(floor),
    }


def _drop(schema: str) -> None:
    try:
        import psycopg

        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    except Exception:  # nothing was created, or the server is gone: nothing to clean
        pass


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--json", default=str(Path(__file__).parent / "results" / "stream_readers.json"))
    args = parser.parse_args(argv)
    results: dict[str, Any] = {"n": args.n, "runs": args.runs}
    with scratch_dir(None) as folder:
        results["sqlite"] = measure(f"sqlite:///{folder / 'bench.db'}", args.n, args.runs)
    if not args.no_postgres:
        schema = f"bench_{uuid.uuid4().hex[:8]}"
        try:
            results["postgres"] = measure(with_schema(PG_URL, schema), args.n, args.runs)
        except daybook.DaybookError as exc:
            results["postgres"] = {"skipped": str(exc)}
        finally:
            _drop(schema)
    for backend in ("sqlite", "postgres"):
        got = results.get(backend)
        if not got or "skipped" in got:
            print(f"{backend:9} skipped: {got and got['skipped']}")
            continue
        print(
            f"{backend:9} read by cursor {got['follow']['us']:8.1f} us/chunk   named reader "
            f"{got['reader']['us']:8.1f} us/chunk (x floor {got['x_floor']:.0f})   ack_every=64 "
            f"{got['reader_every_64']['us']:8.1f} us/chunk (x floor {got['every_64_x_floor']:.0f})"
        )
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
