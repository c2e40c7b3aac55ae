"""The README is a contract: its Python example runs, and its commands (and the full table in
docs/cli.md) exist. tests/test_docs.py holds the site to the same."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from daybook.cli import main

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()


def test_the_readme_python_example_runs_and_attaches_on_the_second_call(tmp_path: Path) -> None:
    example = re.search(r"```python\n(.*?)```", README, re.S)
    assert example is not None
    script = tmp_path / "example.py"
    script.write_text(example.group(1))
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == lines[1]  # attaching returned the recorded result
    assert "sweep-2026-11-22/2/send_wire/0" in lines[0]
    assert any("intent send_wire" in ln for ln in lines)


def test_every_documented_cli_command_exists() -> None:
    # In one process through click's runner: forty `daybook X --help` processes in a row once
    # passed the per-test timeout on a busy machine. The entry point itself is started once.
    tables = README + (ROOT / "docs" / "cli.md").read_text()
    commands = set(re.findall(r"^\| `daybook (\w[\w-]*)", tables, re.M))
    assert commands >= {"demo", "runs", "show", "resume", "export", "unknowns", "resolve"}
    proc = subprocess.run(
        [sys.executable, "-m", "daybook", "--help"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    runner = CliRunner()
    for name in sorted(commands):
        result = runner.invoke(main, [name, "--help"])
        assert result.exit_code == 0, (name, result.output)
        assert name in proc.stdout, f"`daybook --help` does not list {name}"
