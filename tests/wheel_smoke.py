"""Smoke-test what a user installs: every console entry of daybook, run from an installed wheel.

`.ci/smoke-wheel` installs the built wheel (not editable) into a fresh virtual environment and
runs this script with that environment's Python; `tests/test_wheel.py` runs it against the
checkout too, so the script itself is kept working. It drives each entry as a user would, from
a scratch directory, and checks the answer at the counterparty where there is one:

    demo     `python -m daybook demo`: the agent killed mid-wire and resumed, one wire at the bank
    worker   `daybook worker --until-idle` takes a submitted run and completes it
    web      `daybook web` serves the runs page, a run's page and its script /static/live.js, each
             registered view of the run (`views.names()`) with its JSON and every /static file
             its page loads, and the vendored chart library
    proxy    `daybook proxy` relays one MCP call to a stdio MCP server, which counts it once
    extras   each extra's modules import from the install (integrations, OpenTelemetry, crypto,
             cron schedules, PostgreSQL)

    python tests/wheel_smoke.py [--installed] [--only demo,worker,web,proxy,extras]

`--installed` insists that `daybook` is imported from site-packages (not a checkout's src/).
Exits non-zero, saying which check failed, on the first failure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
COUNTER_SERVER = HERE / "mcp_counter_server.py"
TIMEOUT = 120  # seconds for any one command: generous, a loaded machine is slow, not broken

APP = """
import daybook


@daybook.workflow
def smoke(ctx: daybook.Context, n: int) -> int:
    return ctx.decide("double", lambda: n * 2).value
