"""How benchmarks/run.py judges the goals of issue 28 (benchmarks/goals.py), on small fake rows:
each goal is PASS or MISS by its ratio, and NOT MEASURED (never PASS) when its row, its module
or its module's measure() is missing. No benchmark runs here."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import goals
from goals import MISS, NOT_MEASURED, PASS, Hook, judge


def row(
    system: str, klass: str, measure: str, us: float | None, n: int = 1_000, **extra: Any
) -> dict[str, Any]:
    return {"system": system, "class": klass, "measure": measure, "n": n, "us_per_step": us, **extra}


def core_rows(normal: float = 110.0, full: float = 1040.0, pg: float = 1050.0) -> list[dict[str, Any]]:
    return [
        row("sqlite3", "sqlite-normal", "floor", 100.0),
        row("daybook", "sqlite-normal", "fresh", normal),
        row("sqlite3", "sqlite-full", "floor", 1000.0),
        row("daybook", "sqlite-full", "fresh", full),
        row("psycopg", "postgresql", "floor", 1000.0),
        row("daybook", "postgresql", "fresh", pg),
    ]


def by_text(found: list[goals.Goal], part: str) -> list[goals.Goal]:
    return [g for g in found if part in g.text]


def test_goal1_passes_within_its_bounds_and_names_the_ratio() -> None:
    found = goals.goal1(core_rows(), quick=True)
    own = by_text(found, "own time")[0]
    assert own.status == PASS and "10.0 us" in own.figure and own.ratio == 10.0 / 30.0
    assert by_text(found, "NORMAL effect step")[0].status == PASS  # 1.10x <= 1.3x
    full = by_text(found, "FULL effect step")
    assert [g.status for g in full] == [PASS, NOT_MEASURED, NOT_MEASURED]  # --quick: N=1,000 only
    assert "--quick" in full[1].figure
    assert by_text(found, "PostgreSQL")[0].status == PASS


def test_goal1_misses_above_its_bounds() -> None:
    found = goals.goal1(core_rows(normal=150.0, full=1100.0, pg=1200.0), quick=False)
    assert by_text(found, "own time")[0].status == MISS  # 50 us > 30 us
    assert by_text(found, "NORMAL effect step")[0].status == MISS  # 1.5x
    assert by_text(found, "FULL effect step")[0].status == MISS  # 1.10x > 1.05x
    assert by_text(found, "PostgreSQL")[0].status == MISS  # 1.2x > 1.1x


def test_a_skipped_row_is_not_measured_with_its_reason() -> None:
    rows = core_rows()
    rows[-1] = row("daybook", "postgresql", "fresh", None, skipped=True, reason="PostgreSQL unreachable")
    pg = by_text(goals.goal1(rows, quick=True), "PostgreSQL")[0]
    assert pg.status == NOT_MEASURED and "PostgreSQL unreachable" in pg.figure


def test_goal2_is_not_measured_until_the_outcome_commit_is_deferred() -> None:
    settle = row("daybook", "sqlite-full", "settle", 1000.0, commits_per_step=2.01, deferred=False,
                 deferral="no option or tool profile deferred the outcome commit")  # fmt: skip
    found = goals.goal2([*core_rows(), settle], quick=True)
    assert [g.status for g in found] == [NOT_MEASURED, NOT_MEASURED]
    assert "2.01 commits per step" in found[0].figure
    assert all(g.status == NOT_MEASURED for g in goals.goal2(core_rows(), quick=True))


def test_goal2_judges_a_deferred_step_against_the_floor() -> None:
    fast = row("daybook", "sqlite-full", "settle", 550.0, commits_per_step=1.01, deferred=True)
    one, ratio = goals.goal2([*core_rows(), fast], quick=True)
    assert one.status == MISS  # 1.01 commits per step: the run's start and end rows count too
    assert ratio.status == PASS and ratio.ratio is not None and round(ratio.ratio, 3) == round(0.55 / 0.6, 3)
    slow = {**fast, "us_per_step": 700.0, "commits_per_step": 1.0}
    one, ratio = goals.goal2([*core_rows(), slow], quick=True)
    assert (one.status, ratio.status) == (PASS, MISS)


def test_goal3_from_the_concurrency_and_workers_rows() -> None:
    hooks = {
        "concurrency": Hook("concurrency", [{"measure": "concurrent_runs_32", "speedup_vs_1_run": 5.2}]),
        "workers": Hook(
            "workers",
            [
                {"measure": "workers_1", "workers": 1, "effects_per_s": 100.0},
                {"measure": "workers_4", "workers": 4, "effects_per_s": 150.0},
            ],
        ),
    }
    conc, four = goals.goal3(hooks, cores=2)
    assert conc.status == PASS
    assert four.status == MISS and "1.6x" in four.text  # 0.8 x min(4, 2) = 1.6 > 1.5
    assert goals.goal3(hooks, cores=1)[1].status == PASS  # 0.8 x 1 = 0.8 <= 1.5


def test_a_missing_module_or_measure_is_never_a_pass() -> None:
    hooks = {
        "concurrency": Hook("concurrency", missing="benchmarks/concurrency.py does not exist"),
        "tx": Hook("tx", missing="benchmarks/tx.py has no measure(quick)"),
    }
    found = [*goals.goal3(hooks, cores=2), *goals.goal4(hooks), *goals.goal5(hooks)]
    assert found and all(g.status == NOT_MEASURED for g in found)
    assert "does not exist" in found[0].figure
    assert any("has no measure(quick)" in g.figure for g in found)
    assert any("web.py was not loaded" in g.figure for g in found)


def test_goal4_and_goal5_read_the_modules_rows() -> None:
    hooks = {
        "tx": Hook(
            "tx",
            [
                {"backend": "sqlite", "measure": "tx_concurrent_16", "tx_per_s": 2500.0},
                {"backend": "postgresql", "measure": "tx_concurrent_16", "tx_per_s": 900.0},
                {"backend": "sqlite", "measure": "tx_step", "ratio": 1.1},
                {"backend": "sqlite", "measure": "speculate", "k": 8, "ms": 50.0},
                {"backend": "sqlite", "measure": "speculate", "k": 16, "ms": 12.0},
            ],
        ),
        "web": Hook("web", [{"measure": "web_runs_list_page_1", "n": 10_000, "first_paint_ms": 250.0}]),
        "mcp_proxy": Hook(
            "mcp_proxy",
            [
                {"measure": "mcp_proxy_full", "added_ms": 2.5},
                {"measure": "mcp_proxy_normal", "added_ms": 0.9},
            ],
        ),
    }
    found = goals.goal4(hooks)
    assert [(g.status, g.text.split(":")[0]) for g in found] == [
        (PASS, "sqlite"),  # 2,500 tx/s >= 2,000
        (MISS, "postgresql"),  # 900 < 1,000
        (PASS, "sqlite"),  # 1.1x <= 1.2x
        (NOT_MEASURED, "postgresql"),  # no PostgreSQL tx_step row: never a pass
        (MISS, "sqlite"),  # K=16 12 ms > 10 ms (the K=8 row is not the goal's)
        (NOT_MEASURED, "postgresql"),
    ]
    web, proxy = goals.goal5(hooks)
    assert (web.status, proxy.status) == (PASS, MISS) and "NORMAL 0.90 ms" in proxy.figure
    small = {"web": Hook("web", [{"measure": "web_runs_list_page_1", "n": 1_000, "served_ms": 10.0}])}
    assert goals.goal5(small)[0].status == NOT_MEASURED
    pages = [
        {"measure": "web_runs_list_page_1", "page": "page 1", "n": 10_000, "served_ms": 200.0},
        {"measure": "web_runs_list_page_100", "page": "page 100", "n": 10_000, "first_paint_ms": 420.0},
        {"measure": "web_run_of_10000_steps", "n": 10_000, "first_paint_ms": 900.0},
    ]
    first, deep, _ = goals.goal5({"web": Hook("web", pages)})
    assert (first.status, deep.status) == (PASS, MISS) and "served, no browser" in first.figure


def _atomix(ci: str | None, lo: float, criterion: str, yes: bool) -> dict[str, Any]:
    est: dict[str, Any] = {"value": 100.0, "lo": lo, "hi": 100.0, "n": 40}
    if ci:
        est["ci"] = ci
    return {
        "quick": True,
        "tables": [{"data": {"web/0.1": {"Tx-Full": {"success": est}}}, "reproduced": [
            {"yes": yes, "criterion": criterion}, {"yes": False, "criterion": "K=16 total <= 5 ms"}]}],
    }  # fmt: skip


def test_goal6_on_the_atomix_json() -> None:
    old = _atomix(None, 100.0, "CI contains 99.9 — not met: the single point 100.0", False)
    assert [g.status for g in goals.goal6(old, "x.json")] == [MISS, MISS]
    assert "name no interval" in goals.goal6(old, "x.json")[0].figure
    new = _atomix("exact", 91.2, "CI contains 99.9", True)
    found = goals.goal6(new, "x.json")
    assert [g.status for g in found] == [PASS, PASS] and "1 of 2 criteria reproduced" in found[0].figure
    assert [g.status for g in goals.goal6(None, "x.json")] == [NOT_MEASURED, NOT_MEASURED]
    # A mean over runs that all agree (conflicts per trial) keeps its one-point bootstrap interval.
    new["tables"][0]["data"]["conflicts"] = {"value": 20.0, "lo": 20.0, "hi": 20.0, "n": 8, "ci": "bootstrap"}
    assert goals.goal6(new, "x.json")[0].status == PASS


def test_judge_lists_every_goal_in_order() -> None:
    found = judge(core_rows(), {}, None, quick=True, cores=2)
    assert sorted({g.goal for g in found}) == [1, 2, 3, 4, 5, 6]
    assert [g.goal for g in found] == sorted(g.goal for g in found)
    assert all(g.status in (PASS, MISS, NOT_MEASURED) for g in found)
    assert goals.summary(found).startswith(f"{sum(g.status == PASS for g in found)} PASS")
    assert all(g.line().startswith(g.status) and g.as_json()["goal"] == g.goal for g in found)
