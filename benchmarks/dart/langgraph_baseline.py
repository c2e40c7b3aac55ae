"""LangGraph as the external baseline (T2, T14, T16, T17): the same scripted ops as a StateGraph,
one node per subtask block, checkpointed by LangGraph's SqliteSaver; restored through
`get_state_history` and resumed from the chosen checkpoint's config.

Two restores: `semireal` goes back to the checkpoint before the node where the failed subtask
began (subtask-level rollback with no consumer check: what the paper's LangGraph-SemiReal does),
`resume` to the latest checkpoint (LangGraph's own resume of the failed node). Nodes call the
counterparties directly (no journal): a re-executed node acts again, and an invitation is sent
through smtplib, once per execution. The audit is the one DART's rows get.
"""

from __future__ import annotations

import json
import operator
import smtplib
import sqlite3
import time
from collections.abc import Callable
from email.message import EmailMessage
from typing import Annotated, Any, TypedDict

import agent
import dart_resources as rs
from audit import audit, snapshot
from cases import Case
from dart_harness import MODEL_S, Row
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    return {**a, **b}


class State(TypedDict):
    env: Annotated[dict[str, Any], _merge]
    ran: Annotated[list[str], operator.add]  # nodes executed, in order (for replay counts)


def _val(a: Any, env: dict[str, Any]) -> Any:
    return env[a[1:]] if isinstance(a, str) and a.startswith("$") else a


def _node(case: Case, idx: int, res: dict[str, str], run: str) -> Any:
    block = case.blocks[idx]

    def body(state: State) -> dict[str, Any]:
        env = dict(state["env"])
        for n, op in enumerate(block["ops"]):
            _play(op, env, res, run, f"lg/{run}/b{idx}/{n}")
        return {"env": env, "ran": [f"b{idx}"]}

    return body


ACTS: dict[str, Callable[..., str]] = {"record": agent._record, "confirm": agent._confirm, "act": agent._act}


def _play(op: dict[str, Any], env: dict[str, Any], res: dict[str, str], run: str, key: str) -> None:
    args = [_val(a, env) for a in op.get("args", [])]
    if op["op"] == "decide":
        env[op["out"]] = agent.DECIDERS[op["fn"]](res, run, *args)
    elif op["op"] == "effect":
        kw = {k: _val(v, env) for k, v in op["kw"].items()}
        fn = ACTS[op["tool"]]
        env[op.get("out", "_")] = fn(res=res, run=run, idempotency_key=key, **kw)
    elif op["op"] == "mail":
        agent.THINK.pause()
        msg = EmailMessage()
        msg["From"], msg["To"], msg["Subject"] = agent.SENDER, op["to"], op["subject"]
        msg.set_content(f"run={run}; " + json.dumps(args))
        with smtplib.SMTP(res["smtp_host"], int(res["smtp_port"])) as smtp:
            smtp.send_message(msg)


def build(case: Case, res: dict[str, str], run: str, db: str) -> Any:
    g = StateGraph(State)
    names = [f"b{i}" for i in range(len(case.blocks))]
    for i, name in enumerate(names):
        g.add_node(name, _node(case, i, res, run))
    for a, b in zip([START, *names], [*names, END], strict=True):
        g.add_edge(a, b)
    return g.compile(checkpointer=SqliteSaver(sqlite3.connect(db, check_same_thread=False)))


def _first_node(case: Case) -> str:
    skel, entity, _ = case.failed.split("::")
    return f"b{next(i for i, b in enumerate(case.blocks) if b['skel'] == skel and b['entity'] == entity)}"


def measure(case: Case, cp: rs.Counterparty, restore: str, repeat: int, think: float, db: str) -> Row:
    run = f"lg.{case.cid}.r{repeat}.{restore}"
    graph = build(case, cp.res, run, db)
    config = {"configurable": {"thread_id": run}}
    rs.arm(cp.res["db"], run, case.site, case.drift)
    agent.THINK.reset(0.0, 0)
    try:
        graph.invoke({"env": {}, "ran": []}, config)
        raise AssertionError(f"{run}: the injected failure did not fail the graph")
    except Exception as exc:
        if isinstance(exc, AssertionError):
            raise
    before = snapshot(cp.res["db"], run)
    history = list(graph.get_state_history(config))  # newest first
    target = _first_node(case) if restore == "semireal" else None
    chosen = next(h for h in history if h.next and (target is None or h.next[0] == target))
    done_before = list(chosen.values.get("ran", []))
    row = Row(
        case.domain,
        case.cid,
        case.regime,
        case.kind,
        repeat,
        f"lg-{restore}",
        action="restore",
        checkpoint=chosen.next[0],
    )
    agent.THINK.reset(think, repeat)
    start = time.perf_counter()
    result = None
    try:
        final = graph.invoke(None, chosen.config)
        result = {k: v for k, v in final["env"].items() if k != "_"}
        rerun = final["ran"][len(done_before) :]
        row.dropped = [n for n in rerun if n in _committed_before(case, history)]
    except Exception as exc:
        row.error = type(exc).__name__
    row.fm_ms = (time.perf_counter() - start) * 1000
    row.live = row.replayed = agent.THINK.live
    row.model_ms = row.live * MODEL_S * 1000
    row.recobs = True
    found = audit(case, run, result, cp, before)
    row.audit = found.__dict__
    row.safe = found.safe(True, case.domain in ("etl", "travel"))
    row.status = "ok" if row.safe else ("contract" if result is not None else "no-recov")
    return row


def _committed_before(case: Case, history: list[Any]) -> set[str]:
    """Consumer nodes (those that read the failed subtask's output) that had finished before the failure."""
    ran = set(history[0].values.get("ran", []))
    return {
        f"b{i}" for i, b in enumerate(case.blocks) if case.producer in b.get("reads", []) and f"b{i}" in ran
    }
