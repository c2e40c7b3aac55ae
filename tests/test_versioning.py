"""Versioning: patch markers keep old runs on their path, `versions` shows the drain, and
`replay-check` catches an unmarked change."""

from __future__ import annotations

import subprocess
import sys

import pytest

import daybook
from daybook import Daybook, Suspended


def _v1() -> daybook.Workflow[list[str]]:
    @daybook.workflow(name="trip", version="1")
    def trip(ctx: daybook.Context) -> list[str]:
        steps = [ctx.decide("quote", lambda: "quote").value]
        ctx.wait_for("go")
        steps.append(ctx.decide("book", lambda: "book").value)
        return steps

    return trip


def _v2() -> daybook.Workflow[list[str]]:
    @daybook.workflow(name="trip", version="2")
    def trip(ctx: daybook.Context) -> list[str]:
        steps = [ctx.decide("quote", lambda: "quote").value]
        if ctx.patched("revalue"):
            steps.append(ctx.decide("revalue", lambda: "revalue").value)
        ctx.wait_for("go")
        steps.append(ctx.decide("book", lambda: "book").value)
        return steps

    return trip


def test_a_run_suspended_under_v1_resumes_under_v2_on_its_old_path(db_url: str) -> None:
    with Daybook(db_url, inline_wait=0.05) as book:
        with pytest.raises(Suspended):
            book.run(_v1(), run_id="old")
        v2 = _v2()
        with pytest.raises(Suspended):
            book.run(v2, run_id="new")
        state = {v["version"]: v for v in book.versions()}
        assert state["1"]["runs_without_marker"] == {"revalue": 1}
        assert state["2"]["runs_without_marker"] == {"revalue": 0}
        book.signal("old", "go")
        book.signal("new", "go")
        assert book.resume("old") == ["quote", "book"]  # skipped revalue
        assert book.resume("new") == ["quote", "revalue", "book"]  # took it
        assert all(v["in_flight"] == 0 for v in book.versions())
        assert [r["state"] for r in book.replay_check()] == ["ok", "ok"]


def test_replay_check_passes_a_body_only_change_and_fails_an_unmarked_new_step(
    db_url: str,
) -> None:
    with Daybook(db_url) as book:

        @daybook.workflow(name="rc")
        def rc(ctx: daybook.Context) -> int:
            return ctx.decide("a", lambda: 1).value

        book.run(rc, run_id="rc-1")

        @daybook.workflow(name="rc")
        def rc_body(ctx: daybook.Context) -> int:
            return ctx.decide("a", lambda: 2 - 1).value  # same steps, new body

        assert book.replay_check() == [{"run_id": "rc-1", "workflow": "rc", "state": "ok"}]

        @daybook.workflow(name="rc")
        def rc_new_step(ctx: daybook.Context) -> int:
            ctx.decide("audit", lambda: 0)
            return ctx.decide("a", lambda: 1).value

        report = book.replay_check()
        assert report[0]["state"] == "diverged" and "step 1" in str(report[0]["error"])


@pytest.mark.slow
def test_versions_and_replay_check_commands(db_url: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    app = tmp_path / "app.py"
    app.write_text(
        "import daybook\n"
        "@daybook.workflow(name='cmd')\n"
        "def cmd(ctx):\n"
        "    return ctx.decide('a', lambda: 1).value\n"
    )
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import app, "
            f"daybook; daybook.Daybook({db_url!r}).run(app.cmd, run_id='cmd-1')",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    ok = subprocess.run(
        [sys.executable, "-m", "daybook", "replay-check", "--app", str(app), "--db", db_url],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ok.returncode == 0 and "ok" in ok.stdout, ok.stderr
    app.write_text(app.read_text().replace("return ctx", "ctx.decide('new', lambda: 0)\n    return ctx"))
    bad = subprocess.run(
        [sys.executable, "-m", "daybook", "replay-check", "--app", str(app), "--db", db_url],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode == 1 and "diverged" in bad.stdout
    versions = subprocess.run(
        [sys.executable, "-m", "daybook", "versions", "--db", db_url],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert versions.returncode == 0


def test_a_pinned_worker_takes_only_runs_that_started_on_its_version(db_url: str) -> None:
    from daybook import RunStatus
    from daybook.worker import Worker

    @daybook.workflow(name="pinned", version="1")
    def v1(ctx: daybook.Context) -> str:
        return "v1"

    with Daybook(db_url) as book:
        book.submit(v1, run_id="on-v1")

        @daybook.workflow(name="pinned", version="2")
        def v2(ctx: daybook.Context) -> str:
            return "v2"

        book.submit(v2, run_id="on-v2")
        assert book.get_run("on-v1").code_version == "1"
        assert Worker(db_url, version="2", poll=0.01).run(until_idle=True).completed == 1
        assert book.get_run("on-v2").result == "v2"
        assert book.get_run("on-v1").status == RunStatus.PENDING  # left for a v1 worker
