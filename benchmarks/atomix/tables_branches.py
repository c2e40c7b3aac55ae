"""Speculation per step and its cost: Table 3 (k branches per step over 5 shared page elements;
k = 1 under faults) and Table 6 (a K-branch no-op speculation, timed from inside: setup until
the first branch runs, commit from the last branch's end to the winner's commit, total)."""

from __future__ import annotations

import gc
import os
import random

import speculation as sp
from harness import Task
from report import DEFINITIONS, Config, Report, progress, success
from resources import Op
from stats import Estimate, linear_fit, mean, p99, percent
from workloads import Lab, cell, scratch

PAPER_T3 = {
    "Tx-Full": ("92.0 ± 4.5", "77.3 ± 4.8", "148 ± 6"),
    "No-Frontier": ("2.0 ± 1.4", "77.7 ± 5.7", "296 ± 11"),
    "CR": ("4.7 ± 2.6", "73.7 ± 4.3", "305 ± 7"),
}
CONFLICT = (
    "conflict: a branch's write landing on a page element that holds another branch's write of the same "
    "step not yet committed (or not yet compensated); counted per trial from the writes that reached the row"
)


def _page_tasks(n: int) -> list[Task]:
    out = []
    for t in range(n):
        rng = random.Random(f"page/{t}")
        out.append(
            Task(f"page-{t}", tuple(Op("set", f"el-{i % 5}", rng.randrange(1, 999)) for i in range(10)))
        )
    return out


def _k3_trial(lab: Lab, mode: str, t: int) -> tuple[bool, int]:
    rng = random.Random(f"k3/{t}")
    steps = [sp.scores(rng, 3) for _ in range(10)]
    run, store = f"p3-{mode}-{t}", sp.SHARED["store"]
    want: dict[str, int] = {}
    for i, sc in enumerate(steps):
        want[f"{run}:el-{i % 5}"] = 100 * i + max(range(3), key=lambda j: (sc[j], f"b{j}")) + 1
    if mode == "Tx-Full":
        lab.book.run(sp.spec_page, run, steps, run_id=run)
    else:
        for i, sc in enumerate(steps):
            _k3_baseline_step(mode, store, f"{run}:el-{i % 5}", i, sc, rng.sample(range(3), 3))
    return store.now(run + ":") == want, _conflicts(store.seen(run + ":"), len(steps))


def _k3_baseline_step(
    mode: str, store: sp.Observed, name: str, i: int, sc: list[int], order: list[int]
) -> None:
    snap = store.snapshot() if mode == "CR" else None
    wrote = sp.baseline_branches(store, name, [100 * i + j + 1 for j in range(3)], order)
    win = max(range(3), key=lambda j: (sc[j], f"b{j}"))
    if mode == "No-Frontier":  # losers compensated newest first (Saga order), with no ordering rule
        for j, before in reversed(wrote):
            if j != win:
                store.undo(name, before)
    else:
        store.restore(snap)
        store.observe(name.split(":")[0] + ":")
        store.apply(Op("set", name, 100 * i + win + 1), None)


