"""Reproduce the DART paper's result tables on daybook (issue 15; spec dart.md §3.5, §4).

    python benchmarks/dart/run.py [--quick] [--json PATH] [--only T1A,T23,...] [--workdir DIR]

Five scripted domains on local counterparties (HTTP services, SQLite, an SMTP sink, files), the
four methods as `book.recover` policies, LangGraph's own restore as the external baseline. Each
table prints in the paper's shape with a `paper` column and `REPRODUCED: yes|no — criterion`
lines; the JSON holds the same plus every measured row. Journals live on tmpfs by default
(`--workdir` to choose): the paper never wrote durably; T11 reports disk separately.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1] / "tests")]

import tables_config  # noqa: E402
import tables_latency as lat  # noqa: E402
import tables_lg  # noqa: E402
import tables_pairs  # noqa: E402
import tables_probes  # noqa: E402
import tables_runtime  # noqa: E402
import tables_safety  # noqa: E402
from dart_report import Table  # noqa: E402
from sweep import Sweep, sweep  # noqa: E402


@dataclass(frozen=True)
class Settings:
    repeats: int
    think: float
    examples: int
    t11_runs: int
    workdir: str


SWEEP = {"T1A", "T1B", "T9", "T10", "T12", "T4A", "T3", "T21", "T22", "T4C", "T17", "T23", "T2", "T14"}
LG = {"T2", "T14", "T17"}


def _builders(cfg: Settings, swept: Sweep | None, lgrows: list[Any]) -> dict[str, Callable[[], list[Table]]]:
    w = cfg.workdir
    s = swept if swept is not None else Sweep()  # only the tables that need no sweep read an empty one
    return {
        "T1A": lambda: [lat.t1a(s)],
        "T1B": lambda: [lat.t1b(s)],
        "T2": lambda: [tables_lg.t2(s, lgrows)],
        "T3": lambda: [tables_safety.t21(s), tables_safety.t22(s)],
        "T3X": lambda: [tables_probes.t3_extended(cfg.examples)],
        "T4A": lambda: [lat.t4a(s)],
        "T4B": lambda: [t for t in tables_config.tables() if t.key == "T4B"],
        "T4C": lambda: [tables_safety.t4c(s)],
        "T6": lambda: [tables_probes.t6_t7(w, cfg.think, cfg.repeats)],
        "T9": lambda: [lat.t9(s)],
        "T10": lambda: [tables_pairs.t10(s)],
        "T11": lambda: [tables_runtime.t11({"tmpfs": w, "disk": _disk()}, cfg.think, cfg.t11_runs)],
        "T12": lambda: [lat.t12(s)],
        "T14": lambda: [tables_lg.t14(s, lgrows)],
        "T17": lambda: [tables_lg.t17(s, lgrows)],
        "T23": lambda: [tables_safety.t23(s, tables_probes.friday_probe(w))],
        "T24": lambda: [t for t in tables_config.tables() if t.key != "T4B"],
        "T28": lambda: [tables_runtime.t28(w)],
        "T29": lambda: [tables_runtime.t29(w)],
    }


def _disk() -> str:
    return tempfile.mkdtemp(prefix="dart-disk-")  # the default temp dir: a real disk, fsync and all


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="1 repeat, 5 ms think delay (< 2 min)")
    ap.add_argument("--json", default=None, help="write the tables and rows as JSON here")
    ap.add_argument("--only", default=None, help="comma-separated table keys, e.g. T1A,T23")
    ap.add_argument("--workdir", default=None, help="where journals and counterparties live (default: tmpfs)")
    args = ap.parse_args(argv)
    base = "/dev/shm" if args.workdir is None and os.path.isdir("/dev/shm") else args.workdir
    workdir = tempfile.mkdtemp(prefix="dart-", dir=base)
    cfg = Settings(
        1 if args.quick else 5, 0.005 if args.quick else 0.020, 10_000, 5 if args.quick else 20, workdir
    )
    keys = [k.strip().upper() for k in args.only.split(",")] if args.only else None
    started = time.perf_counter()
    s = sweep(workdir, cfg.repeats, cfg.think) if keys is None or SWEEP & set(keys) else None
    lgrows = tables_lg.run_lg(workdir, cfg.repeats, cfg.think) if keys is None or LG & set(keys) else []
    out: dict[str, Any] = {"settings": cfg.__dict__, "tables": {}}
    for key, build in _builders(cfg, s, lgrows).items():
        if keys is not None and key not in keys:
            continue
        for table in build():
            print(table.markdown())
            out["tables"][table.key] = table.as_json()
    verdicts = [v for t in out["tables"].values() for v in t["reproduced"]]
    yes = sum(v["ok"] for v in verdicts)
    took = time.perf_counter() - started
    print(
        f"**Summary:** {yes}/{len(verdicts)} criteria reproduced; {took:.0f} s; repeats "
        f"{cfg.repeats}, think {cfg.think * 1000:.0f} ms"
    )
    if args.json:
        out["rows"] = [r.as_dict() for r in (s.rows if s else [])] + [r.as_dict() for r in lgrows]
        out["probes"] = s.probes if s else []
        out["seconds"] = {"total": took, **(s.seconds if s else {})}
        Path(args.json).write_text(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
