"""One measurement of run.py, in its own process: `python benchmarks/cells.py KIND SPEC_JSON`.

The process prints its result as one `@@bench` line (see benchlib): `samples`, each a `measure`,
the `seconds` it took for the whole N steps and optional `extra` figures, and `peak_rss_kib`, the
VmHWM of the process that did the measured work. Only the standard library is imported at the top:
a launcher (replay, resume_wall, peer_replay) must stay smaller than the process it starts.

Kinds, and what `seconds` covers:

- floor_python / floor_sqlite / floor_pg: the floors of journal_cost.py (a plain Python call;
  raw sqlite3 or psycopg doing daybook's two commits per step), after a warm-up run.
- daybook_fresh: `book.run(...)` of N no-op effects on a store of its own, after a warm-up run.
- daybook_replay: a launcher. A writer process runs N effects and SIGKILLs itself after the last
  one; then a fresh process (kind daybook_resume) opens the store and resumes the run. `replay` is
  the workflow body's own time, first step to last, as peers.md times the peers' replays (the
  whole `book.resume()`, which also reads the journal and commits the run's end, is the extra
  `resume_us_per_step`); `resume_inproc` is opening the store plus `book.resume()`, so "from a
  process that has the code loaded to the run's result". No warm-up: a resume is a new process.
- daybook_resume_wall: a launcher. Same writer, then `python -m daybook resume RUN --db URL --app
  noop_app.py`, timed from spawn to exit (interpreter start, imports, resume, printing the
  result). Its peak RSS is the `wait4` max RSS of that process (this launcher is smaller, so the
  figure is the child's).
- peer_replay: a launcher for peer_dbos.py / peer_langgraph.py: `crash`, then `recover`, timed
  from spawn to the result line (`resume_wall`) next to the body time the peer process reports.
- daybook_settle: goal 2 of issue 28: `book.run(...)` of N no-op effects of a tool daybook
  settles by itself (settle_app.py: a status query by key, idempotent), SQLite. First an untimed
  run of min(N, 200) steps with a statement trace on the store's connections counts the write
  transactions per step (a BEGIN..COMMIT, or a write outside one, is one commit); then a warm-up
  and the timed run, untraced. Extra: `commits_per_step`, `deferred` (fewer than 1.5 commits per
  step: the outcome commit rides with the next intent) and `deferral` (how it was asked for).
- hook: runs `measure(quick)` (and `targets(rows)` if present) of an optional module such as
  benchmarks/concurrency.py, isolated in this process.

The writer of a crashed run commits without waiting for the disk (SQLite `synchronous=normal`,
PostgreSQL `synchronous_commit=off`) to save time: after a SIGKILL the store holds the same rows
either way, and the process that resumes opens it with the durability being measured.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchlib import HERE, ChildFailed, async_commit_env, emit, parse_result, peak_rss_kib, run_child, tail

Spec = dict[str, Any]
Result = dict[str, Any]


def _timed(run_once: Callable[[int], float], spec: Spec, measure: str = "fresh") -> Result:
    """Warm up with one run of `spec["warmup"]` steps, then time one run of `spec["n"]`."""
    run_once(spec["warmup"])
    return {"samples": [{"measure": measure, "seconds": run_once(spec["n"])}]}


def _noop(i: int, idempotency_key: str) -> dict[str, Any]:
    return {"ok": True, "i": i}


def floor_python(spec: Spec) -> Result:
    from floors import call_floor

    return _timed(lambda n: call_floor(_noop, n)(), spec, "floor")


def floor_sqlite(spec: Spec) -> Result:
    from floors import sqlite_floor

    path = Path(spec["workdir"]) / "floor.db"
    return _timed(lambda n: sqlite_floor(path, spec["sync"].upper(), n)(), spec, "floor")


def floor_pg(spec: Spec) -> Result:
    from floors import pg_floor

    return _timed(lambda n: pg_floor(spec["pg"], n, spec["schema"])(), spec, "floor")


def daybook_fresh(spec: Spec) -> Result:
    """`book.run()` of N effects, each run a new run id on one store, as journal_cost.py does."""
    import noop_app

    from daybook import Daybook

    def run_once(n: int) -> float:
        start = time.perf_counter()
        result = book.run(noop_app.bench_noop_steps, n, run_id=uuid.uuid4().hex)
        seconds = time.perf_counter() - start
        if result != {"steps": n}:
            raise RuntimeError(f"daybook run returned {result!r}")
        return seconds

    with Daybook(spec["url"]) as book:
        return _timed(run_once, spec)


class _CommitCounter:
    """Counts write transactions on every sqlite3 connection opened while it is installed, from
    the statement trace (each statement may be traced twice in a row: counted once)."""

    WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")

    def __init__(self) -> None:
        self.commits = 0
        self.on = False
        self._open = False
        self._last = ""

    def trace(self, statement: str) -> None:
        if not self.on or statement == self._last:
            return
        self._last = statement
        head = statement.lstrip()[:8].upper()
        if head.startswith("BEGIN"):
            self._open = True
        elif head.startswith(("COMMIT", "END")):
            self._open = False
            self.commits += 1
        elif head.startswith(self.WRITES) and not self._open:
            self.commits += 1  # autocommit: a write outside a transaction commits by itself


def daybook_settle(spec: Spec) -> Result:
    import sqlite3

    counter = _CommitCounter()
    connect = sqlite3.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)
        conn.set_trace_callback(counter.trace)
        return conn

    import settle_app

    from daybook import Daybook

    options = settle_app.defer_options(Daybook)
    asked = [f"tool({k}=True)" for k in settle_app.TOOL_OPTIONS] + [f"Daybook({k}=True)" for k in options]
    calibrate = min(spec["n"], 200)
    sqlite3.connect = traced  # type: ignore[assignment]
    try:
        with Daybook(spec["url"], **options) as book:
            book.run(settle_app.bench_settle_steps, 2, run_id=uuid.uuid4().hex)
            counter.on = True
            book.run(settle_app.bench_settle_steps, calibrate, run_id=uuid.uuid4().hex)
            counter.on = False
    finally:
        sqlite3.connect = connect  # type: ignore[assignment]
    per_step = counter.commits / calibrate

    def run_once(n: int) -> float:
        start = time.perf_counter()
        result = book.run(settle_app.bench_settle_steps, n, run_id=uuid.uuid4().hex)
        seconds = time.perf_counter() - start
        if result != {"steps": n}:
            raise RuntimeError(f"daybook run returned {result!r}")
        return seconds

    workdir = Path(spec["workdir"])
    with Daybook(f"sqlite:///{workdir / 'settle.db'}?synchronous={spec['sync']}", **options) as book:
        result = _timed(run_once, spec, "settle")
    deferred = per_step < 1.5
    how = ", ".join(asked) or "the tool profile alone, a status query and idempotent"
    deferral = (
        f"deferred outcome commit in effect, asked by {how}"
        if deferred
        else f"no option or tool profile deferred the outcome commit (tried: {how})"
    )
    # The run's own start and end are a commit each whatever its length (its header created, its
    # end written with the last held outcome): goal 2 counts the commits of its effect steps.
    steps_only = (counter.commits - 2) / calibrate
    extra = {
        "commits_per_step": per_step,
        "step_commits_per_step": steps_only,
        "deferred": deferred,
        "deferral": deferral,
    }
    result["samples"][0]["extra"] = extra
    return result


# -- replay after a crash ----------------------------------------------------------------------


def _crash_daybook_run(spec: Spec) -> str:
    run_id = uuid.uuid4().hex
    cmd = [sys.executable, str(HERE / "noop_app.py"), spec["writer_url"], run_id, str(spec["n"])]
    env = async_commit_env() if spec["backend"] == "postgresql" else None
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if proc.returncode != -signal.SIGKILL:
        raise ChildFailed(f"crash writer exited {proc.returncode}, not SIGKILL: {tail(proc.stderr)}")
    return run_id


def daybook_replay(spec: Spec) -> Result:
    run_id = _crash_daybook_run(spec)
    return run_child([sys.executable, __file__, "daybook_resume", json.dumps({**spec, "run_id": run_id})])


def daybook_resume(spec: Spec) -> Result:
    import noop_app

    from daybook import Daybook

    n = spec["n"]
    start = time.perf_counter()
    book = Daybook(spec["url"])
    opened = time.perf_counter()
    result = book.resume(spec["run_id"])
    done = time.perf_counter()
    rows = len(book.journal(spec["run_id"]))
    book.close()
    if result != {"steps": n} or noop_app.CALLS:
        raise RuntimeError(f"resume returned {result!r} after {noop_app.CALLS} tool calls (expected none)")
    extra = {
        "reexecuted": noop_app.CALLS,
        "journal_rows": rows,
        "resume_us_per_step": (done - opened) / n * 1e6,
    }
    return {
        "samples": [
            {"measure": "replay", "seconds": noop_app.BODY_S, "extra": extra},
            {"measure": "resume_inproc", "seconds": done - start},
        ]
    }


def daybook_resume_wall(spec: Spec) -> Result:
    run_id = _crash_daybook_run(spec)
    # --app: daybook imports no code named by the store, so the command names the workflow's script.
    app = str(HERE / "noop_app.py")
    cmd = [sys.executable, "-m", "daybook", "resume", run_id, "--db", spec["url"], "--app", app]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if proc.returncode != 0 or json.loads(stdout or "null") != {"steps": spec["n"]}:
        raise ChildFailed(f"daybook resume exited {proc.returncode}: {tail(stderr) or tail(stdout)}")
    extra = {"launcher_rss_kib": peak_rss_kib() or 0}
    return {
        "samples": [{"measure": "resume_wall", "seconds": seconds, "extra": extra}],
        "peak_rss_kib": usage.ru_maxrss,
    }


def _launch_to_result(cmd: list[str], timeout: float = 3600) -> tuple[float, Result]:
    """Seconds from spawning `cmd` to its result line, and the result."""
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
        assert proc.stdout is not None
        found: tuple[float, Result] | None = None
        for line in proc.stdout:
            parsed = parse_result(line)
            if parsed is not None and found is None:
                found = (time.perf_counter() - start, parsed)
        code = proc.wait(timeout)
        err.seek(0)
        if code != 0 or found is None:
            raise ChildFailed(f"{' '.join(cmd[1:3])} exited {code}: {tail(err.read().decode())}")
    return found


def peer_replay(spec: Spec) -> Result:
    driver = str(HERE / spec["driver"])
    spec = {**spec, "workflow_id": f"crashed-{uuid.uuid4().hex}"}
    encoded = json.dumps(spec)
    crash = subprocess.run(
        [sys.executable, driver, "crash", encoded], capture_output=True, text=True, check=False
    )
    if crash.returncode != 0 or parse_result(crash.stdout) is not None:
        raise ChildFailed(f"{spec['driver']} crash exited {crash.returncode}: {tail(crash.stderr)}")
    seconds, result = _launch_to_result([sys.executable, driver, "recover", encoded])
    result["samples"].append({"measure": "resume_wall", "seconds": seconds})
    return result


# -- optional modules by other authors ---------------------------------------------------------


def hook(spec: Spec) -> Result:
    module = importlib.import_module(spec["module"])
    if not callable(getattr(module, "measure", None)):
        return {"rows": [], "targets": [], "missing": f"benchmarks/{spec['module']}.py has no measure(quick)"}
    rows = module.measure(spec["quick"])
    targets = module.targets(rows) if hasattr(module, "targets") else []
    return {"rows": rows, "targets": targets}


KINDS: dict[str, Callable[[Spec], Result]] = {
    "floor_python": floor_python,
    "floor_sqlite": floor_sqlite,
    "floor_pg": floor_pg,
    "daybook_fresh": daybook_fresh,
    "daybook_settle": daybook_settle,
    "daybook_replay": daybook_replay,
    "daybook_resume": daybook_resume,
    "daybook_resume_wall": daybook_resume_wall,
    "peer_replay": peer_replay,
    "hook": hook,
}


def main(argv: list[str]) -> None:
    kind, spec = argv
    result = KINDS[kind](json.loads(spec))
    result.setdefault("peak_rss_kib", peak_rss_kib())
    emit(result)


if __name__ == "__main__":
    main(sys.argv[1:])
