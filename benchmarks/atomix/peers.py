"""The peers the paper did not run (its §6.1.1): DBOS and LangGraph as real No-Tx systems on
the same workloads, each in a subprocess of its own (DBOS is a process-wide singleton).

    python benchmarks/atomix/peers.py dbos|langgraph SPEC_JSON

- Table 10: the file, email, file, email, file run, every call a durable step (DBOS
  `@DBOS.step`, LangGraph `@task` with a SqliteSaver checkpointer) retried up to 4 attempts,
  which is how each documents handling a failing call; same fault draws as our modes; the
  parent counts the deliveries from its SMTP sink's log.
- Table 9: agents x 50 increments of one shared SQLite counter, the read and the write as two
  steps, agents as concurrent workflows; correct iff the counter ends at agents x 50.
Prints one JSON line: {"t10": {"runs", "failed"}, "t9": {"<agents>": [correct, ...]}}."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import irreversible as ir
from faults import FaultModel, Injector
from resources import Op, SqliteStore
from smtp import SmtpClient

STORE: dict[str, SqliteStore] = {}


def _t10_call(run: str, step: int, draw: str) -> None:
    room = ir.ROOM["room"]
    if ir.PLAN[step] == "file":
        room.write(run, step, draw, None)
    else:
        room.mail(run, step, draw, None)


def _read(name: str) -> int:
    return int(STORE["s"].apply(Op("read", name), None) or 0)


def _write(name: str, value: int) -> None:
    STORE["s"].apply(Op("set", name, value), None)


def dbos_system(root: Path) -> tuple[Callable[[str, str], Any], Callable[[str, int], Any]]:
    from dbos import DBOS, DBOSConfig

    retry = {"retries_allowed": True, "interval_seconds": 0.001, "max_attempts": 4, "backoff_rate": 1.0}
    call = DBOS.step(**retry)(_t10_call)  # type: ignore[arg-type]
    read, write = DBOS.step()(_read), DBOS.step()(_write)

    @DBOS.workflow()
    def t10(run: str, draw: str) -> None:
        for step in range(len(ir.PLAN)):
            call(run, step, draw)

    @DBOS.workflow()
    def agent(name: str, ops: int) -> None:
        for _ in range(ops):
            v = read(name)
            time.sleep(0.001)
            write(name, v + 1)

    config: DBOSConfig = {
        "name": "atomix-peer",
        "log_level": "ERROR",
        "system_database_url": f"sqlite:///{root / 'dbos.db'}",
    }
    DBOS(config=config)
    DBOS.launch()
    return t10, agent


def langgraph_system(root: Path) -> tuple[Callable[[str, str], Any], Callable[[str, int], Any]]:
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.func import entrypoint, task
    from langgraph.types import RetryPolicy

    saver = SqliteSaver(sqlite3.connect(root / "lg.db", check_same_thread=False))
    policy = RetryPolicy(
        initial_interval=0.001, backoff_factor=1.0, max_attempts=4, jitter=False, retry_on=Exception
    )
    call: Any = task(retry_policy=policy)(_t10_call)  # type: ignore[arg-type]
    read, write = task(_read), task(_write)

    @entrypoint(checkpointer=saver)
    def t10_entry(inp: dict[str, str]) -> None:
        for step in range(len(ir.PLAN)):
            call(inp["run"], step, inp["draw"]).result()

    @entrypoint(checkpointer=saver)
    def agent_entry(inp: dict[str, Any]) -> None:
        for _ in range(inp["ops"]):
            v = read(inp["name"]).result()
            time.sleep(0.001)
            write(inp["name"], v + 1).result()

    def t10(run: str, draw: str) -> None:
        t10_entry.invoke({"run": run, "draw": draw}, {"configurable": {"thread_id": run}}, durability="sync")

    def agent(name: str, ops: int) -> None:
        tid = f"{name}-{threading.get_ident()}-{time.monotonic_ns()}"
        agent_entry.invoke(
            {"name": name, "ops": ops}, {"configurable": {"thread_id": tid}}, durability="sync"
        )

    return t10, agent


def _table10(t10: Callable[[str, str], Any], spec: dict[str, Any], system: str) -> dict[str, int]:
    failed = runs = 0
    for fp in spec["fps"]:
        for confirm in (0, 1):  # a peer has no release gate: both settings run the same calls
            ir.ROOM["room"].injector = Injector(FaultModel(fp, p_post=0.5, seed=10))
            for i in range(spec["n"]):
                runs += 1
                try:
                    t10(f"{system}-{fp}-{confirm}-{i}", f"{fp}/{confirm}/{i}")
                except Exception:  # the peer gave up on the run after its retries
                    failed += 1
    return {"runs": runs, "failed": failed}


def _table9(agent: Callable[[str, int], Any], root: Path, spec: dict[str, Any]) -> dict[str, list[bool]]:
    out: dict[str, list[bool]] = {}
    for agents in spec["agents"]:
        out[str(agents)] = []
        for r in range(spec["t9_runs"]):
            STORE["s"] = SqliteStore(root / f"t9-{agents}-{r}.db")
            threads = [threading.Thread(target=agent, args=("c", 50)) for _ in range(agents)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            out[str(agents)].append(STORE["s"].state().get("c") == agents * 50)
    return out


def main(system: str, spec: dict[str, Any]) -> None:
    root = Path(spec["root"])
    ir.ROOM["room"] = ir.Mailroom(root / "files", SmtpClient(spec["port"]), Injector(FaultModel(0.0)))
    t10, agent = (dbos_system if system == "dbos" else langgraph_system)(root)
    result = {"t10": _table10(t10, spec, system), "t9": _table9(agent, root, spec)}
    print(json.dumps(result), flush=True)
    os._exit(0)  # DBOS's shutdown joins background threads for about a second; nothing is pending


if __name__ == "__main__":
    main(sys.argv[1], json.loads(sys.argv[2]))
