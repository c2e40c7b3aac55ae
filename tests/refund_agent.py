"""The refund agents of the framework integration tests (examples/*_agent.py): start one as a
process, and kill one with SIGKILL after its refund reached the ledger (the counterparty's own
record, one JSON line per refund paid) and before the framework recorded it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

EXAMPLES = Path(__file__).parent.parent / "examples"


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def agent(example: str, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, str(EXAMPLES / example), *args]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def kill_after_refund(example: str, env: dict[str, str], *args: str) -> None:
    ledger = Path(env["REFUNDS"])
    proc = agent(example, {**env, "CRASH_AFTER_REFUND": "1"}, *args)
    deadline = time.monotonic() + 60
    while not lines(ledger) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(lines(ledger)) == 1, proc.communicate(timeout=5)
    proc.send_signal(signal.SIGKILL)  # paid; the framework never recorded the tool's answer
    proc.wait(timeout=30)
