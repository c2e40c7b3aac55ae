"""What a checkout's drift check and snapshot cost per edit, against the floors under it.

Run:

    python benchmarks/workspace.py [--n 100] [--runs 3] [--json PATH]

Every row times N edits of a real git checkout (each writes one new file and rewrites one
shared file) in this one process, on SQLite (synchronous=NORMAL is daybook's default), and
reports milliseconds per edit: the median of `--runs` runs after one warm-up run.

Rows:

- floor, python: the two files written directly (no journal, no git).
- floor, effect: the same writes as one `ctx.effect` of a plain tool (journal, no drift check,
  no snapshot): what any journaled edit costs.
- checkout edit: `daybook.Checkout.edit` (a look at each new path, the drift check, the
  writes, the snapshot commit on the run's ref). `x effect` divides by the effect floor: the
  price of the drift check and the snapshot (a few `git` processes per edit).
- checkout replay: `book.resume` of a run suspended after N edits: the N edits replayed
  (nothing written, no `git` process) up to the wait, where it suspends again.
- rewind: `book.rewind` of a suspended run of N edits back to its middle edit (plan, restore,
  the branch row), once per run, in milliseconds.

Results are printed as a table and written as JSON (`--json`, default
benchmarks/results/workspace.json).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import daybook

HERE = Path(__file__).parent


@daybook.tool(name="bench_ws.write", irreversible=False)
def write_two(*, root: str, i: int, idempotency_key: str) -> None:
    Path(root, f"f{i}.txt").write_text(f"file {i}\n")
    Path(root, "shared.txt").write_text(f"edit {i}\n")


@daybook.workflow(name="bench_ws_effects")
def effects(ctx: daybook.Context, root: str, n: int) -> int:
    for i in range(n):
        ctx.effect(write_two, root=root, i=i)
    return n


@daybook.workflow(name="bench_ws_checkout")
def edits(ctx: daybook.Context, root: str, n: int, wait: bool) -> int:
    co = daybook.Checkout(root, lease=False)
    for i in range(n):
        co.edit(ctx, {f"f{i}.txt": f"file {i}\n", "shared.txt": f"edit {i}\n"})
    if wait:
        ctx.sleep(3600)  # suspends at once (a short wait would be waited out in process)
    return n


def repo(base: Path) -> str:
    root = base / f"repo-{uuid.uuid4().hex[:8]}"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return str(root)


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _suspends(fn: Callable[[], Any]) -> None:
    with contextlib.suppress(daybook.Suspended):
        fn()


def one_run(book: daybook.Daybook, base: Path, n: int, tag: str) -> dict[str, float]:
    """Seconds per edit of each row (and per rewind) in one run of N edits."""
    plain = repo(base)

    def direct() -> None:
        for i in range(n):
            Path(plain, f"f{i}.txt").write_text(f"file {i}\n")
            Path(plain, "shared.txt").write_text(f"edit {i}\n")

    row = {
        "python": timed(direct) / n,
        "effect": timed(lambda: book.run(effects, repo(base), n, run_id=f"e{tag}")) / n,
        "checkout": timed(lambda: book.run(edits, repo(base), n, False, run_id=f"c{tag}")) / n,
    }
    waiting = f"w{tag}"
    _suspends(lambda: book.run(edits, repo(base), n, True, run_id=waiting))
    row["replay"] = timed(lambda: _suspends(lambda: book.resume(waiting))) / n
    middle = [e.step for e in book.journal(waiting) if e.kind == "outcome"][n // 2]
    row["rewind"] = timed(lambda: book.rewind(waiting, middle))
    return row


def measure(n: int, runs: int, base: Path) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {k: [] for k in ("python", "effect", "checkout", "replay", "rewind")}
    for r in range(runs + 1):  # the first run warms up
        with daybook.Daybook(f"sqlite:///{base / f'b{r}.db'}") as book:
            row = one_run(book, base, n, str(r))
        if r:
            for k, v in row.items():
                out[k].append(v)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", default=str(HERE / "results" / "workspace.json"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="daybook-bench-ws-") as tmp:
        found = measure(args.n, args.runs, Path(tmp))
    med = {k: statistics.median(v) for k, v in found.items()}
    rows = [
        ("floor, python", med["python"] * 1e3, med["python"] / med["effect"]),
        ("floor, effect", med["effect"] * 1e3, 1.0),
        ("checkout edit", med["checkout"] * 1e3, med["checkout"] / med["effect"]),
        ("checkout replay", med["replay"] * 1e3, med["replay"] / med["effect"]),
    ]
    print(f"{'row':<18} {'ms/edit':>9} {'x effect':>9}   (n={args.n}, median of {args.runs})")
    for name, ms, ratio in rows:
        print(f"{name:<18} {ms:>9.3f} {ratio:>9.2f}")
    print(f"{'rewind':<18} {med['rewind'] * 1e3:>9.1f} ms for a run of {args.n} edits, to its middle")
    result = {
        "n": args.n,
        "runs": args.runs,
        "ms_per_edit": {name: round(ms, 4) for name, ms, _ in rows},
        "x_effect": {name: round(ratio, 3) for name, _, ratio in rows},
        "rewind_ms": round(med["rewind"] * 1e3, 2),
        "python": sys.version.split()[0],
    }
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
