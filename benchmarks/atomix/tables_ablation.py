"""Ablations and sanity checks on the sequential harness: Table 7 (frontier vs retry), Table 8
(short web tasks, with the CR row the paper lacks), Table 11 (30-call tasks at several fault
rates), Table 12 (retry budget under both fault models) and A.6 (10 sequential SQLite writes:
correct state and corruption)."""

from __future__ import annotations

from harness import Outcome
from policies import MODES
from report import DEFINITIONS, Config, Report, analytic_plain, analytic_tx, est_json, faults, success
from stats import percent
from tables_recovery import degenerate, sweep
from workloads import Lab, tasks

RETRYING = ("Tx-Full", "Tx-NoFrontier+Retry", "CR")


def table7(cfg: Config) -> Report:
    rep = Report(
        "table7",
        "Table 7 — frontier vs retry ablation, 10-step SQLite task, n = 30, fp = 0.3",
        ["Mode", "paper success", "ours", "analytic", "paper faults", "ours faults", "expected faults"],
        definitions=DEFINITIONS,
    )
    paper = {
        "Tx-Full": (90, 121),
        "Tx-NoFrontier+Retry": (93, 108),
        "No-Frontier": (0, 30),
        "No-Tx": (3, 29),
        "CR": (0, 30),
    }
    lab = Lab(cfg.pg_url)
    ts = tasks("rows", 30, (10, 10), 7)
    res = sweep(lab, "table7", tuple(paper), "rows", ts, 0.3)
    lab.close()
    want = {m: 300 * 0.3 / 0.7 if m in RETRYING else 30 * (1 - 0.7**10) for m in paper}
    for mode, (ps, pf) in paper.items():
        ana = analytic_tx(0.3, 10) if mode in RETRYING else analytic_plain(0.3, 10)
        rep.row(mode, ps, success(res[mode]), f"{ana:.1f}", pf, faults(res[mode]), f"{want[mode]:.0f}")
    s = {m: success(o) for m, o in res.items()}
    rep.check(s["Tx-NoFrontier+Retry"].overlaps(s["Tx-Full"]), "Tx-NoFrontier+Retry CI overlaps Tx-Full")
    rep.check(max(s["No-Frontier"].value, s["No-Tx"].value) <= 5, "No-Frontier and No-Tx ≤ 5%")
    for mode in paper:
        f = faults(res[mode])
        rep.check(
            f.contains(want[mode]),
            f"{mode}: total faults CI {f.cell(0)} contains the expected {want[mode]:.0f}",
            degenerate(f, want[mode], share=False),
        )
    rep.notes.append(
        "Expected faults: 300·fp/(1-fp) ≈ 129 for retrying modes (spec §6.2; it ignores the cap of 4 "
        "attempts per call), 30·(1-0.7^10) ≈ 29 for modes that stop at their first fault."
    )
    rep.data = {m: est_json(o) for m, o in res.items()}
    return rep


def table8(cfg: Config) -> Report:
    rep = Report(
        "table8",
        "Table 8 — short web tasks (6 tasks, 4-8 calls), success %",
        ["Mode", "paper fp 0", "ours fp 0", "paper fp 0.3", "ours fp 0.3", "analytic fp 0.3"],
        definitions=DEFINITIONS,
    )
    paper = {"Tx-Full": (100, 100), "CR": ("—", "—"), "No-Frontier": (100, 67), "No-Tx": (100, 50)}
    lab = Lab(cfg.pg_url)
    ts = tasks("web", 6, (4, 8), 8)
    reps = cfg.n(5, 1)
    zero, hot = (sweep(lab, "table8", MODES, "web", ts, fp, repeats=reps) for fp in (0.0, 0.3))
    lab.close()
    lengths = [len(t.ops) for t in ts]
    for mode in MODES:
        f = analytic_tx if mode in ("Tx-Full", "CR") else analytic_plain
        ana = sum(f(0.3, n) for n in lengths) / len(lengths)
        rep.row(mode, paper[mode][0], success(zero[mode]), paper[mode][1], success(hot[mode]), f"{ana:.1f}")
    rep.check(all(success(zero[m]).value == 100 for m in MODES), "every mode 100% at fp 0")
    tx = success(hot["Tx-Full"])
    rep.check(
        tx.value == 100,
        f"Tx-Full 100% at fp 0.3 ({tx.cell()})",
        "with 4 attempts a call still fails with probability 0.3^4 = 0.8%, "
        "so the analytic level is ~95%, not 100%",
    )
    rep.data = {
        "0": {m: est_json(o) for m, o in zero.items()},
        "0.3": {m: est_json(o) for m, o in hot.items()},
    }
    return rep


