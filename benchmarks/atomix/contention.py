"""Multi-agent contention (Table 9): agents are threads, each a daybook run (Tx-Full) or a
plain loop (the baselines), doing 50 operations on shared rows of SQLite or PostgreSQL with the
read and the write as separate tool calls and a 1 ms pause between them (so that threads on
2 cores really interleave). Scenarios: disjoint counters, one shared counter, a read-write
transfer between two rows, and a write-write record (two rows both agents overwrite with the
next version number). Also a per-resource-lock baseline."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from resources import Op, PgStore, Store

import daybook

RESOURCES: dict[str, Store] = {}  # found by the daybook tools (workflow arguments are JSON)
PAUSE = 0.001


def _read(store: Store, name: str) -> int:
    return int(store.apply(Op("read", name), None) or 0)


@daybook.tool(idempotent=True, irreversible=False, scopes="ctr:{res}:{name}")
def ctr_read(*, res: str, name: str, idempotency_key: str) -> int:
    return _read(RESOURCES[res], name)


@daybook.tool(idempotent=True, irreversible=False, scopes="ctr:{res}:{name}")
def ctr_write(*, res: str, name: str, value: int, idempotency_key: str) -> None:
    RESOURCES[res].apply(Op("set", name, value), idempotency_key)


def plan(scenario: str, agent: int) -> tuple[list[str], str]:
    """The rows one agent's operations touch, and what each operation does to them."""
    if scenario == "disjoint":
        return [f"c{agent}"], "incr"
    if scenario == "shared":
        return ["c"], "incr"
    if scenario == "rw":  # agent 0 moves 1 from a to b, agent 1 from b to a
        return (["a", "b"] if agent == 0 else ["b", "a"]), "transfer"
    return ["x", "y"], "pair"


def op_with(
    read: Callable[[str], int], write: Callable[[str, int], None], names: list[str], kind: str, tag: int
) -> None:
    """One operation, whoever performs the calls (daybook effects or direct calls)."""
    if kind == "incr":
        v = read(names[0])
        time.sleep(PAUSE)
        write(names[0], v + 1)
    elif kind == "transfer":
        src, dst = read(names[0]), read(names[1])
        time.sleep(PAUSE)
        write(names[0], src - 1)
        write(names[1], dst + 1)
    else:  # a two-row record both agents overwrite with the next version, read from x
        v = read(names[0])
        time.sleep(PAUSE)
        write(names[0], v + 1)
        write(names[1], v + 1)


@daybook.workflow(name="atomix_agent")
def agent_run(ctx: daybook.Context, res: str, scenario: str, agent: int, ops: int) -> int:
    names, kind = plan(scenario, agent)
    scopes = [f"ctr:{res}:{n}" for n in sorted(names)]
    for i in range(ops):
        with ctx.transaction(scopes=scopes, retries=3):
            op_with(
                lambda n: int(ctx.effect(ctr_read, res=res, name=n)),
                lambda n, v: ctx.effect(ctr_write, res=res, name=n, value=v),
                names,
                kind,
                agent * 1000 + i,
            )
    return ops


_LOCKS: dict[tuple[str, str], threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def _locks(res: str, names: list[str]) -> list[threading.Lock]:
    with _LOCKS_GUARD:
        return [_LOCKS.setdefault((res, n), threading.Lock()) for n in sorted(names)]


def baseline_agent(mode: str, res: str, scenario: str, agent: int, ops: int) -> None:
    """No-Frontier / No-Tx (no faults here, so both are the bare calls; No-Frontier keeps its
    before-images) and Lock (a lock per row, taken in name order around each operation)."""
    store = RESOURCES[res]
    names, kind = plan(scenario, agent)
    undo: list[tuple[str, int]] = []

    def write(n: str, v: int) -> None:
        before = store.apply(Op("set", n, v), None)
        if mode == "No-Frontier":
            undo.append((n, before))

    for i in range(ops):
        locks = _locks(res, names) if mode == "Lock" else []
        for lock in locks:
            lock.acquire()
        try:
            op_with(lambda n: _read(store, n), write, names, kind, agent * 1000 + i)
        finally:
            for lock in reversed(locks):
                lock.release()


def correct(store: Store, scenario: str, agents: int, ops: int) -> bool:
    state = store.state()
    if scenario == "disjoint":
        return all(state.get(f"c{a}") == ops for a in range(agents))
    if scenario == "shared":
        return state.get("c") == agents * ops
    if scenario == "rw":
        return state.get("a", 0) == 0 and state.get("b", 0) == 0
    return state.get("x") == state.get("y") == agents * ops


def run_cell(
    book: daybook.Daybook | None, mode: str, store: Store, scenario: str, agents: int, ops: int
) -> bool:
    """One run: `agents` threads at once on a fresh store; True if the end state is correct."""
    res = uuid.uuid4().hex[:8]
    RESOURCES[res] = store
    threads = []
    for a in range(agents):
        if mode == "Tx-Full":
            assert book is not None
            args: tuple[Any, ...] = (agent_run, res, scenario, a, ops)
            threads.append(threading.Thread(target=book.run, args=args, kwargs={"run_id": f"{res}-{a}"}))
        else:
            threads.append(threading.Thread(target=baseline_agent, args=(mode, res, scenario, a, ops)))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ok = correct(store, scenario, agents, ops)
    del RESOURCES[res]
    if isinstance(store, PgStore):
        store.drop()  # its table and every connection the agents opened
    return ok
