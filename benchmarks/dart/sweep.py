"""The main sweep: every case x repeat x method on its domain's live counterparty, plus the
probes DART's rows carry (blocking-off dry run, weakened-key localization) and, for each blocked
event, the forced restore that T19's false-block rule audits. Progress goes to stderr per domain.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any

from cases import Case, universe
from dart_harness import Row, fail, measure
from domains import Domain, all_domains
from localize import probe

from daybook import Daybook

METHODS = ("retry", "coarse", "entry", "dart")


@dataclass
class Sweep:
    rows: list[Row] = field(default_factory=list)
    probes: list[dict[str, Any]] = field(default_factory=list)
    cases: dict[str, Case] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def select(self, **want: Any) -> list[Row]:
        return [r for r in self.rows if all(getattr(r, k) == v for k, v in want.items())]


def methods_for(case: Case) -> list[str]:
    # Coarse-State has no fair anchor past the schedule's durable submit point (paper §3.2).
    return [m for m in METHODS if not (m == "coarse" and case.domain == "sched" and case.regime == "commit")]


def run_domain(dom: Domain, workdir: str, repeats: int, think: float, out: Sweep) -> None:
    start = time.perf_counter()
    think = think if dom.llm else 0.0  # the deterministic domains have no planner to wait for
    cp = dom.setup(workdir)
    book = Daybook(f"{workdir}/{dom.name}.journal.db")
    try:
        for case in universe(dom.shape):
            out.cases[case.cid] = case
            for rep in range(repeats):
                out.probes.append(_probe(book, case, cp, rep))
                for method in methods_for(case):
                    row = measure(book, case, cp, method, rep, think)
                    out.rows.append(row)
                    if method == "dart" and row.action == "rerun":
                        out.rows.append(measure(book, case, cp, "force", rep, think))
    finally:
        cp.stop()
        book.close()
    out.seconds[dom.name] = time.perf_counter() - start
    n = sum(1 for r in out.rows if r.domain == dom.name)
    print(f"[dart] {dom.title}: {n} rows in {out.seconds[dom.name]:.1f}s", file=sys.stderr, flush=True)


def _probe(book: Daybook, case: Case, cp: Any, rep: int) -> dict[str, Any]:
    run = f"{case.cid}.r{rep}.probe"
    fail(book, case, cp, run)
    return {"cid": case.cid, "domain": case.domain, "repeat": rep, **probe(book, run, case)}


def sweep(workdir: str, repeats: int, think: float, domains: list[str] | None = None) -> Sweep:
    out = Sweep()
    for dom in all_domains():
        if domains is None or dom.name in domains:
            run_domain(dom, workdir, repeats, think, out)
    return out