def _conflicts(seen: list[tuple[str, int]], steps: int) -> int:
    """Per step, the distinct branch values its element showed, beyond the first: each is a
    write that landed on another branch's uncommitted or uncompensated write."""
    values = {(n, v) for n, v in seen}
    return sum(
        max(0, len({v for n, v in values if n.endswith(f"el-{i % 5}") and v // 100 == i}) - 1)
        for i in range(steps)
    )


def _t3_judge(rep: Report, res: dict[str, tuple[Estimate, Estimate, Estimate]]) -> None:
    k3 = {m: r[1] for m, r in res.items()}
    rep.check(
        k3["Tx-Full"].overlaps(k3["No-Frontier"]) and k3["Tx-Full"].overlaps(k3["CR"]),
        "k=3 success CIs overlap across modes",
        "No-Frontier's compensations restore stale before-images over the winner's write "
        f"({k3['No-Frontier'].cell()})",
    )
    gap = res["Tx-Full"][0].value - res["No-Frontier"][0].value
    rep.check(gap >= 80, f"k=1: Tx-Full - No-Frontier ≥ 80 pp ({gap:.1f} pp)")
    c = {m: r[2].value for m, r in res.items()}
    rep.check(
        c["Tx-Full"] <= 0.6 * c["No-Frontier"],
        f"Tx-Full conflicts ≤ 0.6 x No-Frontier ({c['Tx-Full']:.1f} vs {c['No-Frontier']:.1f})",
    )
    rep.check(
        k3["Tx-Full"].value == 100,
        "end-state loser writes = 0 for Tx-Full (every k=3 trial ends with the winners' values only)",
    )


def table3(cfg: Config) -> Report:
    rep = Report(
        "table3",
        "Table 3 — speculative page edits: 10 steps over 5 shared elements; "
        "k = 1 under fp 0.3, k = 3 without faults",
        [
            "Mode",
            "paper k=1",
            "ours k=1",
            "paper k=3",
            "ours k=3",
            "paper conflicts",
            "ours conflicts per trial",
        ],
        definitions=[
            *DEFINITIONS,
            CONFLICT,
            "k=3 success: the elements end holding exactly the winners' values",
        ],
    )
    lab = Lab(cfg.pg_url)
    sp.open_shared(lab.root)
    n1, n3 = cfg.n(200, 30), cfg.n(50, 8)
    res = {}
    for mode in ("Tx-Full", "No-Frontier", "CR"):
        progress(f"table3: {mode} k=1 ({n1} trials), k=3 ({n3} trials)")
        k1 = cell(lab, mode, "rows", _page_tasks(n1), 0.3)
        k3 = [_k3_trial(lab, mode, t) for t in range(n3)]
        res[mode] = (success(k1), percent([ok for ok, _ in k3]), mean([c for _, c in k3]))
        rep.row(
            mode,
            PAPER_T3[mode][0],
            res[mode][0],
            PAPER_T3[mode][1],
            res[mode][1],
            PAPER_T3[mode][2],
            res[mode][2],
        )
    sp.close_shared()
    lab.close()
    _t3_judge(rep, res)
    rep.notes.append(
        "The page is local SQLite, so CR's checkpoint covers it; the paper's CR collapse (4.7 at "
        "k=1) came from a "
        "snapshot that excluded server state (spec §5.8 #6) and does not appear here."
    )
    rep.data = {m: [e.as_json() for e in r] for m, r in res.items()}
    return rep


def _speculate_times(lab: Lab, k: int, n: int, tag: str) -> tuple[list[float], list[float], list[float]]:
    setup, commit, totals = [], [], []
    for i in range(n):
        run = f"t6-{tag}-{k}-{i}"
        lab.book.run(sp.spec_noop, run, k, run_id=run)
        stamps, (began, ended) = sp.TIMES.pop(run), sp.TIMES.pop(run + "/call")
        setup.append((min(stamps) - began) * 1e6)
        commit.append((ended - max(stamps)) * 1e6)
        totals.append((ended - began) * 1e6)
    return setup, commit, totals


def _t6_sweep(rep: Report, lab: Lab, n: int, where: str) -> dict[int, list[float]]:
    commits: dict[int, list[float]] = {}
    paper = {
        2: (13, 85, "97 / 295"),
        4: (23, 142, "165 / 273"),
        8: (44, 321, "365 / 1339"),
        16: (86, 939, "1025 / 23198"),
    }
    for k in (2, 4, 8, 16):
        progress(f"table6: {where} K={k} ({n} runs)")
        setup, commit, total = _speculate_times(lab, k, n, where[:4])
        commits[k] = commit
        rep.row(
            where,
            k,
            f"{paper[k][0]} / {paper[k][1]} / {paper[k][2]}",
            mean(setup).cell(0),
            mean(commit).cell(0),
            f"{mean(total).value:,.0f} / {p99(total):,.0f}",
        )
        rep.data[f"{where}/{k}"] = {
            "setup": mean(setup).as_json(),
            "commit": mean(commit).as_json(),
            "total": mean(total).as_json(),
            "p99": p99(total),
        }
    return commits


def _linearity(rep: Report, where: str, commits: dict[int, list[float]]) -> None:
    ks = [k for k in commits for _ in commits[k]]
    slope, _, r2 = linear_fit(ks, [c for k in commits for c in commits[k]])
    means = [sum(v) / len(v) for v in commits.values()]
    _, _, r2m = linear_fit(list(commits), means)
    rep.check(
        r2m >= 0.95,
        f"{where}: commit linear in K: R² of mean commit on K = {r2m:.3f} (per run {r2:.3f}); "
        f"{slope:,.0f} µs per extra branch (paper ~60)",
        f"commit time on {where} varies more from run to run than the per-branch cost (a shared machine)",
    )


def table6(cfg: Config) -> Report:
    rep = Report(
        "table6",
        "Table 6 — speculation latency by K (no-op branches; durable daybook store), µs",
        ["store", "K", "paper setup / commit / total / p99", "ours setup", "ours commit", "ours total / p99"],
        definitions=[
            "setup: from ctx.speculate's call until the first branch runs (epochs, tx:begin rows); "
            "commit: from "
            "the last branch's end to the winner's commit (choose, abort K-1 losers, commit); "
            "total: the whole call"
        ],
    )
    n = cfg.n(40, 10)
    lab = Lab(cfg.pg_url, root=scratch(durable=True))
    commits = _t6_sweep(rep, lab, n, "disk")
    gc.disable()  # the paper blames its K=16 p99 on CPython's collector: rerun K=16 without it
    try:
        _, _, nogc = _speculate_times(lab, 16, n, "nogc")
    finally:
        gc.enable()
    lab.close()
    shm_commits: dict[int, list[float]] = {}
    if os.path.isdir("/dev/shm"):  # the same sweep with the store on tmpfs: fsync costs nothing there
        shm = Lab(cfg.pg_url)
        shm_commits = _t6_sweep(rep, shm, n, "tmpfs")
        shm.close()
    _linearity(rep, "disk", commits)
    if shm_commits:
        _linearity(rep, "tmpfs", shm_commits)
    k16 = rep.data["disk/16"]["total"]["value"]
    rep.check(
        k16 <= 5000,
        f"K=16 total ≤ 5 ms on the durable store ({k16 / 1000:,.1f} ms)",
        "every branch's begin, abort and end are durable journal rows (SQLite, synchronous=FULL), "
        "each a commit; "
        "Atomix's figure is an in-memory library",
    )
    withgc = rep.data["disk/16"]["p99"]
    rep.data["nogc_p99"] = p99(nogc)
    rep.notes.append(
        f"GC rerun, K=16: p99 {withgc:,.0f} µs with the collector, {p99(nogc):,.0f} µs with gc.disable()."
    )
    return rep


TABLES = {"table3": table3, "table6": table6}
