"""The goals of issue 28, judged from the rows of one `benchmarks/run.py` run.

Each goal is a ratio against its floor or its bound, and comes out PASS, MISS or NOT MEASURED
(with why: a module missing, a row skipped, an N that --quick leaves out). Nothing here measures:
the functions are pure, over the rows run.py measured itself (`rows`), the rows of the optional
modules it loaded (`hooks`: benchmarks/concurrency.py, workers.py, tx.py, web.py, mcp_proxy.py),
and the Atomix tables' JSON (`atomix`), so tests can judge small fake rows.

A row is the dict run.py prints: `system`, `class` (sqlite-full, sqlite-normal, postgresql),
`measure`, `n`, `us_per_step` (None when skipped, then `reason`), plus what each module adds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

PASS, MISS, NOT_MEASURED = "PASS", "MISS", "NOT MEASURED"
GOAL_NS = (1_000, 10_000, 100_000)  # goal 1's FULL ratio is asked at each of these N

Row = dict[str, Any]


@dataclass(frozen=True)
class Goal:
    goal: int  # the goal's number in issue 28
    text: str  # what is asked
    status: str  # PASS, MISS or NOT MEASURED
    figure: str  # the measured figures and the ratio, or why it is not measured
    ratio: float | None = None  # measured / bound: <= 1 passes an "at most", >= 1 an "at least"

    def line(self) -> str:
        return f"{self.status:<12}  goal {self.goal}: {self.text}: {self.figure}"

    def as_json(self) -> dict[str, Any]:
        return {
            "goal": self.goal,
            "text": self.text,
            "status": self.status,
            "figure": self.figure,
            "ratio": self.ratio,
        }


@dataclass(frozen=True)
class Hook:
    """What one optional module gave: its rows, or why there are none."""

    module: str
    rows: list[Row] = field(default_factory=list)
    missing: str | None = None  # why the module gave nothing (absent, no measure(), failed)


def at_most(goal: int, text: str, value: float, bound: float, figure: str) -> Goal:
    ratio = value / bound
    return Goal(goal, text, PASS if value <= bound else MISS, f"{figure} ({ratio:.2f}x the bound)", ratio)


def at_least(goal: int, text: str, value: float, bound: float, figure: str) -> Goal:
    ratio = value / bound
    return Goal(goal, text, PASS if value >= bound else MISS, f"{figure} ({ratio:.2f}x the bound)", ratio)


def us(x: float) -> str:
    return f"{x:.1f}" if x < 10_000 else f"{x:,.0f}"


# -- finding rows --------------------------------------------------------------------------------


def find(rows: Iterable[Row], **want: Any) -> Row | None:
    for r in rows:
        if all(r.get(k) == v for k, v in want.items()):
            return r
    return None


def measured(rows: Iterable[Row], what: str, quick: bool, **want: Any) -> Row | str:
    """The row with a figure, or why there is none."""
    row = find(rows, **want)
    if row is None:
        left_out = " (--quick measures N = 1,000 only)" if quick and want.get("n", 1_000) != 1_000 else ""
        return f"{what} not measured{left_out}"
    if row.get("skipped") or row.get("us_per_step") is None:
        return f"{what} skipped: {row.get('reason') or 'no run finished'}"
    return row


def hook_rows(hooks: dict[str, Hook], module: str) -> list[Row] | str:
    """A module's rows, or why it gave none (a module that is absent or lacks measure())."""
    hook = hooks.get(module)
    if hook is None:
        return f"benchmarks/{module}.py was not loaded"
    if hook.missing:
        return hook.missing
    return hook.rows


def hook_row(hooks: dict[str, Hook], module: str, what: str, **want: Any) -> Row | str:
    rows = hook_rows(hooks, module)
    if isinstance(rows, str):
        return rows
    row = find(rows, **want)
    if row is None:
        skipped = find(rows, skipped=True, **{k: v for k, v in want.items() if k == "backend"})
        if skipped is not None:
            return f"{what} skipped: {skipped.get('reason')}"
        shown = ", ".join(f"{k}={v}" for k, v in want.items())
        return f"benchmarks/{module}.py gave no row with {shown}"
    if row.get("skipped"):
        return f"{what} skipped: {row.get('reason')}"
    return row


def not_measured(goal: int, text: str, why: str) -> Goal:
    return Goal(goal, text, NOT_MEASURED, why)


# -- goal 1: the hot path --------------------------------------------------------------------------


