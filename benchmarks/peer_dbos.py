"""DBOS Transact, measured for run.py: one `@DBOS.workflow` calling N no-op `@DBOS.step`s.

    python benchmarks/peer_dbos.py fresh|crash|recover SPEC_JSON

SPEC holds `backend` ("sqlite": DBOS's own defaults on a file, that is a rollback journal with
synchronous=FULL; "postgresql": `pg` with `dbos_system_schema` = `schema`), `db` (the SQLite file),
`n`, `warmup` and `workflow_id`. The method is the one in peers.md:

- fresh: a warm-up workflow of `warmup` steps, then one workflow of `n` steps timed around the call.
- crash: runs workflow `workflow_id` and `os._exit()`s inside it once all its steps have returned
  (DBOS commits each step's output before the step returns).
- recover: a new process launches DBOS, whose startup recovery runs the pending workflow again;
  the replay time is the workflow body's own (from its first step to its last), and `reexecuted`
  counts step functions that actually ran again. The launcher that started this process times
  launch to result.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from benchlib import emit, peak_rss_kib
from dbos import DBOS, DBOSConfig, SetWorkflowID

CALLS = 0  # step functions executed in this process
_CRASH_AFTER_STEPS = False


@DBOS.step()
def bench_step(i: int) -> int:
    global CALLS
    CALLS += 1
    return i


@DBOS.workflow()
def bench_workflow(n: int) -> dict[str, Any]:
    start = time.perf_counter()
    for i in range(n):
        bench_step(i)
    body = time.perf_counter() - start
    if _CRASH_AFTER_STEPS:
        os._exit(0)
    return {"steps": n, "body_s": body, "calls": CALLS}


def _launch(spec: dict[str, Any]) -> None:
    config: DBOSConfig = {"name": "daybook-bench", "log_level": "WARNING"}
    if spec["backend"] == "sqlite":
        config["system_database_url"] = f"sqlite:///{spec['db']}"
    else:
        config["system_database_url"] = spec["pg"]
        config["dbos_system_schema"] = spec["schema"]
    DBOS(config=config)
    DBOS.launch()


def _check(result: dict[str, Any], n: int) -> None:
    if result.get("steps") != n:
        raise RuntimeError(f"DBOS workflow returned {result!r}, expected {n} steps")


def fresh(spec: dict[str, Any]) -> dict[str, Any]:
    _launch(spec)
    bench_workflow(spec["warmup"])
    start = time.perf_counter()
    result = bench_workflow(spec["n"])
    seconds = time.perf_counter() - start
    _check(result, spec["n"])
    return {"samples": [{"measure": "fresh", "seconds": seconds}]}


def crash(spec: dict[str, Any]) -> dict[str, Any]:
    global _CRASH_AFTER_STEPS
    _launch(spec)
    _CRASH_AFTER_STEPS = True
    with SetWorkflowID(spec["workflow_id"]):
        bench_workflow(spec["n"])
    raise RuntimeError("the workflow should have ended this process")


def recover(spec: dict[str, Any]) -> dict[str, Any]:
    _launch(spec)  # launch finds the pending workflow and recovers it on a background thread
    result: dict[str, Any] = DBOS.retrieve_workflow(spec["workflow_id"]).get_result()
    _check(result, spec["n"])
    extra = {"reexecuted": result["calls"]}
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
    # DBOS.destroy() spends about a second joining background threads; the parent drops the store.
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
