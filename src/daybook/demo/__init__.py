"""The demo: a treasury agent killed by SIGKILL mid-wire, resumed in a new process, one wire.

`run_demo()` starts the bank on 127.0.0.1, runs the agent in a child process, kills that process
with SIGKILL after the bank executed the wire but before the agent heard back (so before the
outcome could be journaled), then resumes the run in a second process through the CLI. The
resumed run finds the wire's intent without an outcome, asks the bank about the key, records the
bank's wire id, and goes on. The bank's own books show one wire. Act two shows the books: the
decision behind the wire (`daybook why`), the effect ledger and what the run still owes.

May import: anything below the CLI (it drives the CLI only through subprocesses).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from .bank import Bank

AGENT_APP = "daybook.demo.agent"  # the module that defines the demo's workflow and tools


def run_demo(db: str | None = None, echo: Callable[[str], None] = print) -> int:
    """Run both acts; 0 if the bank's books show exactly one wire, else 1."""
    if db is None:
        db = f"sqlite:///{os.path.join(tempfile.mkdtemp(prefix='daybook-demo-'), 'demo.db')}"
    run_id = f"treasury-{time.strftime('%Y%m%d')}-{os.getpid()}"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}

    def daybook(*args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "daybook", *args, "--db", db], env=env, text=True, **kw)

    with Bank() as bank:
        echo(f"bank listening on {bank.url}; journal at {db}")
        if not _killed_mid_wire(bank, db, run_id, env, echo):
            return 1
        echo("\n[2] the journal now (the wire has an intent and no outcome):")
        daybook("show", run_id, check=True)
        # The resuming process imports only the code it is told to (--app), never what the
        # stored run names: the agent's module is given here as an operator would give it.
        echo(f"\n[3] a new process resumes the run: daybook resume {run_id} --app {AGENT_APP}")
        resumed = daybook("resume", run_id, "--app", AGENT_APP, capture_output=True)
        echo(resumed.stdout.rstrip())
        if resumed.returncode != 0:
            echo(resumed.stderr.rstrip())
            return 1
        echo("\n[4] the journal after the resume:")
        daybook("show", run_id, check=True)
        wire_key = _one_wire(bank, echo)
        if wire_key is None:
            return 1
    # Act two: the books. Why the agent acted, what it did, what it still owes.
    for title, args in (
        (f"[6] why did the agent send that wire? daybook why {wire_key}", ["why", wire_key]),
        (
            f"[7] what it did (the effect ledger): daybook effects {run_id} --history",
            ["effects", run_id, "--history"],
        ),
        ("[8] what it owes (the obligation ledger): daybook obligations", ["obligations"]),
    ):
        echo(f"\n{title}")
        daybook(*args, check=True)
    echo(f"\nexplore it yourself: daybook show {run_id} --db {db}")
    return 0


def _killed_mid_wire(
    bank: Bank, db: str, run_id: str, env: dict[str, str], echo: Callable[[str], None]
) -> bool:
    """Act one: the agent runs in a child process that is SIGKILLed once the bank executed the
    wire, before it replies. True if it died that way."""
    child: subprocess.Popen[bytes] | None = None

    def kill_agent(collection: str, key: str) -> None:
        if collection == "wires" and child is not None:
            echo(f"bank: executed wire {key}; killing the agent (SIGKILL) before it replies")
            os.kill(child.pid, signal.SIGKILL)
            child.wait()

    bank.faults.on_execute = kill_agent
    bank.faults.collections = {"wires"}
    echo(f"\n[1] agent process starts run {run_id}")
    child = subprocess.Popen(
        [sys.executable, "-m", "daybook.demo", "--db", db, "--bank", bank.url, "--run-id", run_id], env=env
    )
    code = child.wait()
    bank.faults.on_execute = None
    echo(f"    agent process exited with {code} ({'SIGKILL' if code == -signal.SIGKILL else 'unexpected'})")
    return code == -signal.SIGKILL


def _one_wire(bank: Bank, echo: Callable[[str], None]) -> str | None:
    """The key of the one wire the bank executed, or None (printed) if it executed 0 or 2."""
    stats = bank.stats()
    wires = stats["executed"].get("wires", 0)
    dupes = {k: n for k, n in stats["executions_by_key"].items() if n > 1}
    echo(f"\n[5] the bank's books: {wires} wire(s) executed; requests by key: {stats['requests_by_key']}")
    if wires != 1 or dupes:
        echo("    DOUBLE WIRE")
        return None
    echo("    the unknown outcome was resolved by asking the bank about the key; nothing was sent twice")
    return str(next(k for k in stats["executions_by_key"] if "/send_wire/" in k))
