"""The CLI a newcomer meets (issue 11 part 8, D12, D13, D14): --db on every command and in every
hint, usage errors exit 2, commands that say what they did, dead leases named, tables that fit
the terminal, run data that cannot write to the terminal, and the distribution's own name."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result
from test_cli_fuzz import printed_traceback

import daybook
from daybook import Daybook, NeedsAttention, Suspended
from daybook.cli import main
from daybook.runtime.lease import new_owner

ROOT = Path(__file__).resolve().parent.parent
ESC = "\x1b[31mRED\x07\x9b2J\r"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def run(db: str, *args: str, **env: str) -> Result:
    result = CliRunner().invoke(main, [*args, "--db", db], env=env or None)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert not printed_traceback(result.output), result.output
    return result


@daybook.tool()
def lost_wire(*, amount: int, idempotency_key: str) -> dict[str, Any]:
    raise daybook.OutcomeUnknown("the bank hung up" + ESC)


@daybook.workflow
def wire_once(ctx: daybook.Context, amount: int) -> Any:
    return ctx.effect(lost_wire, amount=amount)


@daybook.workflow
def noisy(ctx: daybook.Context) -> str:
    return str(ctx.decide("say" + ESC, lambda: "model said " + ESC).value)


@daybook.workflow
def gated_here(ctx: daybook.Context) -> str:
    plan = ctx.decide("plan", lambda: {"do": "restart"})
    return ctx.gate("restart", decision=plan, approvers=["oncall"], timeout=3600).outcome


def test_every_command_takes_db(db_url: str) -> None:
    Daybook(db_url).close()

    def leaves(group: click.Group) -> list[click.Command]:
        found: list[click.Command] = []
        for command in group.commands.values():
            found += leaves(command) if isinstance(command, click.Group) else [command]
        return found

    lacking = [c.name for c in leaves(main) if not any(p.name == "db" for p in c.params)]
    assert lacking == []
    assert run(db_url, "tools").exit_code == 0


def test_hints_carry_the_db_that_was_used(db_url: str) -> None:
    with Daybook(db_url) as book, pytest.raises(daybook.DaybookError):
        book.run(wire_once, 5, run_id="w1")
    done = run(db_url, "why", "w1", "7")
    assert done.exit_code == 1
    assert re.search(r"`daybook show w1 --db '?" + re.escape(db_url), done.output), done.output


def test_usage_errors_exit_2(db_url: str) -> None:
    with Daybook(db_url) as book:
        book.run(noisy, run_id="n1")
        book.add_approver("oncall")
    for args in (
        ["signal", "n1", "go", "--payload", "not json"],
        ["resolve", "n1/1"],
        ["budget", "n1", "--raise", "=5"],
        ["budget", "n1", "--raise", "usd=nan"],
        ["reconcile", "--day", "not-a-date"],
        ["approve", "n1", "n1/1", "--as", "oncall"],
        ["orphans", "--sweep", "-10"],
        ["runs", "--limit", "99999999999999999999999"],
        ["export", "n1", "--checkpoint", "--raw"],
    ):
        done = run(db_url, *args)
        assert done.exit_code == 2, (args, done.output)
    empty = CliRunner().invoke(main, ["runs", "--db", ""])
    assert empty.exit_code == 2 and "is empty" in empty.output  # not a new ./daybook.db


def test_resolve_absent_says_what_it_did_and_history_shows_who_and_evidence(db_url: str) -> None:
    with Daybook(db_url) as book, pytest.raises(NeedsAttention):
        book.run(wire_once, 5, run_id="u1")
    done = run(db_url, "resolve", "u1/1", "--absent", "--by", "alice", "--evidence", "bank statement 12")
    assert done.exit_code == 0, done.output
    assert "recorded as absent" in done.output and "sends it again" in done.output
    assert "by alice" in done.output and "daybook resume u1 --app" in done.output
    history = run(db_url, "effects", "u1", "--history").output
    assert "absent (resume sends it again) [resolved manual, by alice, evidence bank statement 12]" in history


def test_a_waiting_gate_names_approve_and_approve_says_who_continues(db_url: str) -> None:
    with Daybook(db_url, inline_wait=0.05) as book:
        token = book.add_approver("oncall")
        with pytest.raises(Suspended):
            book.run(gated_here, run_id="g1")
    shown = run(db_url, "show", "g1").output
    assert "waiting for approval: `daybook approve g1 g1/1 --as NAME --db" in shown
    resumed = run(db_url, "resume", "g1")
    assert resumed.exit_code == 5 and "daybook approve g1 g1/1 --as NAME" in resumed.output
    approved = run(db_url, "approve", "g1", "g1/1", "--as", "oncall", DAYBOOK_TOKEN=token)
    assert approved.exit_code == 0, approved.output
    assert "a `daybook worker --db" in approved.output and "daybook resume g1 --app" in approved.output


def test_a_run_whose_lease_owner_is_dead_or_expired_says_so(db_url: str) -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "from daybook.runtime.lease import new_owner; print(new_owner())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    with Daybook(db_url) as book:
        book.submit(noisy, run_id="dead")
        book.submit(noisy, run_id="late")
        now = time.time()
        assert book.store.claim("dead", dead, 60.0, now, None)
        assert book.store.claim("late", "elsewhere:1:2:3:4:5", 0.01, now, None)
    time.sleep(0.05)
    runs = run(db_url, "runs").output
    assert f"{dead} (dead: resume it)" in runs
    assert "elsewhere:1:2:3:4:5 (expired: resume it)" in runs
    assert "(owner dead: its process is gone" in run(db_url, "show", "dead").output
    assert "(expired: its owner stopped heartbeating" in run(db_url, "show", "late").output
    assert new_owner() not in runs


def test_show_fits_the_terminal_width(db_url: str) -> None:
    with Daybook(db_url) as book:
        book.run(noisy, run_id="wide-" + "x" * 60)
    run_id = "wide-" + "x" * 60
    wide = run(db_url, "show", run_id, "--width", "0").output
    assert max(len(line) for line in wide.splitlines()[3:]) > 100
    fitted = run(db_url, "show", run_id, "--width", "80").output
    assert all(len(line) <= 80 for line in fitted.splitlines()[3:]), fitted


def test_run_data_cannot_write_to_the_terminal(db_url: str) -> None:
    """D12: ESC, CSI, BEL, C1 and CR in run ids, step names, model text, errors and approver
    names are printed escaped by every printer; JSON keeps them JSON-escaped."""
    with Daybook(db_url) as book:
        book.run(noisy, run_id="r" + ESC)
        with pytest.raises(NeedsAttention):
            book.run(wire_once, 1, run_id="u" + ESC)
        book.add_approver("eve\nmallory" + ESC)
    for args in (
        ["runs"],
        ["show", "r" + ESC],
        ["show", "u" + ESC],
        ["effects", "--history"],
        ["unknowns"],
        ["why", "u" + ESC, "1"],
        ["approvers", "list"],
        ["export", "r" + ESC],
        ["runs", "--json"],
        ["show", "nope" + ESC],
        ["nope" + ESC],
    ):
        out = CliRunner().invoke(main, args if args[0] == "nope" + ESC else [*args, "--db", db_url]).output
        assert not RAW.search(out.replace("\n", "")), (args, out)
    names = run(db_url, "approvers", "list").output.splitlines()
    assert names == ["eve\\x0amallory\\x1b[31mRED\\x07\\x9b2J\\x0d"]  # one name, one line
    exported = json.loads(run(db_url, "export", "r" + ESC).output)
    assert exported["run"]["run_id"] == "r" + ESC  # JSON keeps the value, escaped


def test_app_is_repeatable_and_listings_take_json(db_url: str) -> None:
    with Daybook(db_url) as book:
        book.run(noisy, run_id="j1")
    for command in ("resume", "replay-check", "worker", "reconcile", "tools", "retry", "cancel"):
        option = next(p for p in main.commands[command].params if p.name == "apps")
        assert isinstance(option, click.Option) and option.multiple, command
    assert run(db_url, "replay-check", "j1", "--app", "json", "--app", "os.path").exit_code == 0
    assert json.loads(run(db_url, "orphans", "--json").output) == []
    assert json.loads(run(db_url, "budget", "j1", "--json").output) == {"caps": {}, "spent": {}}
    assert json.loads(run(db_url, "approvers", "list", "--json").output) == []


def test_the_distribution_is_daybook_runtime_and_every_install_line_says_so() -> None:
    """`daybook` on the package index is an unrelated project: installs name `daybook-runtime`
    (or `.` from a checkout); the import package and the command stay `daybook`."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == "daybook-runtime"
    assert project["scripts"] == {"daybook": "daybook.cli:main"}
    wrong = re.compile(r"pip install (-U )?'?daybook(\[|'|\s|$)")
    for path in [ROOT / "README.md", *ROOT.glob("docs/**/*.md"), *ROOT.glob("src/**/*.py")]:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            assert not wrong.search(line), f"{path}:{n}: {line}"
    version = CliRunner().invoke(main, ["--version"])
    assert version.exit_code == 0 and daybook.__version__ in version.output