"""


def daybook_command() -> list[str]:
    """The `daybook` console script beside this Python (what the wheel installed)."""
    script = Path(sys.executable).parent / "daybook"
    return [str(script)] if script.exists() else [sys.executable, "-m", "daybook"]


def check(ok: bool, what: str) -> None:
    if not ok:
        raise SystemExit(f"wheel smoke: FAILED: {what}")


def run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    check(proc.returncode == 0, f"{' '.join(args)} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return proc


def smoke_demo(work: Path, env: dict[str, str]) -> None:
    proc = run([sys.executable, "-m", "daybook", "demo"], work, env)
    check("wire" in proc.stdout, f"the demo's output names no wire: {proc.stdout[-2000:]}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def fetch(url: str) -> tuple[int, str]:
    """The status and body of a GET; an error status is returned, not raised."""
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return int(answer.status), answer.read().decode()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode(errors="replace")


def wait_for(url: str, server: subprocess.Popen[str]) -> tuple[int, str]:
    deadline = time.monotonic() + TIMEOUT
    while True:
        try:
            return fetch(url)
        except OSError:
            check(server.poll() is None, f"daybook web exited {server.returncode} before serving")
            check(time.monotonic() < deadline, f"daybook web did not answer {url}")
            time.sleep(0.2)


def smoke_web(work: Path, env: dict[str, str]) -> None:
    """On the worker's store (one completed run, w-1): the runs page lists it, its page loads
    the live script, and the script is served (it once was missing from the wheel); then each
    of its views with their assets (`smoke_views`)."""
    db = f"sqlite:///{work / 'worker.db'}"
    if not (work / "worker.db").exists():
        smoke_worker(work, env)
    port = free_port()
    args = [*daybook_command(), "web", "--db", db, "--host", "127.0.0.1", "--port", str(port)]
    server = subprocess.Popen(args, cwd=work, env=env, text=True, stderr=subprocess.PIPE)
    try:
        status, page = wait_for(f"http://127.0.0.1:{port}/", server)
        check(status == 200 and "w-1" in page, "the runs page does not list run w-1")
        status, page = fetch(f"http://127.0.0.1:{port}/runs/w-1")
        check(status == 200 and "/static/live.js" in page, "the run page does not load live.js")
        status, script = fetch(f"http://127.0.0.1:{port}/static/live.js")
        check(status == 200 and "EventSource" in script, "/static/live.js is not served")
        smoke_views(f"http://127.0.0.1:{port}", "w-1")
    finally:
        server.terminate()
        server.wait(timeout=30)


# The chart library every view draws with (vendored in the wheel: no CDN at run time).
CHART_JS = "/static/vendor/echarts-6.1.0.min.js"
ASSET = re.compile(r'(?:src|href)="(/static/[^"]+)"')


def smoke_views(base: str, run_id: str) -> None:
    """Every registered view of the run (`daybook.web.views.names()`, as installed: a view added
    later is covered without editing this) is served, each static file its page loads is too,
    and so is its JSON; and the vendored chart library."""
    from daybook.web import views

    names = views.names()
    assets = {CHART_JS}
    for name in names:
        status, page = fetch(f"{base}/runs/{run_id}?view={name}")
        check(status == 200 and 'id="view"' in page, f"the {name} view of {run_id} is not served")
        assets.update(ASSET.findall(page))
        if views.VIEWS[name].data is not None:
            status, body = fetch(f"{base}/api/views/{name}?run={run_id}")
            check(status == 200, f"/api/views/{name}?run={run_id} answered {status}")
            json.loads(body)
    for path in sorted(assets):
        status, body = fetch(base + path)
        check(
            status == 200 and len(body) > 0, f"{path} is not served (a view's asset missing from the wheel?)"
        )
    print(f"wheel smoke: web views {', '.join(names) or 'none registered'}; {len(assets)} assets", flush=True)


def smoke_proxy(work: Path, env: dict[str, str]) -> None:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    ledger = work / "ledger.jsonl"
    db = f"sqlite:///{work / 'proxy.db'}"
    upstream = f"{sys.executable} {COUNTER_SERVER}"
    args = ["proxy", "--db", db, "--run", "smoke", "--upstream", upstream]
    command = daybook_command()
    params = StdioServerParameters(
        command=command[0], args=[*command[1:], *args], env={**env, "MCP_LEDGER": str(ledger)}
    )

    async def call() -> None:
        async with stdio_client(params) as (r, w), ClientSession(r, w) as session:
            await session.initialize()
            result = await session.call_tool("send", {"to": "bob", "amount": 5})
            check(not result.isError, f"the relayed call failed: {result.content}")

    asyncio.run(asyncio.wait_for(call(), TIMEOUT))
    lines = ledger.read_text().splitlines() if ledger.exists() else []
    check(len(lines) == 1, f"the MCP server counted {len(lines)} executions, not 1")
    effects = run([*daybook_command(), "effects", "--db", db, "--json"], work, env)
    check('"send"' in effects.stdout or "mcp:send" in effects.stdout, "the call is not in the journal")


def smoke_worker(work: Path, env: dict[str, str]) -> None:
    db = f"sqlite:///{work / 'worker.db'}"
    (work / "smoke_app.py").write_text(APP)
    submit = (
        "import daybook, smoke_app; "
        f"book = daybook.Daybook({db!r}); book.submit(smoke_app.smoke, 21, run_id='w-1'); book.close()"
    )
    run([sys.executable, "-c", submit], work, env)
    run([*daybook_command(), "worker", "--db", db, "--app", "smoke_app.py", "--until-idle"], work, env)
    shown = json.loads(run([*daybook_command(), "runs", "--db", db, "--json"], work, env).stdout)
    check([(r["run_id"], r["status"]) for r in shown] == [("w-1", "completed")], f"runs: {shown}")


# The modules each extra is for: each must import once its extra is installed.
EXTRA_MODULES = {
    "langgraph": "daybook.integrations.langgraph",
    "openai-agents": "daybook.integrations.openai_agents",
    "pydantic-ai": "daybook.integrations.pydantic_ai",
    "mcp": "daybook.integrations.mcp",
    "web": "daybook.web.app",
    "otel": "opentelemetry.sdk.trace",
    "crypto": "cryptography.fernet",
    "schedule": "croniter",
    "postgres": "psycopg",
}


def smoke_extras(work: Path, env: dict[str, str]) -> None:
    for extra, module in EXTRA_MODULES.items():
        proc = subprocess.run(
            [sys.executable, "-c", f"import {module}"], cwd=work, env=env, capture_output=True, text=True
        )
        check(proc.returncode == 0, f"[{extra}]: import {module} failed: {proc.stderr[-1500:]}")


SMOKES: dict[str, Callable[[Path, dict[str, str]], None]] = {
    "demo": smoke_demo,
    "worker": smoke_worker,
    "web": smoke_web,
    "proxy": smoke_proxy,
    "extras": smoke_extras,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--installed", action="store_true", help="daybook must come from site-packages")
    parser.add_argument("--only", default=",".join(SMOKES), help="comma-separated: " + ",".join(SMOKES))
    options = parser.parse_args()
    import daybook

    where = Path(daybook.__file__).resolve()
    print(f"wheel smoke: daybook {daybook.__version__} from {where}", flush=True)
    if options.installed:
        check("site-packages" in where.parts, f"daybook was imported from {where}, not an install")
    work = Path(tempfile.mkdtemp(prefix="daybook-smoke-"))
    env = {k: v for k, v in os.environ.items() if k not in {"DAYBOOK_DB", "DAYBOOK_APP"}}
    if options.installed:
        env.pop("PYTHONPATH", None)  # nothing but the installed wheel
    try:
        for name in options.only.split(","):
            started = time.monotonic()
            SMOKES[name](work, env)
            print(f"wheel smoke: {name} ok ({time.monotonic() - started:.1f}s)", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
