"""What a table prints: a markdown table shaped like the paper's, the metric definitions
before the numbers, one `REPRODUCED: yes|no — <criterion>` line per criterion of spec §6.2,
notes, and the same content as JSON. Also the run configuration (`Config`) and the stderr
progress line each experiment writes."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any

from harness import Outcome
from stats import Estimate, percent, total

_T0 = time.perf_counter()


def progress(msg: str) -> None:
    print(f"[{time.perf_counter() - _T0:6.1f}s] {msg}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Config:
    quick: bool = False
    pg_url: str | None = None

    def n(self, full: int, quick: int) -> int:
        return quick if self.quick else full


def analytic_tx(fp: float, steps: float, retries: int = 3) -> float:
    """Tx-Full: every step succeeds within retries + 1 independent attempts."""
    return float(100.0 * (1.0 - fp ** (retries + 1)) ** steps)


def analytic_plain(fp: float, steps: float) -> float:
    """No-Frontier / No-Tx: every step succeeds at its first attempt."""
    return float(100.0 * (1.0 - fp) ** steps)


def success(outs: list[Outcome]) -> Estimate:
    return percent([o.success for o in outs])


def faults(outs: list[Outcome]) -> Estimate:
    return total([o.faults for o in outs])


@dataclass
class Report:
    key: str
    title: str
    header: list[str]
    definitions: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    checks: list[tuple[bool, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)

    def row(self, *cells: Any) -> None:
        self.rows.append([c.cell() if isinstance(c, Estimate) else str(c) for c in cells])

    def check(self, ok: bool, criterion: str, why: str = "") -> bool:
        text = criterion if ok or not why else f"{criterion} — not met: {why}"
        self.checks.append((bool(ok), text))
        return ok

    def markdown(self) -> str:
        out = [f"### {self.title}", ""]
        out += [f"- {d}" for d in self.definitions]
        out += [""] if self.definitions else []
        out.append("| " + " | ".join(self.header) + " |")
        out.append("|" + "---|" * len(self.header))
        out += ["| " + " | ".join(r) + " |" for r in self.rows]
        out.append("")
        out += [f"REPRODUCED: {'yes' if ok else 'no'} — {text}" for ok, text in self.checks]
        out += [f"\nNote: {n}" for n in self.notes]
        return "\n".join(out) + "\n"

    def as_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "title": self.title,
            "definitions": self.definitions,
            "header": self.header,
            "rows": self.rows,
            "reproduced": [{"yes": ok, "criterion": text} for ok, text in self.checks],
            "notes": self.notes,
            "data": self.data,
        }


def fmt(x: float, digits: int = 1) -> str:
    return f"{x:,.{digits}f}"


def est_json(outs: list[Outcome]) -> dict[str, Any]:
    return {
        "success": success(outs).as_json(),
        "faults": sum(o.faults for o in outs),
        "retries": sum(o.retries for o in outs),
        "recovered": sum(o.recovered for o in outs),
        "corrupt": sum(o.corrupt for o in outs),
        "n": len(outs),
    }


DEFINITIONS = [
    "success: the run finished every call without an unrecoverable error AND the resource's end "
    "state equals the task's ground truth (each call applied exactly once); a percentage of runs",
    "faults: injected faults (Bernoulli(fp) per call attempt at the tool boundary; `pre`: nothing "
    "applied, `post`: applied, reply lost); retries: call attempts beyond the first; recovered: "
    "faults on calls that eventually completed",
    "CI: 95%; for a share of runs (success %, corruption %) the exact Clopper-Pearson interval of "
    "k of n (never a single point at 0/n or n/n); for totals and means the percentile bootstrap over "
    "runs (10,000 resamples, fixed seed); n: runs",
]
