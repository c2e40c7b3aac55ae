"""Reproduce the Atomix paper's tables on daybook, on real local resources.

    python benchmarks/atomix/run.py [--quick] [--json PATH] [--only TABLE[,TABLE...]]

Prints one markdown table per result (paper column, analytic column where spec §6.1 has one,
ours with its 95% CI and n: exact Clopper-Pearson for a share of runs, percentile bootstrap for
totals and means) and its `REPRODUCED: yes|no` lines; progress goes to stderr; `--json` writes
the same content (a full run of every table writes benchmarks/results/atomix.json by default;
`--quick` or `--only` write JSON only when asked, so they never overwrite the published results)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the harness modules sit beside this script

from report import Config, Report, progress  # noqa: E402

PG_URL = "postgresql://127.0.0.1:5432/test"


ORDER = (
    "rq2",
    "files",
    "fig1",
    "table1",
    "table2",
    "table3",
    "table4",
    "table5",
    "table6",
    "table7",
    "table8",
    "table9",
    "table10",
    "table11",
    "table12",
    "a6",
    "a10",
    "lowfp",
    "peers",
)


def registry() -> dict[str, Callable[[Config], Report]]:
    """Every table's function by key, in the paper's order (then the extras)."""
    import tables_ablation
    import tables_branches
    import tables_contention
    import tables_irreversible
    import tables_peers
    import tables_recovery
    import tables_speculation

    found: dict[str, Callable[[Config], Report]] = {}
    for mod in (
        tables_speculation,
        tables_recovery,
        tables_branches,
        tables_ablation,
        tables_contention,
        tables_irreversible,
        tables_peers,
    ):
        found.update(mod.TABLES)
    return {k: found[k] for k in ORDER if k in found} | found


def pg_url(url: str) -> str | None:
    """The PostgreSQL URL if a server answers there, else None (its rows are then skipped)."""
    try:
        import psycopg

        with psycopg.connect(url, connect_timeout=3):
            return url
    except Exception as e:  # any failure to reach it means: skip the PostgreSQL rows
        progress(f"PostgreSQL at {url} unreachable ({type(e).__name__}); its rows are skipped")
        return None


def load() -> str:
    """The machine's load averages (1, 5, 15 min) and cores: the tables' timings depend on them
    (the counts do not: faults are seeded)."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} on {os.cpu_count()} cores"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller n, under 2 minutes")
    parser.add_argument("--json", default=None, help="where to write the JSON (see above)")
    parser.add_argument("--only", default="", help="comma-separated table keys, e.g. table9,table10")
    parser.add_argument("--postgres", default=PG_URL)
    args = parser.parse_args()
    tables = registry()
    wanted = [k for k in args.only.split(",") if k] or list(tables)
    unknown = [k for k in wanted if k not in tables]
    if unknown:
        parser.error(f"unknown table {unknown}; choose from {', '.join(tables)}")
    cfg = Config(quick=args.quick, pg_url=pg_url(args.postgres))
    began = time.perf_counter()
    reports = []
    at, load_before = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), load()
    print(f"# Atomix tables on daybook ({'quick' if args.quick else 'full'} run)\n")
    print(f"Run {at}; machine at the start: {load_before}.\n")
    for key in wanted:
        progress(f"== {key}")
        rep = tables[key](cfg)
        print(rep.markdown(), flush=True)
        reports.append(rep)
    took = time.perf_counter() - began
    yes = sum(ok for r in reports for ok, _ in r.checks)
    total = sum(len(r.checks) for r in reports)
    load_after = load()
    print(
        f"Summary: {yes} of {total} criteria reproduced, in {took:.0f} s; machine at the end: {load_after}."
    )
    out = {
        "quick": args.quick,
        "seconds": took,
        "at": at,
        "load_at_start": load_before,
        "load_at_end": load_after,
        "reproduced": yes,
        "criteria": total,
        "tables": [r.as_json() for r in reports],
    }
    target = args.json or (None if args.quick or args.only else str(HERE.parent / "results" / "atomix.json"))
    if target is None:
        return
    Path(target).parent.mkdir(parents=True, exist_ok=True)
    Path(target).write_text(json.dumps(out, indent=1))
    progress(f"wrote {target}")


if __name__ == "__main__":
    main()
