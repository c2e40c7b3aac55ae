"""A sandbox that is a real local process, and a workflow that lives in it (S3-S6).

The sandbox: `sandbox_app.py serve DIR` is an HTTP server on 127.0.0.1 keeping its state in
DIR/state.json (every operation it applied, in order) and its own record of its life in
DIR/record.log (`started PID`, `stopped PID`, `destroyed PID`), its port in DIR/port while it is up. The hooks
(`start`, `stop`, `alive`, `snapshot`, `restore`, `destroy`) are what a workflow passes to
`ctx.environment`; `start` is idempotent (a sandbox a SIGKILLed run left up is kept).

The agent process: `sandbox_app.py DB start RUN DIR STEPS [SECONDS] [--fail-at N]` or
`sandbox_app.py DB resume RUN` (or `retry RUN`) prints `{"result": ...}` or `{"error": ...}`.
"""

from __future__ import annotations

import http.server
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import daybook
from daybook import Context, Daybook

HERE = Path(__file__)
_children: dict[int, subprocess.Popen[bytes]] = {}


# -- the sandbox process --------------------------------------------------------------------


def _serve(where: Path) -> None:
    state_file = where / "state.json"
    state: dict[str, Any] = json.loads(state_file.read_text()) if state_file.exists() else {"ops": []}

    def save() -> None:
        tmp = where / "state.json.tmp"
        tmp.write_text(json.dumps(state))
        os.replace(tmp, state_file)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state["ops"].append(body["op"])  # not idempotent: a second call is a second op
            save()
            out = json.dumps({"count": len(state["ops"])}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)

    def bye(*_: Any) -> None:
        (where / "port").unlink(missing_ok=True)
        with open(where / "record.log", "a") as f:
            f.write(f"stopped {os.getpid()}\n")
        os._exit(0)

    signal.signal(signal.SIGTERM, bye)
    with open(where / "record.log", "a") as f:
        f.write(f"started {os.getpid()}\n")
    (where / "pid").write_text(str(os.getpid()))
    (where / "port.tmp").write_text(str(server.server_address[1]))
    os.replace(where / "port.tmp", where / "port")
    server.serve_forever()


def _pid_alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def alive(handle: str) -> bool:
    port = Path(handle, "port")
    if not port.exists():
        return False
    try:
        socket.create_connection(("127.0.0.1", int(port.read_text())), timeout=1).close()
        return True
    except OSError:
        return False


def start(handle: str) -> None:
    if alive(handle):
        return  # restarted in place only if it is down
    # Its own session and no inherited pipes: the sandbox outlives the agent (a SIGKILL of the
    # agent leaves it up), and whoever reads the agent's output is not held open by it.
    quiet = subprocess.DEVNULL
    cmd = [sys.executable, str(HERE), "serve", handle]
    proc = subprocess.Popen(cmd, start_new_session=True, stdin=quiet, stdout=quiet, stderr=quiet)
    _children[proc.pid] = proc
    deadline = time.monotonic() + 60
    while not alive(handle) and time.monotonic() < deadline:
        time.sleep(0.02)


def stop(handle: str) -> None:
    pid_file = Path(handle, "pid")
    if not pid_file.exists():
        return
    pid = int(pid_file.read_text())
    if _pid_alive(pid):
        os.kill(pid, signal.SIGTERM)
    if pid in _children:
        _children.pop(pid).wait(60)
    deadline = time.monotonic() + 60
    while _pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)


def snapshot(handle: str) -> dict[str, Any]:
    return {"ops": len(json.loads(Path(handle, "state.json").read_text())["ops"])}


def restore(handle: str, taken: Any) -> None:
    """Nothing to bring back for a directory that survived; told so in the record."""
    with open(Path(handle, "record.log"), "a") as f:
        f.write(f"restore-checked {taken['ops']}\n")


def destroy(handle: str) -> None:
    """Gone for good: its process ended and its state deleted; told so in its record (one line
    per call, so a test counts them). Idempotent: a second call finds nothing left to end."""
    stop(handle)
    Path(handle, "state.json").unlink(missing_ok=True)
    with open(Path(handle, "record.log"), "a") as f:
        f.write(f"destroyed {os.getpid()}\n")


def ops(handle: str) -> list[str]:
    """The sandbox's own record of what it applied (read at the world, not from daybook)."""
    return list(json.loads(Path(handle, "state.json").read_text())["ops"])


def record(handle: str) -> list[str]:
    return [line.split()[0] for line in Path(handle, "record.log").read_text().splitlines()]


# -- the workflow -----------------------------------------------------------------------------


@daybook.tool
def apply(op: str, where: str, idempotency_key: str) -> dict[str, Any]:
    """One operation in the sandbox (an HTTP call to its server)."""
    import urllib.request

    port = Path(where, "port").read_text()
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/", data=json.dumps({"op": op}).encode(), method="POST"
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        return dict(json.loads(resp.read()))


class Broken(Exception):
    """A step's own failure: the run fails (not parked as a bug), its state kept."""


@daybook.workflow(fail_on=(Broken,))
def sandboxed(ctx: Context, where: str, steps: int, seconds: float = 0.0, fail_at: int = -1) -> int:
    ctx.environment(
        where,
        remove_on_expiry=True,
        start=start,
        stop=stop,
        alive=alive,
        snapshot=snapshot,
        restore=restore,
        grace=30,
    )
    count = 0
    for i in range(steps):
        if i == fail_at and Path(where, "broken").exists():
            raise Broken(f"step {i} is broken (the file {where}/broken says so)")
        count = ctx.effect(apply, op=f"op-{i}", where=where)["count"]
        time.sleep(seconds)
    return count


@daybook.workflow
def disposable(ctx: Context, where: str, steps: int, keep_up: bool = False) -> int:
    """A sandbox destroyed at expiry by the `destroy` hook; `keep_up`: never stopped between
    executions (a VM left running), so only its destruction ends its process."""
    ctx.environment(
        where, start=start, alive=alive, stop=None if keep_up else stop, destroy=destroy, grace=30
    )
    count = 0
    for i in range(steps):
        count = ctx.effect(apply, op=f"op-{i}", where=where)["count"]
    return count


def main() -> None:
    from crashpoint import kill_at_journal_write, report, take

    db, action, run_id, *rest = sys.argv[1:]
    fail_at = take(rest, "--fail-at")
    book = Daybook(db, lease_ttl=2.0, inline_wait=0.0)
    kill_at_journal_write(book, rest)

    def run() -> object:
        if action == "start":
            where, steps = rest[0], int(rest[1])
            seconds = float(rest[2]) if len(rest) > 2 else 0.0
            fail = -1 if fail_at is None else int(fail_at)
            return book.run(sandboxed, where, steps, seconds, fail, run_id=run_id)
        if action == "retry":
            book.retry(run_id)
        return book.resume(run_id)

    report(run)


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        _serve(Path(sys.argv[2]))
    else:
        import sandbox_app  # the workflow under its module's name, as the tests and workers know it

        sandbox_app.main()
