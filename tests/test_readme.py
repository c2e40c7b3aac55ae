"""The README is a contract: its Python example runs, and its commands exist."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()


def test_the_readme_python_example_runs_and_attaches_on_the_second_call(tmp_path: Path) -> None:
    example = re.search(r"```python\n(.*?)```", README, re.S)
    assert example is not None
    script = tmp_path / "example.py"
    script.write_text(example.group(1))
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == lines[1]  # attaching returned the recorded result
    assert "sweep-2026-11-22/2/send_wire/0" in lines[0]
    assert any("intent send_wire" in ln for ln in lines)


@pytest.mark.slow
def test_every_documented_cli_command_exists() -> None:
    commands = set(re.findall(r"^\| `daybook (\w[\w-]*)", README, re.M))
    assert commands >= {"demo", "runs", "show", "resume", "export", "unknowns", "resolve"}
    env = {**os.environ}
    for name in commands:
        proc = subprocess.run(
            [sys.executable, "-m", "daybook", name, "--help"],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
        assert proc.returncode == 0, (name, proc.stderr)
