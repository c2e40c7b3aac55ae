"""What a newcomer types works as the conventions they know say it should (issue 29, item 6).

- `--app wf` finds `wf.py` in the working directory (as `python -m wf` does), and `--app
  path/agent.py` lets the script import the modules beside it (as `python path/agent.py` does):
  daybook's own hints (`daybook resume RUN --app wf`) once failed with ModuleNotFoundError.
- The `daybook CMD` an error raised in Python suggests names the store it needs (`--db`), so
  following it does not look in ./daybook.db.
- `--db` goes before or after the command (`daybook --db URL runs`, `daybook runs --db URL`).
- `daybook mcp-proxy [OPTIONS] -- CMD ARGS...`, the spelling MCP tools use, beside `daybook proxy`.

The commands run as the console script `daybook` runs: a launcher in a folder of its own, so
neither the working directory nor the test's folder is on the import path.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

import daybook
from daybook.cli import main
from daybook.hints import with_db

HERE = Path(__file__).resolve().parent
COUNTER_SERVER = HERE / "mcp_counter_server.py"

WF = """
import daybook


@daybook.workflow
def conv_greet(ctx: daybook.Context, name: str) -> str:
    return ctx.decide("greet", lambda: "hello " + name).value
"""

AGENT = """
import daybook

import counterparty  # a module beside this script


@daybook.workflow
def conv_sibling(ctx: daybook.Context, n: int) -> int:
    return ctx.decide("ask", counterparty.answer, n).value
"""

COUNTERPARTY = """
def answer(n: int) -> int:
    return n * 3
