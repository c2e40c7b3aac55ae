"""T11 (no-failure overhead), T28 (failure-signal normalization) and T29 (registry-only vs inline
checkpoint snapshots): runs of their own on the domains' counterparties."""

from __future__ import annotations

import contextlib
import json
import statistics
import time
from typing import Any

import agent
import dart_resources as rs
from cases import Case, spec, universe
from dart_harness import fail
from dart_report import Table
from domains import diagnosis, navigation, schedule

from daybook import Daybook, RunFailed, workflow
from daybook.recovery.signal import normalize


def _marker_bytes(book: Daybook, run: str) -> list[int]:
    return [len(json.dumps(ev.data)) for ev in book.store.load(run) if (ev.name or "").startswith("subtask:")]


def t11(workdirs: dict[str, str], think: float, runs: int) -> Table:
    t = Table(
        "T11",
        "no-failure path: the same nav and sched cases with and without subtask bookkeeping",
        [
            "domain",
            "storage",
            "method",
            "n",
            "total ms (median)",
            "planner ms",
            "hook ms",
            "peak snapshot bytes",
        ],
    )
    worst = 0.0
    peak = 0
    for dom, shape in (("nav", navigation), ("sched", schedule)):
        case = universe(shape.SHAPE)[0]
        for storage, workdir in workdirs.items():
            cp = shape.DOMAIN.setup(workdir)
            book = Daybook(f"{workdir}/t11_{dom}.journal.db")
            try:
                res = {plain: _clean(book, case, cp, plain, think, runs, storage) for plain in (True, False)}
            finally:
                cp.stop()
                book.close()
            hook = res[False][0] - res[True][0]
            if storage != "disk":
                worst = max(worst, hook)
            peak = max(peak, res[False][2])
            t.row(dom, storage, "journal only", runs, res[True][0], res[True][1], 0.0, 0)
            t.row(dom, storage, "with subtasks", runs, res[False][0], res[False][1], hook, res[False][2])
    t.check(
        worst <= 50.0,
        f"subtask bookkeeping <= about 50 ms per run excluding fsync (ours {worst:.1f} ms on tmpfs)",
    )
    t.check(peak <= 16_384, f"peak snapshot <= 16 KB (ours {peak} bytes)")
    t.notes.append(
        "'disk' journals are durable (fsync per step); the paper never wrote durably, "
        "so its hook numbers compare to 'tmpfs'"
    )
    return t


def _clean(
    book: Daybook, case: Case, cp: Any, plain: bool, think: float, runs: int, tag: str
) -> tuple[float, float, int]:
    totals, planner, peak = [], [], 0
    for i in range(runs):
        run = f"t11.{tag}.{case.cid}.{plain}.{i}"
        agent.THINK.reset(think, i)
        start = time.perf_counter()
        book.run(agent.dartb_case, spec(case, run, cp.res, plain=plain), run_id=run)
        totals.append((time.perf_counter() - start) * 1000)
        planner.append(agent.THINK.live * think * 1000)
        peak = max([peak, *_marker_bytes(book, run)])
    return statistics.median(totals), statistics.median(planner), peak


SITES = [
    (
        "nav_finalize_route_admitted",
        navigation,
        "commit",
        "admitted",
        ("http500", "timeout", "missing", "exception"),
    ),
    ("schedule_resolve_slot_admitted", schedule, "official", "admitted", ("exception", "timeout", "missing")),
    (
        "diagnosis_resolve_check_admitted",
        diagnosis,
        "official",
        "admitted",
        ("http500", "timeout", "missing"),
    ),
    ("nav_committed_consumer_blocked", navigation, "commit", "dep", ("http500", "timeout", "missing")),
    ("irreversible_effect_blocked", schedule, "commit", "effect", ("exception", "timeout", "missing")),
]


def _normalized(raw: str, site: str) -> str:
    """`normalize` applied to the raw exception itself, as the counterparty raised it."""
    try:
        rs.raise_raw(raw, site)
    except Exception as exc:
        return str(normalize(exc).value)
    return "-"