PAPER_T11 = {0.05: (71, 14, 0, 60, 10, 0), 0.1: (71, 0, 0, 50, 0, 10), 0.3: (14, 0, 0, 60, 0, 0)}


def table11(cfg: Config) -> Report:
    rep = Report(
        "table11",
        "Table 11 — 30-call tasks at several fault rates, success % (paper · ours · analytic)",
        ["fp", "desktop Tx", "desktop No-Fr", "desktop No-Tx", "web Tx", "web No-Fr", "web No-Tx"],
        definitions=DEFINITIONS,
    )
    modes = ("Tx-Full", "No-Frontier", "No-Tx")
    lab = Lab(cfg.pg_url)
    reps = cfg.n(2, 1)
    desk, web = tasks("desktop", cfg.n(7, 4), (30, 30), 11), tasks("web", cfg.n(10, 5), (30, 30), 11)
    for fp in (0.05, 0.1, 0.3):
        res = {
            wl: sweep(lab, "table11", modes, wl, ts, fp, repeats=reps)
            for wl, ts in (("desktop", desk), ("web", web))
        }
        cells = []
        for i, (wl, mode) in enumerate((w, m) for w in ("desktop", "web") for m in modes):
            ana = analytic_tx(fp, 30) if mode == "Tx-Full" else analytic_plain(fp, 30)
            cells.append(f"{PAPER_T11[fp][i]} · {success(res[wl][mode]).cell()} · {ana:.1f}")
        rep.row(fp, *cells)
        for wl in ("desktop", "web"):
            s = {m: success(res[wl][m]) for m in modes}
            top = max(s["No-Frontier"].value, s["No-Tx"].value)
            rep.check(
                s["Tx-Full"].value > top,
                f"fp {fp} {wl}: Tx-Full > both baselines ({s['Tx-Full'].value:.1f} vs {top:.1f})",
            )
        rep.data[str(fp)] = {wl: {m: est_json(o) for m, o in r.items()} for wl, r in res.items()}
    lab.close()
    rep.notes.append(
        "n = the paper's task count (7 desktop, 10 web) x 2 repeats (--quick: 4 and 5 tasks, once)."
    )
    return rep


INDEPENDENT = {0: 2.8, 1: 38.9, 2: 76.1, 3: 92.2, 5: 99.3}
PAPER_T12 = {0: (5, 5), 1: (95, 80), 2: (97, 82), 3: (98, 83), 5: (99, 83)}


