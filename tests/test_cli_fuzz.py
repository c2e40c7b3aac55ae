"""A fuzz test of the whole CLI: random subcommands and arguments, drawn from the real click
command tree (junk values, NaN, negative and huge numbers, unicode, control characters, lone
surrogates), against a real small store, on both backends. No input may end in a traceback:
an exception other than SystemExit (click's own errors become SystemExit) escaping the command,
or "Traceback" in what it prints. And nothing printed holds a raw terminal control character
(D12): run data here is full of them."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import daybook
from daybook import Daybook, Suspended
from daybook.cli import main

EVIL = "val\x1b[31mRED\x07\r\x9b2J\u202e\x1b]52;c;aGk=\x07"
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@daybook.tool(idempotent=True)
def fuzz_note(*, text: str, idempotency_key: str) -> dict[str, str]:
    return {"noted": text + "\x1b]0;title\x07"}


@daybook.workflow
def fuzz_ok(ctx: daybook.Context, x: int) -> dict[str, Any]:
    value = ctx.decide("pick\x1b[2J", lambda: EVIL).value
    return {"v": value, "r": ctx.effect(fuzz_note, text=value), "x": x}


@daybook.workflow
def fuzz_gated(ctx: daybook.Context, x: int) -> dict[str, Any]:
    plan = ctx.decide("plan", lambda: {"do": "restart\x1b[2J"})
    verdict = ctx.gate("restart", decision=plan, approvers=["oncall"], timeout=3600)
    return {"outcome": verdict.outcome}


@daybook.workflow
def fuzz_boom(ctx: daybook.Context, x: int) -> dict[str, Any]:
    ctx.decide("before", lambda: 1)
    raise ValueError("bad \x1b[31m thing")


RUN_IDS = ["ok-1", "esc\x1b[31m-2", "gate-1", "boom-1", "pending-1"]


def _build(url: str) -> str:
    """The store: completed runs (one with an escape sequence in its id), a run waiting at a
    gate, a failed run, a pending run; an approver. Returns the approver's token."""
    with Daybook(url, inline_wait=0.05) as book:
        book.run(fuzz_ok, 1, run_id="ok-1")
        book.run(fuzz_ok, 2, run_id="esc\x1b[31m-2")
        token = book.add_approver("oncall")
        with pytest.raises(Suspended):
            book.run(fuzz_gated, 1, run_id="gate-1")
        with pytest.raises(daybook.DaybookError):
            book.run(fuzz_boom, 1, run_id="boom-1")
        book.submit(fuzz_ok, 3, run_id="pending-1")
    return token


Path_ = tuple[str, ...]


def _commands(group: click.Group, path: Path_ = ()) -> Iterator[tuple[Path_, click.Command]]:
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from _commands(command, (*path, name))
        else:
            yield (*path, name), command


# The demo starts a bank and child processes (seconds each), and `web` serves until stopped:
# each has its own tests.
COMMANDS = [(path, cmd) for path, cmd in _commands(main) if path not in (("demo",), ("web",))]

JUNK = st.sampled_from(
    [
        "",
        " ",
        "x",
        "nan",
        "NaN",
        "inf",
        "-inf",
        "-1",
        "-10",
        "0",
        "1e309",
        "9" * 30,
        "-" + "9" * 30,
        "1.5",
        "{",
        '{"a": 1}',
        '"\\ud800"',
        "null",
        "[1, 2]",
        "=5",
        "usd=",
        "usd=nan",
        "usd=-1,=2",
        "by=5",
        "a=b",
        "ünï😀",
        "\x1b[31mRED",
        "\x00",
        "\ud800",
        "\r\n",
        "--",
        "-x",
        "2026-13-45",
        "2026-11-23",
        "verdict:gate-1/1",
        "budget:raise",
        "x" * 500,
        "/nonexistent.py",
        "no_such_module_xyz",
        "os.path",
        "/dev/null",
        "shape.json",  # a JSON file of the wrong shape (written by the fixture)
        *RUN_IDS,
        "gate-1/1",
        "ok-1/2",
        "ok-1/1",
        "oncall",
    ]
)
TEXT = st.one_of(JUNK, st.text(max_size=12))


def _value(param: click.Parameter) -> st.SearchStrategy[str]:
    """A value for `param`: usually junk, sometimes one its type would take."""
    kind = param.type
    good: st.SearchStrategy[str]
    if isinstance(kind, click.Choice):
        good = st.sampled_from([str(c) for c in kind.choices])
    elif isinstance(kind, click.types.IntParamType):
        good = st.integers(-(10**20), 10**20).map(str)
    elif isinstance(kind, click.types.FloatParamType) or kind.name == "seconds":
        good = st.one_of(st.floats(allow_nan=True, allow_infinity=True).map(repr), st.just("0.05"))
    else:
        good = TEXT
    return st.one_of(good, TEXT)


# Appended last (so they win): a worker without --until-idle serves forever, and steer waits
# for an acknowledgement no run in this store gives, and `journal --follow` for a run to end.
TAIL = {("worker",): ["--until-idle"], ("steer",): ["--wait", "0"], ("journal",): ["--timeout", "0"]}


