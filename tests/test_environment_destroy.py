"""The environment's end (S5): a sandbox (a real local process, tests/sandbox_app.py) destroyed by
the workflow's own `destroy` hook once its run is `expired`, in whichever process expires it, and
only if that process has the workflow's code (`--app`): one without it expires the run but keeps
the sandbox, listed as awaiting destroy, until a pass by one with the code; a kill between the
hook and its log entry runs the hook again. Asserted at the sandbox's own process and record."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sandbox_app
from conftest import HERE, killed, wait_until, worker_command
from sandbox_app import record

import daybook
from daybook import Daybook, RunStatus
from daybook.worker import Worker

pytestmark = pytest.mark.slow

SANDBOX_APP = str(HERE / "sandbox_app.py")


def _log(book: Daybook, run_id: str) -> list[dict[str, Any]]:
    return list(book.checkpoint(run_id)["environment"]["log"])  # type: ignore[index,call-overload]


def _actions(book: Daybook, run_id: str) -> list[str]:
    return [str(e["action"]) for e in _log(book, run_id)]


def _pid(where: Path) -> int:
    return int((where / "pid").read_text())


def _destroyed(where: Path) -> bool:
    """The sandbox's own record says it was destroyed, its process is gone, its state deleted."""
    return (
        record(str(where))[-1] == "destroyed"
        and not sandbox_app._pid_alive(_pid(where))
        and not (where / "state.json").exists()
    )


def _worker(db_url: str, *extra: str) -> subprocess.Popen[str]:
    """`daybook worker --retention 1s` on no queue of runs: only its retention pass works."""
    env = {k: v for k, v in os.environ.items() if k != "DAYBOOK_APP"}
    cmd = [sys.executable, "-m", "daybook", "worker", "--db", db_url, "--retention", "1s"]
    cmd += ["--queue", "nothing-here", "--poll", "0.05", *extra]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _ended(worker: subprocess.Popen[str]) -> str:
    worker.send_signal(signal.SIGTERM)
    out, err = worker.communicate(timeout=60)
    return out + err


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[Path]:
    where = tmp_path / "sandbox"
    where.mkdir()
    yield where
    sandbox_app.stop(str(where))


def test_a_worker_with_the_workflows_code_destroys_the_running_sandbox_once_the_run_expires(
    db_url: str, sandbox: Path
) -> None:
    with Daybook(db_url) as book:
        assert book.run(sandbox_app.disposable, str(sandbox), 2, True, run_id="vm") == 2
        assert sandbox_app.alive(str(sandbox))  # kept up between executions, as a VM is
        worker = _worker(db_url, "--app", SANDBOX_APP)
        try:
            wait_until(lambda: book.get_run("vm").status == RunStatus.EXPIRED, timeout=60)
            wait_until(lambda: _destroyed(sandbox), timeout=60)
            wait_until(lambda: _actions(book, "vm")[-1] == "expired", timeout=60)
        finally:
            out = _ended(worker)
        assert "expired completed run vm past the window; its environment" in out
        assert "destroyed" in out
        assert record(str(sandbox)) == ["started", "stopped", "destroyed"]  # one destroy, by the worker
        assert _actions(book, "vm")[-3:] == ["destroy_requested", "destroyed", "expired"]
        assert book.checkpoint("vm")["environment"]["status"] == "destroyed"  # type: ignore[index]


