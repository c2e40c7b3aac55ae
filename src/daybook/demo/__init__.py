"""The demo: a treasury agent killed by SIGKILL mid-wire, resumed in a new process, one wire.

`run_demo()` starts the bank on 127.0.0.1, runs the agent in a child process, kills that process
with SIGKILL after the bank executed the wire but before the agent heard back (so before the
outcome could be journaled), then resumes the run in a second process through the CLI. The
resumed run finds the wire's intent without an outcome, asks the bank about the key, records the
bank's wire id, and goes on. The bank's own books show one wire. Act two shows the books: the
decision behind the wire (`daybook why`), the effect ledger and what the run still owes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

from .bank import Bank


def run_demo(db: str | None = None, echo: Callable[[str], None] = print) -> int:
    tmp = None
    if db is None:
        tmp = tempfile.mkdtemp(prefix="daybook-demo-")
        db = f"sqlite:///{os.path.join(tmp, 'demo.db')}"
    run_id = f"treasury-{time.strftime('%Y%m%d')}-{os.getpid()}"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with Bank() as bank:
        echo(f"bank listening on {bank.url}; journal at {db}")
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
            [sys.executable, "-m", "daybook.demo", "--db", db, "--bank", bank.url, "--run-id", run_id],
            env=env,
        )
        code = child.wait()
        bank.faults.on_execute = None
        echo(
            f"    agent process exited with {code} ({'SIGKILL' if code == -signal.SIGKILL else 'unexpected'})"
        )
        if code != -signal.SIGKILL:
            return 1
        echo("\n[2] the journal now (the wire has an intent and no outcome):")
        subprocess.run([sys.executable, "-m", "daybook", "show", run_id, "--db", db], env=env, check=True)
        echo(f"\n[3] a new process resumes the run: daybook resume {run_id}")
        resumed = subprocess.run(
            [sys.executable, "-m", "daybook", "resume", run_id, "--db", db],
            env=env,
            capture_output=True,
            text=True,
        )
        echo(resumed.stdout.rstrip())
        if resumed.returncode != 0:
            echo(resumed.stderr.rstrip())
            return 1
        echo("\n[4] the journal after the resume:")
        subprocess.run([sys.executable, "-m", "daybook", "show", run_id, "--db", db], env=env, check=True)
        stats = bank.stats()
        wires = stats["executed"].get("wires", 0)
        dupes = {k: n for k, n in stats["executions_by_key"].items() if n > 1}
        echo(f"\n[5] the bank's books: {wires} wire(s) executed; requests by key: {stats['requests_by_key']}")
        echo(
            "    the unknown outcome was resolved by asking the bank about the key; nothing was sent twice"
            if wires == 1 and not dupes
            else "    DOUBLE WIRE"
        )
        if wires != 1 or dupes:
            return 1
        # Act two: the books. Why the agent acted, what it did, what it still owes.
        wire_key = next(k for k in stats["executions_by_key"] if "/send_wire/" in k)
        for title, args in (
            (f"[6] why did the agent send that wire? daybook why {wire_key}", ["why", wire_key]),
            (
                f"[7] what it did (the effect ledger): daybook effects {run_id} --history",
                ["effects", run_id, "--history"],
            ),
            ("[8] what it owes (the obligation ledger): daybook obligations", ["obligations"]),
        ):
            echo(f"\n{title}")
            subprocess.run([sys.executable, "-m", "daybook", *args, "--db", db], env=env, check=True)
        return 0