@st.composite
def _param(draw: st.DrawFn, param: click.Parameter) -> list[str]:
    """What argv says for one parameter: an argument's value(s), or an option (often absent)."""
    if isinstance(param, click.Argument):
        count = 1 if param.nargs == 1 else draw(st.integers(0, 2))
        return [draw(_value(param)) for _ in range(count)] if param.required or draw(st.booleans()) else []
    if not isinstance(param, click.Option) or param.name in ("db", "help") or draw(st.integers(0, 2)):
        return []
    flag = draw(st.sampled_from(param.opts))
    return [flag] if param.is_flag else [flag, draw(_value(param))]


@st.composite
def argv(draw: st.DrawFn, db: str) -> list[str]:
    path, command = draw(st.sampled_from(COMMANDS))
    args: list[str] = list(path)
    for param in command.params:
        args += draw(_param(param))
    if draw(st.integers(0, 9)) == 0:
        args.append(draw(TEXT))  # an extra argument or unknown option
    args += TAIL.get(path, [])
    has_db = any(isinstance(p, click.Option) and p.name == "db" for p in command.params)
    if has_db:
        choice = draw(st.integers(0, 9))
        if choice == 0:
            args += ["--db", draw(st.sampled_from(["", " ", "nope://x", "sqlite:///missing/dir/x.db"]))]
        elif choice > 1:  # 1: no --db at all ($DAYBOOK_DB names the store)
            args += ["--db", db]
    return args


STORED = "traceback (the workflow raised):"  # how `show` introduces a run's stored traceback


def printed_traceback(output: str) -> bool:
    """True when a Python traceback reached the output: a line `Traceback (most recent call
    last):` that is not a run's stored traceback (`show` introduces those with STORED; `export`
    and `--json` hold them inside a JSON string, never at the start of a line)."""
    lines = output.splitlines()
    return any(
        line.startswith("Traceback") and (i == 0 or lines[i - 1] != STORED) for i, line in enumerate(lines)
    )


def _no_traceback(args: list[str], exit_code: int, exception: BaseException | None, output: str) -> None:
    shown = f"{args!r} -> exit {exit_code}:\n{output[-3000:]}"
    if exception is not None and not isinstance(exception, SystemExit):
        raise AssertionError(f"traceback: {type(exception).__name__}: {exception}\n{shown}") from exception
    assert not printed_traceback(output), shown
    assert exit_code in (0, 1, 2, 3, 5), shown
    assert not RAW_CONTROL.search(output.replace("\n", "").replace("\t", "")), shown


@pytest.fixture
def fuzz_store(db_url: str, tmp_path: Path) -> Iterator[tuple[str, str]]:
    token = _build(db_url)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    cwd = os.getcwd()
    os.chdir(tmp_path)  # a relative --db made by a write command lands here, not in the repo
    (tmp_path / "shape.json").write_text('{"transitions": 5}')
    try:
        yield db_url, token
    finally:
        os.chdir(cwd)
        for s, h in handlers.items():  # `daybook worker` installs its own
            signal.signal(s, h)


@pytest.mark.slow
@settings(
    max_examples=500,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)
@given(data=st.data())
def test_random_commands_never_print_a_traceback(fuzz_store: tuple[str, str], data: st.DataObject) -> None:
    db, token = fuzz_store
    args = data.draw(argv(db))
    result = CliRunner().invoke(main, args, env={"DAYBOOK_DB": db, "DAYBOOK_TOKEN": token, "COLUMNS": "80"})
    _no_traceback(args, result.exit_code, result.exception, result.output)


# A handful of real processes: what argv bytes, stdout encoding and exit codes do for real.
REAL = [
    ["runs", "--limit", "99999999999999999999999"],
    ["show", "esc\x1b[31m-2"],
    ["tools", "--app", "/nonexistent.py"],
    ["tools", "--app", "no_such_module_xyz"],
    ["replay-check", "boom-1"],
    ["signal", "pending-1", "zz", "--payload", '"\\ud800"'],
    ["budget", "ok-1", "--raise", "=5"],
    ["reconcile", "--day", "not-a-date"],
    ["orphans", "--sweep", "-10"],
    ["worker", "--concurrency", "100000", "--until-idle"],
    ["runs", "--db", ""],
    ["boundaries", "/dev/null"],
    ["boundaries", "shape.json"],
    ["nosuchcommand\x1b[2J"],
]


@pytest.mark.parametrize("args", REAL, ids=[" ".join(a)[:40] for a in REAL])
def test_real_processes_exit_cleanly(fuzz_store: tuple[str, str], args: list[str]) -> None:
    db, _token = fuzz_store
    env = {**os.environ, "DAYBOOK_DB": db}
    done = subprocess.run(
        [sys.executable, "-m", "daybook", *args], capture_output=True, text=True, timeout=300, env=env,
        cwd=os.getcwd(),
    )  # fmt: skip
    _no_traceback(args, done.returncode, None, done.stdout + done.stderr)
    if args[0] != "show":
        assert done.returncode != 0, done.stdout  # each of these is a mistake, and says so
        assert done.stderr.strip(), args