def test_a_worker_without_the_workflows_code_keeps_the_sandbox_awaiting_destroy_until_one_with_it(
    db_url: str, sandbox: Path
) -> None:
    with Daybook(db_url) as book:
        assert book.run(sandbox_app.disposable, str(sandbox), 1, True, run_id="orphan") == 1
        pid = _pid(sandbox)
        without = subprocess.Popen(
            worker_command(db_url, "--retention", "1s", "--queue", "nothing-here"),  # tests/agents.py only
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_until(lambda: book.get_run("orphan").status == RunStatus.EXPIRED, timeout=60)
            wait_until(lambda: "destroy_awaiting" in _actions(book, "orphan"), timeout=60)
            time.sleep(1.0)  # several more passes: still kept, and said once
        finally:
            out = _ended(without)
        assert sandbox_app._pid_alive(pid) and sandbox_app.alive(str(sandbox))  # never leaked, never killed
        assert "destroyed" not in record(str(sandbox))
        assert _actions(book, "orphan").count("destroy_awaiting") == 1
        assert "expired" not in _actions(book, "orphan")
        assert book.checkpoint("orphan")["environment"]["status"] == "awaiting destroy"  # type: ignore[index]
        assert out.count("awaiting destroy") == 1 and "--app" in out

        env = {k: v for k, v in os.environ.items() if k != "DAYBOOK_APP"}
        listed = subprocess.run(
            [sys.executable, "-m", "daybook", "gc", "--db", db_url, "--older-than", "0s"],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        assert "run orphan; its environment" in listed.stdout and "awaiting destroy" in listed.stdout
        assert sandbox_app.alive(str(sandbox))

        with_code = _worker(db_url, "--app", SANDBOX_APP)
        try:
            wait_until(lambda: _destroyed(sandbox), timeout=60)
            wait_until(lambda: _actions(book, "orphan")[-1] == "expired", timeout=60)
        finally:
            _ended(with_code)
        assert not sandbox_app._pid_alive(pid)
        assert _actions(book, "orphan")[-3:] == ["destroy_requested", "destroyed", "expired"]


# A gc pass (with the workflow's code) that dies (SIGKILL) after the destroy hook ran and before
# its `destroyed` entry is written.
_DIES_AFTER_DESTROY = """
import os, sys
sys.path.insert(0, sys.argv[2])
import sandbox_app
from daybook import Daybook
from daybook.steering import environment
write = environment.Log.write
def dying(self, action, data):
    if action == "destroyed":
        os.kill(os.getpid(), 9)
    write(self, action, data)
environment.Log.write = dying
Daybook(sys.argv[1]).gc(0.2)
"""


def test_a_kill_between_the_destroy_hook_and_its_log_entry_runs_the_idempotent_hook_again(
    db_url: str, sandbox: Path
) -> None:
    with Daybook(db_url) as book:
        assert book.run(sandbox_app.disposable, str(sandbox), 1, True, run_id="half") == 1
        pid = _pid(sandbox)
        time.sleep(0.3)
        dead = subprocess.run(
            [sys.executable, "-c", _DIES_AFTER_DESTROY, db_url, str(HERE)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert killed(dead), dead.stderr
        assert book.get_run("half").status == RunStatus.EXPIRED
        assert not sandbox_app._pid_alive(pid) and record(str(sandbox))[-1] == "destroyed"  # it ran
        assert _actions(book, "half")[-1] == "destroy_requested"  # and was not logged done
        [again] = book.gc(0.2, by="ops", app=SANDBOX_APP)["expired"]  # type: ignore[misc]
        assert again["run_id"] == "half" and again["destroyed"] is True  # type: ignore[index]
        assert record(str(sandbox)).count("destroyed") == 2  # run again, harmlessly
        assert _destroyed(sandbox)
        assert _actions(book, "half")[-3:] == ["destroy_requested", "destroyed", "expired"]
        assert book.gc(0.2)["expired"] == []  # done with: never again


_FLAKY = {"broken": True}


def fickle_destroy(handle: str) -> None:
    if _FLAKY["broken"]:
        raise OSError(f"the API that destroys {handle} is down")
    Path(handle, "destroyed").write_text("yes")


@daybook.workflow
def fickle(ctx: daybook.Context, where: str) -> str:
    return ctx.environment(where, destroy=fickle_destroy)


def test_a_destroy_hook_that_raises_keeps_the_environment_and_the_next_pass_tries_again(
    book: Daybook, tmp_path: Path
) -> None:
    _FLAKY["broken"] = True
    assert book.run(fickle, str(tmp_path), run_id="fickle") == str(tmp_path)
    time.sleep(0.3)
    [failed] = book.gc(0.2)["expired"]  # type: ignore[misc]
    assert failed["awaiting_destroy"] is True and "is down" in str(failed["error"])  # type: ignore[index]
    assert book.get_run("fickle").status == RunStatus.EXPIRED
    assert _actions(book, "fickle")[-2:] == ["destroy_requested", "destroy_failed"]
    assert not (tmp_path / "destroyed").exists()
    _FLAKY["broken"] = False
    [done] = book.gc(0.2)["expired"]  # type: ignore[misc]
    assert done["destroyed"] is True and (tmp_path / "destroyed").exists()  # type: ignore[index]
    assert _actions(book, "fickle")[-1] == "expired"


def test_a_worker_tries_a_failing_destroy_hook_again_at_doubling_intervals_not_at_every_pass(
    db_url: str, tmp_path: Path
) -> None:
    _FLAKY["broken"] = True
    worker = Worker(db_url, retention=0.2, schedules=False, queues=["nothing-here"], poll=0.05)
    thread = threading.Thread(target=worker.run, daemon=True)
    with Daybook(db_url) as book:
        assert book.run(fickle, str(tmp_path), run_id="nagged") == str(tmp_path)
        thread.start()
        try:
            wait_until(lambda: "destroy_failed" in _actions(book, "nagged"), timeout=60)
            time.sleep(2.5)  # some fifty passes of a 0.2 s window
        finally:
            worker.stop.set()
            thread.join(30)
        tries = _actions(book, "nagged").count("destroy_requested")
        assert 2 <= tries <= 3  # at 0 s, 2 s (and 6 s): not once a pass
        assert book.get_run("nagged").status == RunStatus.EXPIRED
        _FLAKY["broken"] = False
        [done] = book.gc(0.2)["expired"]  # type: ignore[misc]  # by hand: tried at once
        assert done["destroyed"] is True and (tmp_path / "destroyed").exists()  # type: ignore[index]


@daybook.workflow
def misdeclared(ctx: daybook.Context, what: str) -> str:
    if what == "string":
        return ctx.environment("/tmp/x", destroy="rm -rf /tmp/x")  # type: ignore[arg-type]
    return ctx.environment("/tmp/x", destroy=lambda h: None)


@pytest.mark.parametrize(
    ("what", "says"),
    [("string", "takes a function of the handle"), ("lambda", "module names at top level")],
)
def test_a_destroy_hook_that_is_not_a_module_level_function_is_refused_with_what_to_pass(
    book: Daybook, what: str, says: str
) -> None:
    with pytest.raises(daybook.DaybookError, match=says):
        book.run(misdeclared, what, run_id=f"bad-{what}")