def _pair(rows: list[Row], quick: bool, klass: str, floor: str, n: int) -> tuple[Row | str, Row | str]:
    """daybook's fresh row and its floor's, of one durability class at one N."""
    ours = measured(
        rows, f"daybook {klass} at N={n:,}", quick, system="daybook", measure="fresh", n=n, **{"class": klass}
    )
    base = measured(
        rows,
        f"the {floor} {klass} floor at N={n:,}",
        quick,
        system=floor,
        measure="floor",
        n=n,
        **{"class": klass},
    )
    return ours, base


FLOORS = {"sqlite-full": "sqlite3", "sqlite-normal": "sqlite3", "postgresql": "psycopg"}
NAMES = {"sqlite-full": "SQLite FULL", "sqlite-normal": "SQLite NORMAL", "postgresql": "PostgreSQL"}


def _ratio_to_floor(rows: list[Row], quick: bool, klass: str, n: int, bound: float) -> Goal:
    floor = FLOORS[klass]
    what = f"{NAMES[klass]} effect step <= {bound}x the raw {floor} 2-commit floor [N={n:,}]"
    ours, base = _pair(rows, quick, klass, floor, n)
    if isinstance(ours, str) or isinstance(base, str):
        return not_measured(1, what, ours if isinstance(ours, str) else str(base))
    a, b = ours["us_per_step"], base["us_per_step"]
    return at_most(1, what, a / b, bound, f"{us(a)} / {us(b)} us = {a / b:.2f}x")


def goal1(rows: list[Row], quick: bool) -> list[Goal]:
    ns = sorted({r["n"] for r in rows if r.get("measure") == "fresh"}) or [1_000]
    out = []
    for n in ns:
        ours, base = _pair(rows, quick, "sqlite-normal", "sqlite3", n)
        text = f"daybook's own time per effect step <= 30 us (SQLite NORMAL minus its floor) [N={n:,}]"
        if isinstance(ours, str) or isinstance(base, str):
            out.append(not_measured(1, text, ours if isinstance(ours, str) else str(base)))
        else:
            own = ours["us_per_step"] - base["us_per_step"]
            figure = f"{us(ours['us_per_step'])} - {us(base['us_per_step'])} us = {us(own)} us"
            out.append(at_most(1, text, own, 30.0, figure))
        out.append(_ratio_to_floor(rows, quick, "sqlite-normal", n, 1.3))
    out += [_ratio_to_floor(rows, quick, "sqlite-full", n, 1.05) for n in GOAL_NS]
    out += [_ratio_to_floor(rows, quick, "postgresql", n, 1.1) for n in ns]
    return out


# -- goal 2: one fsync per effect step -------------------------------------------------------------

SETTLE_TEXT = "a step of a tool daybook settles by itself"


def goal2(rows: list[Row], quick: bool) -> list[Goal]:
    """From run.py's `settle` cell (SQLite FULL): a status-query, idempotent tool's effect step,
    with the commits the store made per step counted in an untimed run of the same cell."""
    n = 1_000
    texts = (
        f"one commit (fsync) per effect step: {SETTLE_TEXT}, SQLite FULL",
        f"{SETTLE_TEXT} <= 0.6x the raw sqlite3 FULL 2-commit floor [N={n:,}]",
    )
    row = measured(rows, "the settle cell", quick, system="daybook", measure="settle", n=n)
    if isinstance(row, str):
        return [not_measured(2, t, row) for t in texts]
    commits = row.get("commits_per_step")
    if commits is None or not row.get("deferred"):
        why = row.get("deferral") or "the cell found no option or tool profile that defers the outcome commit"
        shown = "" if commits is None else f" ({commits:.2f} commits per step)"
        return [not_measured(2, t, why + shown) for t in texts]
    floor = measured(
        rows,
        "the sqlite3 FULL floor",
        quick,
        system="sqlite3",
        measure="floor",
        n=n,
        **{"class": "sqlite-full"},
    )
    steps = row.get("step_commits_per_step", commits)  # older JSON: the run's start and end in it
    shown = f"{steps:.3f} commits per effect step ({commits:.3f} with the run's start and end)"
    out = [at_most(2, texts[0], steps, 1.0, shown)]
    if isinstance(floor, str):
        out.append(not_measured(2, texts[1], floor))
    else:
        a, b = row["us_per_step"], floor["us_per_step"]
        out.append(at_most(2, texts[1], a / b, 0.6, f"{us(a)} / {us(b)} us = {a / b:.2f}x"))
    return out


# -- goal 3: group commit across runs --------------------------------------------------------------


