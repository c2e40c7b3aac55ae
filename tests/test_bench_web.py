"""benchmarks/web.py itself, run at its smoke size (200 runs and a 200-step run, on SQLite) so
the benchmark of issue 30's item 8 keeps working: it fills the store, serves it with `daybook
web`, reads the browser's own clocks in headless Chromium, holds 64 live viewers open and writes
its rows. No figure is judged here (speed is measured in benchmarks/, never asserted in tests):
only that each figure is there, beside its floor."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from webtools import chromium

from daybook.web import views

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_the_web_benchmark_measures_every_page_beside_its_store_floor(tmp_path: Path) -> None:
    chromium().quit()  # skips, saying why, without Debian's chromium and chromium-driver
    out = tmp_path / "web.json"
    bench = str(ROOT / "benchmarks" / "web.py")
    proc = subprocess.run(
        [sys.executable, bench, "--n", "200", "--quick", "--no-postgres", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = json.loads(out.read_text())["rows"]
    # One store is enough to run every page, view and viewer through the browser (PostgreSQL's
    # reads are the store tests'): the other is left out, and its row says why.
    (pg,) = [r for r in rows if r["backend"] == "postgresql"]
    assert pg["skipped"] and pg["reason"] == "--no-postgres"
    lists = [r for r in rows if r["backend"] == "sqlite" and r["measure"].startswith("web_runs_list")]
    assert [r["page"] for r in lists] == ["runs list, page 1", "runs list, page 2"]
    for r in lists:
        # The browser's first contentful paint and the moment the table was in the document,
        # each a time from the navigation's start, and the ratio to reading the same rows.
        assert r["first_paint_ms"] > 0 and r["table_ms"] > 0 and r["floor_ms"] > 0
        assert r["ratio"] == pytest.approx(r["first_paint_ms"] / r["floor_ms"], rel=0.05)
    # Every registered view of the long run, waited for until drawn (data-ready), beside its
    # journal's read; the timeline's row says so when that view is not written yet.
    drawn = {r["view"]: r for r in rows if r["backend"] == "sqlite" and r.get("view")}
    assert sorted(drawn) == sorted(views.names())
    for r in drawn.values():
        assert r["ready_ms"] > 0 and r["data_ms"] > 0 and r["journal_rows"] >= 200
    if "timeline" not in views.names():
        (timeline,) = [r for r in rows if r["backend"] == "sqlite" and r["measure"] == "web_view_timeline"]
        assert timeline["skipped"] and "timeline view not present" in timeline["reason"]
    # Live viewers: every one of them got its stream (R13: they share one reader per run and
    # per stream), the inspector's CPU and the runs list's time beside the same with none.
    (live,) = [r for r in rows if r["backend"] == "sqlite" and r["measure"] == "live_viewers"]
    assert live["streaming"] == live["viewers"] == 64
    assert live["cpu_pct"] >= 0 and live["served_ms"] > 0 and live["floor_ms"] > 0
    # At the smoke size nothing is judged against the goals: every line says SKIP.
    verdicts = [line for line in proc.stdout.splitlines() if line.startswith(("PASS", "MISS"))]
    assert verdicts == []
    assert "SKIP  [sqlite] runs list, page 1 on 200 runs <= 300 ms" in proc.stdout
