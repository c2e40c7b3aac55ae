"""The documented CLI: demo, runs, show, resume, export, unknowns, resolve; errors exit non-zero."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import agents
import pytest
from conftest import cli, cli_in_process, killed, run_child

import daybook
from daybook import Daybook


@pytest.mark.slow
def test_demo_kills_the_agent_mid_wire_and_the_bank_sees_one_wire(tmp_path: Path) -> None:
    proc = cli("demo", "--db", f"sqlite:///{tmp_path / 'demo.db'}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "exited with -9 (SIGKILL)" in proc.stdout
    assert "1 wire(s) executed" in proc.stdout
    assert "[status]" in proc.stdout  # resolved by asking the bank by key


@pytest.mark.slow
def test_runs_show_export_and_resume_work_on_a_crashed_run(
    db_url: str,
    bank,  # type: ignore[no-untyped-def]
) -> None:
    run_id = "cli-run"
    proc = run_child(
        db_url, "start", run_id, "payments", json.dumps([bank.url, 2]), "--kill-after", "intent:2"
    )
    assert killed(proc)

    listed = cli_in_process("runs", "--status", "running", db=db_url)
    assert listed.returncode == 0 and run_id in listed.stdout

    shown = cli_in_process("show", run_id, db=db_url)
    assert shown.returncode == 0
    for column in ("seq", "kind", "name", "key", "status", "took"):
        assert column in shown.stdout
    assert f"{run_id}/3" in shown.stdout and "intent" in shown.stdout

    resumed = cli("resume", run_id, "--wait", "5", "--app", "agents", db=db_url)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout) == [bank.records["payments"][f"{run_id}/{s}"]["id"] for s in (2, 3)]

    exported = json.loads(cli_in_process("export", run_id, db=db_url).stdout)
    assert exported["run"]["status"] == "completed"
    assert exported["events"][-1]["kind"] == "run_completed"
    assert cli_in_process("runs", "--status", "completed", "--json", db=db_url).returncode == 0


@pytest.mark.slow
def test_unknowns_and_resolve_from_the_command_line(db_url: str, bank) -> None:  # type: ignore[no-untyped-def]
    @daybook.workflow(name="cli_blind")
    def cli_blind(ctx: daybook.Context, url: str) -> str:
        return str(ctx.effect(agents.pay_blind, bank=url, n=1)["id"])

    bank.faults.drop_after_execute = 1
    with Daybook(db_url) as book, pytest.raises(daybook.NeedsAttention):
        book.run(cli_blind, bank.url, run_id="cli-blind")

    unknown = cli_in_process("unknowns", db=db_url)
    assert unknown.returncode == 0 and "cli-blind/1" in unknown.stdout
    attention = cli_in_process("runs", "--status", "needs_attention", db=db_url)
    assert "cli-blind" in attention.stdout

    wire = json.dumps(bank.records["payments"]["cli-blind/1"])
    done = cli_in_process(
        "resolve",
        "cli-blind",
        "1",
        "--confirmed",
        wire,
        "--by",
        "alice",
        "--evidence",
        "statement",
        db=db_url,
    )
    assert done.returncode == 0, done.stderr
    assert "resolved as confirmed" in done.stdout
    with Daybook(db_url) as book:
        assert book.resume("cli-blind") == bank.records["payments"]["cli-blind/1"]["id"]
    assert "no unknown outcomes" in cli_in_process("unknowns", db=db_url).stdout


def test_cli_errors_say_what_went_wrong_and_exit_non_zero(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'empty.db'}"
    assert cli("migrate", db=db).returncode == 0  # an empty store (read commands create none)
    for args in (["show", "nope"], ["resume", "nope"], ["export", "nope"]):
        proc = cli_in_process(*args, db=db)
        assert proc.returncode == 1
        assert "no run 'nope'" in proc.stderr and "Traceback" not in proc.stderr
    bad = cli("runs", db="mysql://x")
    assert bad.returncode == 1 and "unsupported store URL" in bad.stderr
    resolve = cli_in_process("resolve", "nope", "1", "--absent", db=db)
    assert resolve.returncode == 1


def test_default_store_is_daybook_db_in_the_working_directory(tmp_path: Path) -> None:
    def daybook(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "daybook", *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )

    missing = daybook("runs")  # a read command names the store it looked for, and creates none
    assert missing.returncode == 1 and "daybook.db" in missing.stderr
    assert not (tmp_path / "daybook.db").exists()
    assert daybook("migrate").returncode == 0
    assert (tmp_path / "daybook.db").exists()
    assert daybook("runs").returncode == 0