def t28(workdir: str) -> Table:
    t = Table(
        "T28",
        "failure-signal normalization: raw variants per site, real injection",
        ["site", "raw", "signal", "normalize(raw)", "decision", "checkpoint"],
    )
    for site, mod, regime, kind, raws in SITES:
        case = next(c for c in universe(mod.SHAPE) if c.regime == regime and c.kind == kind)
        cp = mod.DOMAIN.setup(workdir)
        book = Daybook(f"{workdir}/t28_{site}.journal.db")
        decisions = set()
        try:
            for raw in raws:
                run = f"t28.{site}.{raw}"
                if not fail(book, case, cp, run, raw, strict=False):
                    t.row(site, raw, "-", "-", "absorbed: retried under the same key, the run completed", "-")
                    continue
                rec = book.recover(run, dry_run=True)
                direct = _normalized(raw, site)
                kindc = rec.checkpoint.split("@")[0] if rec.checkpoint else "none"
                decisions.add((rec.reason, kindc))
                t.row(site, raw, rec.signal, direct, rec.reason, kindc)
        finally:
            cp.stop()
            book.close()
        t.check(
            len(decisions) == 1,
            f"{site}: the decision is identical across {len(raws)} raw variants ({sorted(decisions)})",
        )
    t.notes.append(
        "all five sites inject the raw error for real (the paper projected a normalized "
        "signal at two of them); a variant the runtime absorbs (an idempotent call "
        "retried after an unknown outcome) never reaches recovery and is listed, "
        "not counted"
    )
    return t


@workflow(name="dartb_depth")
def dartb_depth(ctx: Any, res: dict[str, str], run: str, depth: int, inline: bool, size: int) -> None:
    """`depth` nested instances, each committing its state: inline (the values in the checkpoint)
    or registry-only (the keys only); the innermost confirmation fails."""
    _nest(ctx, res, run, depth, inline, size, 0)


def _nest(ctx: Any, res: dict[str, str], run: str, depth: int, inline: bool, size: int, level: int) -> None:
    if level == depth:
        ctx.effect(agent.TOOLS["nav"]["confirm"], res=res, run=run, site="confirm", entity="x", value="x")
        return
    key = f"state{level}"
    state = ctx.decide(f"d{level}", lambda n: [f"poi-{i:04d}" for i in range(n)], size * (level + 1)).value
    with ctx.subtask(f"Level{level}", key) as u:
        if inline:
            u.commit(**{key: state})
        else:
            u.commit(key)
        _nest(ctx, res, run, depth, inline, size, level + 1)


def t29(workdir: str, size: int = 40) -> Table:
    t = Table(
        "T29",
        "snapshot depth: registry-only vs inline checkpoint values",
        [
            "depth",
            "registry bytes",
            "inline bytes",
            "inline/registry",
            "registry restore ms",
            "inline restore ms",
        ],
    )
    db = f"{workdir}/t29.db"
    rs.create(db)
    book = Daybook(f"{workdir}/t29.journal.db")
    out: dict[tuple[int, bool], tuple[int, float]] = {}
    try:
        for depth in range(1, 6):
            for inline in (False, True):
                run = f"t29.{depth}.{inline}"
                rs.arm(db, run, "confirm", False)
                with contextlib.suppress(RunFailed):  # the injected failure
                    book.run(dartb_depth, {"db": db}, run, depth, inline, size, run_id=run)
                start = time.perf_counter()
                book.recover(run, dry_run=True)
                out[(depth, inline)] = (sum(_marker_bytes(book, run)), (time.perf_counter() - start) * 1000)
            reg, inl = out[(depth, False)], out[(depth, True)]
            t.row(depth, reg[0], inl[0], inl[0] / reg[0], reg[1], inl[1])
    finally:
        book.close()
    ratio = out[(5, True)][0] / out[(5, False)][0]
    g_reg = out[(5, False)][0] / out[(1, False)][0]
    g_inl = out[(5, True)][0] / out[(1, True)][0]
    t.row("growth 1→5", g_reg, g_inl, "", "", "")
    t.check(
        10 <= ratio <= 200,
        f"payload ratio of the same order as the paper's 48.39 at depth 5 (ours {ratio:.2f})",
    )
    t.check(
        g_reg < g_inl,
        f"registry growth << inline growth (paper ~4 vs ~21-23; ours {g_reg:.2f} vs {g_inl:.2f})",
    )
    t.notes.append(
        f"each level's state is a list of {size}x(level+1) POI ids; the ratio scales "
        "with that choice, the ordering does not"
    )
    return t
