"""Code runs only where the operator said (issue 11 part 7, D5). A run's stored workflow
reference is a hint shown in the error, never imported: a row in a shared store naming a `.py`
file must not make a worker, `resume` or the read-only `replay-check` run that file. They import
only what the operator names: `--app` (repeatable), `app=` in Python, or `$DAYBOOK_APP`."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import daybook
from daybook import ConfigError, Daybook, Workflow


def _cli(db: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "daybook", *args, "--db", db],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


def _plant(db_url: str, tmp_path: Path) -> tuple[Path, Path]:
    """A run whose stored reference names a script that writes a marker file when imported
    (as the audit planted one through the API). Returns (script, marker)."""
    marker = tmp_path / "PWNED"
    evil = tmp_path / "evil_payload.py"
    evil.write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    planted: Workflow[int] = Workflow(fn=lambda ctx: 1, name="no_such_workflow", ref=f"{evil}:x")
    with Daybook(db_url) as book:
        book.submit(planted, run_id="evil1")
    return evil, marker


def test_a_stored_script_is_never_imported_by_resume_replay_check_or_a_worker(
    db_url: str, tmp_path: Path
) -> None:
    evil, marker = _plant(db_url, tmp_path)

    resumed = _cli(db_url, "resume", "evil1")
    assert resumed.returncode == 1, resumed.stdout + resumed.stderr
    # The error names the workflow and shows the stored reference as untrusted data, never as
    # a ready-to-run --app (an operator following the hint would run the planted file).
    assert "'no_such_workflow'" in resumed.stderr and f"'{evil}:x'" in resumed.stderr
    assert "not checked by anyone" in resumed.stderr and f"--app {evil}" not in resumed.stderr
    assert "never imports" in resumed.stderr and "Traceback" not in resumed.stderr

    checked = _cli(db_url, "replay-check", "evil1")
    assert checked.returncode == 1
    assert checked.stdout.startswith("not loaded evil1"), checked.stdout

    worker = _cli(db_url, "worker", "--until-idle", "--poll", "0.05")
    assert worker.returncode == 0, worker.stderr
    assert "needs attention" in worker.stdout and "--app MODULE|FILE.py" in worker.stdout
    assert f"--app {evil}" not in worker.stdout
    assert not marker.exists()  # nobody ran the planted file
    with Daybook(db_url) as book:
        assert book.get_run("evil1").status == "needs_attention"

    # The API refuses alike: no import of what the row names.
    with Daybook(db_url) as book, pytest.raises(ConfigError, match="never imports"):
        book.resume("evil1")
    assert not marker.exists()


APP = """
import daybook

@daybook.workflow
def {name}(ctx, x):
    return {{"doubled": ctx.decide("double", lambda: x * 2).value}}
"""


def test_the_operator_names_the_code_with_app_or_DAYBOOK_APP(db_url: str, tmp_path: Path) -> None:
    app = tmp_path / "myapp.py"
    app.write_text(APP.format(name="doubler_cli"))
    with Daybook(db_url) as book:
        planted: Workflow[int] = Workflow(fn=lambda ctx, x: x, name="doubler_cli", ref=f"{app}:doubler_cli")
        book.submit(planted, 2, run_id="d1")
        book.submit(planted, 3, run_id="d2")
    # --app (repeatable: a module that does not define it first, then the script that does)
    done = _cli(db_url, "resume", "d1", "--app", "json", "--app", str(app))
    assert done.returncode == 0, done.stderr
    assert '"doubled": 4' in done.stdout
    # $DAYBOOK_APP, an allow-list in the environment (comma or os.pathsep separated)
    done = _cli(db_url, "resume", "d2", env={"DAYBOOK_APP": f"json,{app}"})
    assert done.returncode == 0, done.stderr
    checked = _cli(db_url, "replay-check", "d1", "d2", "--app", str(app))
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_resume_in_python_takes_app(db_url: str, tmp_path: Path) -> None:
    name = f"doubler_{uuid.uuid4().hex[:8]}"  # not registered in this process by another case
    app = tmp_path / "pyapp.py"
    app.write_text(APP.format(name=name))
    with Daybook(db_url) as book:
        planted: Workflow[int] = Workflow(fn=lambda ctx, x: x, name=name, ref=f"{app}:{name}")
        book.submit(planted, 5, run_id="p1")
        with pytest.raises(ConfigError, match=f"defines workflow '{name}'.*app="):
            book.resume("p1")
        assert book.resume("p1", app=[str(app)]) == {"doubled": 10}


@daybook.workflow
def registered_here(ctx: daybook.Context, x: int) -> int:
    return x + 1


def test_a_workflow_registered_in_this_process_needs_no_app(db_url: str) -> None:
    with Daybook(db_url) as book:
        book.submit(registered_here, 1, run_id="here")
        assert book.resume("here") == 2  # code this process imported is code the operator ran


def test_an_app_that_exits_or_fails_at_import_is_a_clear_error(db_url: str, tmp_path: Path) -> None:
    exits = tmp_path / "exits.py"
    exits.write_text("import sys\nsys.exit(9)\n")
    Daybook(db_url).close()
    for args in (["tools", "--app", str(exits)], ["worker", "--until-idle", "--app", str(exits)]):
        done = _cli(db_url, *args)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        assert "sys.exit(9)" in done.stderr and "Traceback" not in done.stderr
    for bad in ("/nonexistent.py", "no_such_module_xyz"):
        done = _cli(db_url, "tools", "--app", bad)
        assert done.returncode == 1 and "error: " in done.stderr, done.stderr
        assert "Traceback" not in done.stderr


@daybook.workflow
def raises_on_purpose(ctx: daybook.Context) -> None:
    ctx.decide("first", lambda: 1)
    raise ValueError("refused on purpose")


def test_replay_check_of_a_run_whose_workflow_raised_is_no_traceback(db_url: str) -> None:
    from click.testing import CliRunner

    from daybook.cli import main

    with Daybook(db_url) as book, pytest.raises(daybook.DaybookError):
        book.run(raises_on_purpose, run_id="f1")
    done = CliRunner().invoke(main, ["replay-check", "f1", "--db", db_url])
    assert done.exception is None or isinstance(done.exception, SystemExit), done.output
    assert done.exit_code == 0 and done.output.startswith("ok"), done.output  # it fails the same way


def test_a_worker_in_python_imports_only_its_apps(db_url: str, tmp_path: Path) -> None:
    from daybook.worker import Worker

    name = f"doubler_{uuid.uuid4().hex[:8]}"
    app = tmp_path / "workerapp.py"
    app.write_text(APP.format(name=name))
    evil, marker = _plant(db_url, tmp_path)
    with Daybook(db_url) as book:
        book.submit(Workflow(fn=lambda ctx, x: x, name=name, ref=f"{app}:{name}"), 4, run_id="w1")
    stats = Worker(db_url, apps=str(app), poll=0.05).run(until_idle=True)
    assert (stats.completed, stats.attention) == (1, 1)
    assert not marker.exists()
    with Daybook(db_url) as book:
        assert book.get_run("w1").result == {"doubled": 8}
        error = str(book.get_run("evil1").error)
        assert f"--app {evil}" not in error and "'no_such_workflow'" in error