"""


@pytest.fixture
def launcher(tmp_path: Path) -> Path:
    """A stand-in for the installed `daybook` console script: its own folder is sys.path[0]."""
    folder = tmp_path / "bin"
    folder.mkdir()
    script = folder / "daybook_cli.py"
    script.write_text("import sys\nfrom daybook.cli import main\nsys.exit(main())\n")
    return script


def cli(launcher: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in {"DAYBOOK_DB", "DAYBOOK_APP"}}
    return subprocess.run(
        [sys.executable, str(launcher), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def submit(cwd: Path, db_url: str, code: str) -> None:
    """Record a pending run from a Python process started in `cwd` (as the user's script does)."""
    program = f"import daybook\nbook = daybook.Daybook({db_url!r})\n{code}\nbook.close()\n"
    done = subprocess.run(
        [sys.executable, "-c", program], cwd=cwd, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr


def db_of(message: str, command: str) -> str | None:
    """The `--db` of the `daybook COMMAND ...` hint in `message` (None if it names none)."""
    hint = re.search(rf"`daybook {command}\b([^`]*)`", message)
    assert hint is not None, message
    words = shlex.split(hint.group(1))
    return words[words.index("--db") + 1] if "--db" in words else None


# Where `--app` looks and how `mcp-proxy` reads its command line are the CLI's own; the store
# plays no part (SQLite only). The `--db` and hint tests below keep both: a PostgreSQL URL's
# `?` and `&` are what a hint must quote.
SQLITE_ONLY = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


@SQLITE_ONLY
def test_app_finds_a_module_in_the_working_directory(db_url: str, tmp_path: Path, launcher: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "wf.py").write_text(WF)
    submit(project, db_url, "import wf\nbook.submit(wf.conv_greet, 'ada', run_id='m1')")
    # The hint names the stored reference as data (never a ready-to-run `--app`, R22) and says
    # to pass the code with --app: given as `wf` from the project, the module is found.
    hint = cli(launcher, project, "resume", "m1", "--db", db_url)
    assert hint.returncode == 1 and "'wf:conv_greet'" in hint.stderr and "--app" in hint.stderr
    done = cli(launcher, project, "resume", "m1", "--app", "wf", "--db", db_url)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == "hello ada"
    with daybook.Daybook(db_url) as book:
        assert book.get_run("m1").status == "completed"


@SQLITE_ONLY
def test_app_module_is_looked_for_only_where_the_command_runs(
    db_url: str, tmp_path: Path, launcher: Path
) -> None:
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    (project / "wf.py").write_text(WF)
    submit(project, db_url, "import wf\nbook.submit(wf.conv_greet, 'ada', run_id='m2')")
    missing = cli(launcher, elsewhere, "resume", "m2", "--app", "wf", "--db", db_url)
    assert missing.returncode == 1
    assert "cannot import 'wf'" in missing.stderr and "ModuleNotFoundError" in missing.stderr
    assert "Traceback" not in missing.stderr
    with daybook.Daybook(db_url) as book:
        assert book.get_run("m2").status == "pending"


@SQLITE_ONLY
def test_app_script_imports_the_modules_beside_it(db_url: str, tmp_path: Path, launcher: Path) -> None:
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "agent.py").write_text(AGENT)
    (agent / "counterparty.py").write_text(COUNTERPARTY)
    submit(agent, db_url, "import agent\nbook.submit(agent.conv_sibling, 14, run_id='s1')")
    # From another folder, naming the script by its path: its sibling import resolves.
    done = cli(launcher, tmp_path, "resume", "s1", "--app", "agent/agent.py", "--db", db_url)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == 42


@SQLITE_ONLY
def test_app_script_that_does_not_exist_is_an_error_not_a_traceback(
    db_url: str, tmp_path: Path, launcher: Path
) -> None:
    done = cli(launcher, tmp_path, "worker", "--until-idle", "--app", "nowhere/agent.py", "--db", db_url)
    assert done.returncode == 1
    assert "'nowhere/agent.py' does not exist" in done.stderr and "Traceback" not in done.stderr


def test_a_python_error_suggests_commands_with_the_store_they_need(
    db_url: str, tmp_path: Path, launcher: Path
) -> None:
    @daybook.workflow
    def conv_broken(ctx: daybook.Context) -> int:
        return int(ctx.decide("pick", lambda: {}["missing"]).value)

    with daybook.Daybook(db_url) as book:
        with pytest.raises(daybook.RunFailed) as failed:
            book.run(conv_broken, run_id="h1")
        with pytest.raises(daybook.RunNotFound) as absent:
            book.get_run("h-none")
    hint = f"`daybook show h1 --db {shlex.quote(db_url)}`"
    assert hint in str(failed.value)
    assert db_of(str(absent.value), "runs") == db_url
    # Followed as printed, from a folder with no store of its own, it shows the run.
    shown = cli(launcher, tmp_path, *shlex.split(hint.strip("`").removeprefix("daybook ")))
    assert shown.returncode == 0, shown.stderr
    assert "h1" in shown.stdout and "pick" in shown.stdout


def test_a_python_error_on_the_default_store_suggests_commands_without_db(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DAYBOOK_DB", raising=False)

    @daybook.workflow
    def conv_broken_default(ctx: daybook.Context) -> int:
        return int(ctx.decide("pick", lambda: {}["missing"]).value)

    with daybook.Daybook() as book, pytest.raises(daybook.RunFailed) as failed:
        book.run(conv_broken_default, run_id="d1")
    assert "`daybook show d1`" in str(failed.value)  # `daybook show d1` in this folder finds it


def test_hints_put_db_before_an_option_awaiting_its_value_and_before_double_dash() -> None:
    text = "`daybook budget r1 --raise` or `daybook mcp-proxy --run s -- python s.py` or `daybook x --db y`"
    assert with_db(text, "postgresql://me:secret@db/x") == (
        "`daybook budget r1 --db 'postgresql://me:***@db/x' --raise` or "
        "`daybook mcp-proxy --run s --db 'postgresql://me:***@db/x' -- python s.py` or `daybook x --db y`"
    )
    assert with_db(text, None) == text


def _runs(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(main, args, env={"DAYBOOK_DB": None, **(env or {})})  # type: ignore[dict-item]
    return result.exit_code, result.output


def test_db_goes_before_or_after_the_command(db_url: str, tmp_path: Path) -> None:
    @daybook.workflow
    def conv_place(ctx: daybook.Context) -> int:
        return 1

    with daybook.Daybook(db_url) as book:
        book.run(conv_place, run_id="p1")
    for args in (["--db", db_url, "runs", "--json"], ["runs", "--json", "--db", db_url]):
        code, output = _runs(args)
        assert code == 0, output
        assert [r["run_id"] for r in json.loads(output)] == ["p1"]
    # Before the command, it wins over $DAYBOOK_DB as it does after the command.
    code, output = _runs(["--db", db_url, "runs", "--json"], {"DAYBOOK_DB": f"sqlite:///{tmp_path}/other.db"})
    assert code == 0 and [r["run_id"] for r in json.loads(output)] == ["p1"]
    # A hint printed by a command given --db before it carries that store.
    code, output = _runs(["--db", db_url, "show", "p-none"])
    assert code == 1 and db_of(output, "runs") == db_url


def test_db_before_and_after_the_command_naming_two_stores_is_a_usage_error(
    db_url: str, tmp_path: Path
) -> None:
    other = f"sqlite:///{tmp_path}/other.db"
    daybook.Daybook(db_url).close()  # the store exists
    code, output = _runs(["--db", db_url, "runs", "--db", other])
    assert code == 2 and "after the command but" in output
    assert not (tmp_path / "other.db").exists()
    code, output = _runs(["--db", "", "runs"])
    assert code == 2 and "is empty" in output
    code, output = _runs(["--db", db_url, "runs", "--db", db_url, "--json"])
    assert code == 0, output  # the same store twice is fine


def test_demo_takes_db_before_the_command_too(tmp_path: Path) -> None:
    store = tmp_path / "demo.db"
    done = subprocess.run(
        [sys.executable, "-m", "daybook", "--db", f"sqlite:///{store}", "demo"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert store.exists()
    with daybook.Daybook(f"sqlite:///{store}") as book:
        assert book.runs(limit=10)


@SQLITE_ONLY
def test_mcp_proxy_relays_a_call_to_the_command_after_double_dash(
    db_url: str, tmp_path: Path, launcher: Path
) -> None:
    ledger = tmp_path / "ledger.jsonl"
    env = {**os.environ, "MCP_LEDGER": str(ledger)}
    args = [
        str(launcher),
        "mcp-proxy",
        "--db",
        db_url,
        "--run",
        "c1",
        "--",
        sys.executable,
        str(COUNTER_SERVER),
    ]
    params = StdioServerParameters(command=sys.executable, args=args, env=env, cwd=str(tmp_path))

    async def call() -> object:
        async with stdio_client(params) as (r, w), ClientSession(r, w) as session:
            await session.initialize()
            first = await session.call_tool("send", {"to": "bob", "amount": 5})
            assert not first.isError, first.content
            return first.structuredContent

    answer = asyncio.run(asyncio.wait_for(call(), 120))
    assert isinstance(answer, dict) and answer["execution"] == 1
    # The server's own count: executed once; the journal holds it as an effect of session c1.
    assert len(ledger.read_text().splitlines()) == 1
    with daybook.Daybook(db_url) as book:
        (effect,) = book.effects()
        assert effect["status"] == "confirmed" and str(effect["key"]).startswith("mcp/c1/send/")
        assert json.loads(ledger.read_text())["key"] == effect["key"]


@SQLITE_ONLY
def test_mcp_proxy_without_a_command_or_with_a_missing_program_says_what_to_give(
    db_url: str, tmp_path: Path, launcher: Path
) -> None:
    bare = cli(launcher, tmp_path, "mcp-proxy", "--db", db_url)
    assert bare.returncode == 2 and "Missing argument" in bare.stderr
    missing = cli(launcher, tmp_path, "mcp-proxy", "--db", db_url, "--", "no-such-mcp-server", "--flag")
    assert missing.returncode == 1
    assert "no program 'no-such-mcp-server'" in missing.stderr and "Traceback" not in missing.stderr
    # `--db` goes before `--` in the example it prints, never into the upstream's command line.
    assert f"mcp-proxy --db {shlex.quote(db_url)} -- python server.py" in missing.stderr


@daybook.workflow
def conv_waits(ctx: daybook.Context) -> str:
    signal = ctx.wait_for("go")
    return "went" if signal is not None else "timed out"


def test_a_suspended_run_names_the_resume_that_continues_it_with_app_and_db(db_url: str) -> None:
    with daybook.Daybook(db_url, inline_wait=0.05) as book, pytest.raises(daybook.Suspended) as suspended:
        book.run(conv_waits, run_id="w1")
    # In Python: the hint names the store.
    assert db_of(str(suspended.value), "resume w1") == db_url
    # In the CLI: the same hint, given the --app the run's stored reference suggests as well.
    result = CliRunner().invoke(main, ["resume", "w1", "--db", db_url], env={"DAYBOOK_DB": None})  # type: ignore[dict-item]
    assert result.exit_code == 5, result.output
    hint = re.search(r"`(daybook resume w1[^`]*)`", result.output)
    assert hint is not None, result.output
    words = shlex.split(hint.group(1))
    assert words[words.index("--app") + 1] == __name__  # this module, where conv_waits is
    assert words[words.index("--db") + 1] == db_url