def table12(cfg: Config) -> Report:
    rep = Report(
        "table12",
        f"Table 12 — retry budget, 10-step SQLite task, n = {cfg.n(30, 15)}, fp = 0.3, success %",
        [
            "max_retries",
            "paper Tx-Full",
            "paper No-Frontier",
            "analytic (independent)",
            "Tx-Full independent",
            "Tx-NoFrontier+Retry independent",
            "Tx-Full fault-once",
            "Tx-NoFrontier+Retry fault-once",
        ],
        definitions=[
            *DEFINITIONS,
            "fault-once: a call can fault only at its first attempt (a retry never re-faults)",
        ],
    )
    lab = Lab(cfg.pg_url)
    ts = tasks("rows", cfg.n(30, 15), (10, 10), 12)
    res: dict[tuple[int, bool], dict[str, list[Outcome]]] = {}
    modes = ("Tx-Full", "Tx-NoFrontier+Retry")
    for r in INDEPENDENT:
        for once in (False, True):
            res[(r, once)] = sweep(
                lab, f"table12 R={r} once={once}", modes, "rows", ts, 0.3, retries=r, once=once
            )
        rep.row(
            r, *PAPER_T12[r], INDEPENDENT[r], *(success(res[(r, o)][m]) for o in (False, True) for m in modes)
        )
    lab.close()
    for r, want in INDEPENDENT.items():
        got = success(res[(r, False)]["Tx-Full"])
        rep.check(
            got.contains(want),
            f"independent R={r}: Tx-Full CI {got.cell()} contains {want}",
            degenerate(got, want),
        )
    by_r = {r: success(res[(r, True)]["Tx-Full"]) for r in INDEPENDENT}
    jumps = {
        r: by_r[r].value - by_r[prev].value
        for prev, r in zip(list(INDEPENDENT)[:-1], list(INDEPENDENT)[1:], strict=True)
    }
    shown = ", ".join(f"R={r}: {j:+.1f} pp" for r, j in jumps.items())
    rep.check(max(jumps, key=lambda r: jumps[r]) == 1, f"fault-once: the biggest jump is 0→1 ({shown})")
    rep.check(by_r[3].overlaps(by_r[5]), "fault-once: flat after 3 (R=3 and R=5 CIs overlap)")
    rep.notes.append(
        "The paper's No-Frontier column has retries although No-Frontier is defined without them "
        "(§5.8 #8): ours is Tx-NoFrontier+Retry."
    )
    rep.data = {
        f"{r}/{'once' if o else 'independent'}": {m: est_json(x) for m, x in v.items()}
        for (r, o), v in res.items()
    }
    return rep


PAPER_A6 = {
    "Tx-Full": "100 at every fp",
    "CR": "100 at every fp",
    "No-Frontier": "46 → 5 → 0, no corruption",
    "No-Tx": "39 → 3 → 0; 30% corruption at 0.3",
}


def a6(cfg: Config) -> Report:
    rep = Report(
        "a6",
        "A.6 — 10 sequential SQLite row writes: correct state % and corruption %",
        ["fp", "Mode", "paper", "analytic", "correct state", "corruption"],
        definitions=[
            *DEFINITIONS,
            "correct state: end rows equal the ground truth; corruption: the end rows are "
            "not the state after any prefix of the script (a torn, lost or doubled write)",
        ],
    )
    lab = Lab(cfg.pg_url)
    ts = tasks("rows", cfg.n(100, 15), (10, 10), 6)
    res = {fp: sweep(lab, "a6", MODES, "rows", ts, fp) for fp in (0.0, 0.1, 0.3, 0.5)}
    lab.close()
    for fp, by in res.items():
        for mode in MODES:
            ana = analytic_tx(fp, 10) if mode in ("Tx-Full", "CR") else analytic_plain(fp, 10)
            rep.row(
                fp,
                mode,
                PAPER_A6[mode],
                f"{ana:.1f}",
                success(by[mode]),
                percent([o.corrupt for o in by[mode]]),
            )
    for mode in ("Tx-Full", "CR"):
        worst = min(success(by[mode]).value for by in res.values())
        rep.check(
            worst == 100,
            f"{mode} 100% correct at every fp (lowest {worst:.1f})",
            "with max_retries 3 a call fails with fp^4 (0.5^4 = 6%), so 10 calls succeed 52% at fp 0.5; "
            "the paper's 100% needs unbounded retries (spec §5.8 #7)",
        )
    nf = max(percent([o.corrupt for o in by["No-Frontier"]]).value for by in res.values())
    rep.check(nf == 0, "No-Frontier corruption 0 at every fp")
    nt = percent([o.corrupt for o in res[0.3]["No-Tx"]])
    rep.check(
        nt.value > 0,
        f"No-Tx corruption > 0 at fp 0.3 ({nt.cell()})",
        "our No-Tx agent stops at its first error and a lost-reply write is whole, so its rows are always a "
        "clean prefix of the script; the paper does not say what produced its 30%",
    )
    rep.data = {str(fp): {m: est_json(o) for m, o in by.items()} for fp, by in res.items()}
    return rep


TABLES = {"table7": table7, "table8": table8, "table11": table11, "table12": table12, "a6": a6}
