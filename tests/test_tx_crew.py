"""A speculation's branches run on threads kept between speculations (tx/crew.py): the next
speculation's branches reuse them instead of starting new ones, each branch still starts with
no ContextVar a previous branch set (as on a new thread), and a process forked after a
speculation runs its own speculations on threads of its own."""

from __future__ import annotations

import contextvars
import os
import threading
import time
from typing import Any

import daybook
from daybook import Daybook
from daybook.tx import crew

K = 8
SEEN: contextvars.ContextVar[str | None] = contextvars.ContextVar("test_crew_seen", default=None)
THREADS: list[int] = []
LEFT: list[str | None] = []
LOCK = threading.Lock()


def _branch(j: int) -> Any:
    def body(ctx: daybook.Context) -> dict[str, int]:
        with LOCK:
            THREADS.append(threading.get_ident())
            LEFT.append(SEEN.get())
        SEEN.set(f"set by branch {j}")  # never seen by a later branch on this thread
        return {"j": j}

    return body


@daybook.workflow(name="crew_spec")
def crew_spec(ctx: daybook.Context, k: int) -> Any:
    branches = {f"b{j}": _branch(j) for j in range(k)}
    return ctx.speculate(branches, choose=lambda r: min(r, key=lambda name: r[name]["j"]))


def _crew_threads() -> set[int | None]:
    return {t.ident for t in threading.enumerate() if t.name == "daybook-branch"}


def _one(book: Daybook, run_id: str) -> list[int]:
    THREADS.clear()
    assert book.run(crew_spec, K, run_id=run_id) == {"j": 0}
    return list(THREADS)


def test_the_next_speculation_runs_its_branches_on_the_threads_of_the_last(db_url: str) -> None:
    with Daybook(db_url) as book:
        first = _one(book, "c1")
        time.sleep(0.2)  # the first speculation's threads are back, idle
        crew_threads = _crew_threads()
        LEFT.clear()
        second = _one(book, "c2")
        assert _crew_threads() == crew_threads  # no thread started for the second
        assert set(second) <= set(first)  # its branches ran on the first one's threads
        assert LEFT == [None] * K  # none saw a ContextVar the first speculation's branches set
        assert sorted(t["status"] for t in book.transactions() if t["run_id"] == "c2") == (
            ["aborted"] * (K - 1) + ["committed"]
        )
        assert book.check() == []


def test_a_process_forked_after_a_speculation_runs_its_own(db_url: str) -> None:
    with Daybook(db_url) as book:
        _one(book, "parent")
    time.sleep(0.2)
    assert crew._idle  # the parent's threads wait, idle (none of them exists in a child)
    pid = os.fork()
    if pid == 0:  # the child: a fresh handle, a speculation on threads of its own
        code = 1
        try:
            with Daybook(db_url) as child:
                code = 0 if child.run(crew_spec, K, run_id="child") == {"j": 0} else 2
        finally:
            os._exit(code)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        raise AssertionError("the forked child hung: it gave its branches to threads it has not")
    assert os.waitstatus_to_exitcode(status) == 0
    with Daybook(db_url) as book:
        assert book.get_run("child").status == "completed"
