"""T10: paired FM, Comp-Frozen - Retry-Only on the same case and repeat (Wilcoxon signed-rank,
bootstrap CI of the median difference, Holm over the six rows)."""

from __future__ import annotations

from dart_report import Table
from dart_stats import bootstrap_ci, holm, median, wilcoxon
from sweep import Sweep
from tables_latency import TITLES

PAPER = {
    ("official", "nav"): ("-3202.20 [-3744.90, -1939.54]", 20),
    ("official", "sched"): ("-12962.77 [-14470.23, -11189.84]", 20),
    ("official", "diag"): ("-6916.97 [-7173.38, -6343.63]", 20),
    ("commit", "nav"): ("-21825.54 [-25423.12, -17380.94]", 40),
    ("commit", "sched"): ("-33867.34 [-34671.56, -32231.64]", 35),
    ("commit", "diag"): ("-19142.11 [-20507.09, -16356.22]", 30),
}


def t10(s: Sweep) -> Table:
    t = Table(
        "T10",
        "paired FM wall ms, Comp-Frozen - Retry-Only (seeded think delay)",
        [
            "regime",
            "domain",
            "paper Δ [CI] (pairs)",
            "Δ median",
            "95% CI",
            "Retry med",
            "Frozen med",
            "p (Wilcoxon)",
            "p Holm",
            "pairs",
        ],
    )
    cells = []
    for (regime, dom), (paper, pairs) in PAPER.items():
        retry = {(r.cid, r.repeat): r.fm_ms for r in s.select(domain=dom, regime=regime, method="retry")}
        dart = {(r.cid, r.repeat): r.fm_ms for r in s.select(domain=dom, regime=regime, method="dart")}
        keys = sorted(set(retry) & set(dart))
        diffs = [dart[k] - retry[k] for k in keys]
        cells.append((regime, dom, paper, pairs, diffs, [retry[k] for k in keys], [dart[k] for k in keys]))
    adjusted = holm([wilcoxon(c[4]) for c in cells])
    for (regime, dom, paper, pairs, diffs, r, d), p_holm in zip(cells, adjusted, strict=True):
        lo, hi = bootstrap_ci(diffs)
        t.row(
            regime,
            TITLES[dom],
            f"{paper} ({pairs})",
            median(diffs),
            f"[{lo:.1f}, {hi:.1f}]",
            median(r),
            median(d),
            f"{wilcoxon(diffs):.1e}",
            f"{p_holm:.1e}",
            len(diffs),
        )
        t.check(
            hi < 0,
            (
                f"{regime} {dom}: the CI excludes 0 with a negative sign ([{lo:.1f}, {hi:.1f}], "
                f"{len(diffs)} pairs, paper {pairs})"
            ),
        )
    t.notes.append(
        "pairs include DART's blocked rows (a whole rerun) as they fall; official-row "
        "parity with Entry/Coarse is in T1B, reported, not asserted"
    )
    return t