def goal3(hooks: dict[str, Hook], cores: int) -> list[Goal]:
    text = "32 concurrent runs on one SQLite file >= 5x one run's step rate"
    row = hook_row(hooks, "concurrency", "32 concurrent runs", measure="concurrent_runs_32")
    if isinstance(row, str):
        out = [not_measured(3, text, row)]
    else:
        x = float(row["speedup_vs_1_run"])
        out = [at_least(3, text, x, 5.0, f"{x:.2f}x ({row.get('steps_per_s')} steps/s)")]
    rows = hook_rows(hooks, "workers")
    if isinstance(rows, str):
        return [*out, not_measured(3, "PostgreSQL: N workers >= 0.8 x min(N, cores) x one worker", rows)]
    one = find(rows, workers=1)
    many = [
        r for r in rows if isinstance(r.get("workers"), int) and r["workers"] > 1 and not r.get("skipped")
    ]
    if one is None or one.get("skipped") or not many:
        skipped = find(rows, skipped=True)
        why = f"skipped: {skipped.get('reason')}" if skipped else "benchmarks/workers.py gave no 1-worker row"
        return [*out, not_measured(3, "PostgreSQL: N workers >= 0.8 x min(N, cores) x one worker", why)]
    for r in many:
        n = r["workers"]
        bound = 0.8 * min(n, cores)
        x = r["effects_per_s"] / one["effects_per_s"]
        text = f"PostgreSQL: {n} workers >= 0.8 x min({n}, {cores} cores) = {bound:.1f}x one worker"
        figure = f"{r['effects_per_s']:,.0f} / {one['effects_per_s']:,.0f} effects/s = {x:.2f}x"
        out.append(at_least(3, text, x, bound, figure))
    return out


# -- goal 4: transactions --------------------------------------------------------------------------

TX_PER_S = {"sqlite": 2_000.0, "postgresql": 1_000.0}


def _tx_speed(hooks: dict[str, Hook], backend: str, bound: float) -> Goal:
    text = f"{backend}: 16 concurrent durable transactions >= {bound:,.0f} tx/s"
    row = hook_row(hooks, "tx", text, measure="tx_concurrent_16", backend=backend)
    if isinstance(row, str):
        return not_measured(4, text, row)
    x = float(row["tx_per_s"])
    atomix = row.get("atomix_in_memory_tx_per_s")
    beside = f"; Atomix in memory {atomix:,} tx/s" if atomix else ""
    return at_least(4, text, x, bound, f"{x:,.0f} tx/s{beside}")


def _tx_step(hooks: dict[str, Hook], backend: str) -> Goal:
    text = f"{backend}: a transactional step <= 1.2x a plain one"
    row = hook_row(hooks, "tx", text, measure="tx_step", backend=backend)
    if isinstance(row, str):
        return not_measured(4, text, row)
    x = float(row["ratio"])
    return at_most(4, text, x, 1.2, f"{x:.2f}x")


def _speculate(hooks: dict[str, Hook], backend: str) -> Goal:
    text = f"{backend}: ctx.speculate at K=16 <= 10 ms durable"
    row = hook_row(hooks, "tx", text, measure="speculate", backend=backend, k=16)
    if isinstance(row, str):
        return not_measured(4, text, row)
    x = float(row["ms"])
    atomix = row.get("atomix_in_memory_ms")
    return at_most(4, text, x, 10.0, f"{x:,.1f} ms" + (f"; Atomix in memory {atomix} ms" if atomix else ""))


def goal4(hooks: dict[str, Hook]) -> list[Goal]:
    """From benchmarks/tx.py, on each backend (Atomix's in-memory figures printed beside)."""
    out = [_tx_speed(hooks, backend, bound) for backend, bound in TX_PER_S.items()]
    out += [_tx_step(hooks, backend) for backend in TX_PER_S]
    out += [_speculate(hooks, backend) for backend in TX_PER_S]
    return out


# -- goal 5: the web and the proxy ------------------------------------------------------------------


def _runs_list(hooks: dict[str, Hook]) -> list[Goal]:
    """Every page of the runs list benchmarks/web.py measured (the first, one deep in the list)."""
    text = "the runs list paints in <= 300 ms on 10,000 runs"
    rows = hook_rows(hooks, "web")
    if isinstance(rows, str):
        return [not_measured(5, text, rows)]
    pages = [r for r in rows if str(r.get("measure", "")).startswith("web_runs_list")]
    if not pages:
        skipped = find(rows, skipped=True)
        why = (
            f"skipped: {skipped.get('reason')}" if skipped else "benchmarks/web.py gave no web_runs_list row"
        )
        return [not_measured(5, text, why)]
    out = []
    for row in pages:
        what = f"{text} ({row.get('page', row['measure'])})"
        if row.get("skipped"):
            out.append(not_measured(5, what, f"skipped: {row.get('reason')}"))
        elif row.get("n", 0) < 10_000:
            out.append(not_measured(5, what, f"measured on {row.get('n')} runs only"))
        else:
            painted = row.get("first_paint_ms")
            ms, how = (
                (painted, "first paint") if painted is not None else (row["served_ms"], "served, no browser")
            )
            out.append(at_most(5, what, float(ms), 300.0, f"{how} {ms:,.0f} ms on {row['n']:,} runs"))
    return out


