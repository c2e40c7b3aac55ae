"""LangGraph's functional API, measured for run.py: an `@entrypoint` calling N no-op `@task`s.

    python benchmarks/peer_langgraph.py fresh|crash|recover SPEC_JSON

The checkpointer is `SqliteSaver` on the file `db` (it sets WAL and leaves synchronous=FULL), and
every invoke passes durability="sync". The method is the one in peers.md:

- fresh: a warm-up invoke of `warmup` tasks on its own thread, then one invoke of `n` tasks on a
  new thread, timed around `invoke`.
- crash: invokes thread `thread_id`; once all tasks have returned, the entrypoint waits until their
  writes (which LangGraph commits on a background thread) are all in the file, then `os._exit()`s.
- recover: a new process calls `invoke(None)` on the same thread; the replay time is the
  entrypoint body's own, `invoke_s` the whole call, and `reexecuted` counts tasks that ran again.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import time
from collections.abc import Callable
from typing import Any

from benchlib import emit, peak_rss_kib
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.func import entrypoint, task
from langgraph.pregel import Pregel

CALLS = 0  # task functions executed in this process
DRAIN_TIMEOUT_S = 30.0


@task
def bench_task(i: int) -> int:
    global CALLS
    CALLS += 1
    return i


def _drain(db: str, thread_id: str, n: int) -> None:
    """Wait until all n task results are committed, so the replay has every one to read back."""
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    with sqlite3.connect(db) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT COUNT(*) FROM writes WHERE thread_id = ? AND channel = '__return__'",
                (thread_id,),
            ).fetchone()
            if row[0] >= n:
                return
            time.sleep(0.05)


def build(db: str, crash_thread: str | None = None) -> Pregel[Any, Any, Any, Any]:
    saver = SqliteSaver(sqlite3.connect(db, check_same_thread=False))

    @entrypoint(checkpointer=saver)
    def bench_entrypoint(n: int) -> dict[str, Any]:
        start = time.perf_counter()
        for i in range(n):
            bench_task(i).result()
        body = time.perf_counter() - start
        if crash_thread is not None:
            _drain(db, crash_thread, n)
            os._exit(0)
        return {"steps": n, "body_s": body, "calls": CALLS}

    return bench_entrypoint


def _invoke(app: Pregel[Any, Any, Any, Any], arg: int | None, thread_id: str) -> dict[str, Any]:
    result: dict[str, Any] = app.invoke(arg, {"configurable": {"thread_id": thread_id}}, durability="sync")
    return result


def _check(result: dict[str, Any], n: int) -> None:
    if result.get("steps") != n:
        raise RuntimeError(f"LangGraph entrypoint returned {result!r}, expected {n} steps")


def fresh(spec: dict[str, Any]) -> dict[str, Any]:
    app = build(spec["db"])
    _invoke(app, spec["warmup"], "warmup")
    start = time.perf_counter()
    result = _invoke(app, spec["n"], "fresh")
    seconds = time.perf_counter() - start
    _check(result, spec["n"])
    return {"samples": [{"measure": "fresh", "seconds": seconds}]}


def crash(spec: dict[str, Any]) -> dict[str, Any]:
    _invoke(build(spec["db"], crash_thread=spec["workflow_id"]), spec["n"], spec["workflow_id"])
    raise RuntimeError("the entrypoint should have ended this process")


def recover(spec: dict[str, Any]) -> dict[str, Any]:
    app = build(spec["db"])
    start = time.perf_counter()
    result = _invoke(app, None, spec["workflow_id"])
    invoke_s = time.perf_counter() - start
    _check(result, spec["n"])
    extra = {"reexecuted": result["calls"], "invoke_us_per_step": invoke_s / spec["n"] * 1e6}
    return {"samples": [{"measure": "replay", "seconds": result["body_s"], "extra": extra}]}


MODES: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "fresh": fresh,
    "crash": crash,
    "recover": recover,
}


def main(argv: list[str]) -> None:
    mode, spec = argv
    result = MODES[mode](json.loads(spec))
    result["peak_rss_kib"] = peak_rss_kib()
    emit(result)


if __name__ == "__main__":
    main(sys.argv[1:])