def goal5(hooks: dict[str, Hook]) -> list[Goal]:
    out = _runs_list(hooks)
    text = "a journaled MCP call through the proxy adds <= 2 ms at the median (synchronous=FULL, the default)"
    row = hook_row(hooks, "mcp_proxy", text, measure="mcp_proxy_full")
    if isinstance(row, str):
        out.append(not_measured(5, text, row))
    else:
        added = float(row["added_ms"])
        normal = hook_row(hooks, "mcp_proxy", "", measure="mcp_proxy_normal")
        beside = f"; synchronous=NORMAL {normal['added_ms']:.2f} ms" if isinstance(normal, dict) else ""
        figure = f"{added:.2f} ms ({row.get('proxied_ms')} vs {row.get('direct_ms')} ms direct){beside}"
        out.append(at_most(5, text, added, 2.0, figure))
    return out


# -- goal 6: the Atomix tables' intervals ----------------------------------------------------------


def _estimates(node: Any) -> Iterable[dict[str, Any]]:
    """Every estimate (a dict with value, lo, hi, n) anywhere in an Atomix table's data."""
    if isinstance(node, dict):
        if {"value", "lo", "hi", "n"} <= node.keys():
            yield node
        else:
            for v in node.values():
                yield from _estimates(v)
    elif isinstance(node, list):
        for v in node:
            yield from _estimates(v)


def goal6(atomix: dict[str, Any] | None, source: str) -> list[Goal]:
    """Every share of runs in the Atomix tables carries an exact interval (never one point at 0/n
    or n/n), so no criterion is judged on a collapsed interval."""
    texts = (
        "Atomix tables: every share of runs has an exact (Clopper-Pearson) interval, none a single point",
        "Atomix tables: no criterion missed for an interval collapsed to one point",
    )
    if atomix is None:
        return [not_measured(6, t, f"no Atomix results at {source}") for t in texts]
    tables = atomix.get("tables") or []
    found = [e for t in tables for e in _estimates(t.get("data"))]
    shares = [e for e in found if e.get("ci") == "exact"]
    untold = [e for e in found if "ci" not in e]  # written before the intervals said their kind
    points = [e for e in (shares or untold) if e.get("n") and e["lo"] == e["hi"]]
    checks = [c for t in tables for c in t.get("reproduced") or []]
    point = [c for c in checks if not c["yes"] and "single point" in c["criterion"]]
    yes = sum(1 for c in checks if c["yes"])
    run = "quick" if atomix.get("quick") else "full"
    where = f"{source}, {run} run: {yes} of {len(checks)} criteria reproduced"
    if untold:
        first = f"{len(untold)} estimates name no interval (an older JSON), {len(points)} of them one point"
    else:
        means = len(found) - len(shares)
        first = (
            f"{len(shares)} shares with an exact interval, {len(points)} of them one point; "
            f"{means} totals and means keep the bootstrap"
        )
    misses = len(checks) - yes
    second = f"{len(point)} of {misses} misses from a one-point interval"
    ok = bool(shares) and not untold and not points
    return [
        Goal(
            6,
            texts[0],
            PASS if ok else MISS,
            f"{first} ({where})",
            len(points) / max(1, len(shares or untold)),
        ),
        Goal(
            6,
            texts[1],
            PASS if checks and not point else MISS,
            f"{second} ({where})",
            len(point) / max(1, misses),
        ),
    ]


# -- all of them -----------------------------------------------------------------------------------


def judge(
    rows: list[Row],
    hooks: dict[str, Hook],
    atomix: dict[str, Any] | None,
    *,
    quick: bool,
    cores: int,
    atomix_source: str = "benchmarks/results/atomix.json",
) -> list[Goal]:
    parts: list[Callable[[], list[Goal]]] = [
        lambda: goal1(rows, quick),
        lambda: goal2(rows, quick),
        lambda: goal3(hooks, cores),
        lambda: goal4(hooks),
        lambda: goal5(hooks),
        lambda: goal6(atomix, atomix_source),
    ]
    return [g for part in parts for g in part()]


def summary(goals: list[Goal]) -> str:
    counts = {s: sum(1 for g in goals if g.status == s) for s in (PASS, MISS, NOT_MEASURED)}
    return ", ".join(f"{n} {s}" for s, n in counts.items())
