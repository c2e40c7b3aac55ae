"""An agent process for the Atomix transaction tests: a transaction over files and a bank, killed
with SIGKILL at a chosen protocol point; and read-then-write counter increments for contention.

    tx_child.py DB start RUN_ID ROOT BANK FAIL_FIRST [--kill-before KIND:N | --kill-after KIND:N]
                                                   [--kill-tx before|after:METHOD:N]
    tx_child.py DB spec RUN_ID ROOT BANK [kill flags as for start]
    tx_child.py DB resume RUN_ID
    tx_child.py DB cancel RUN_ID [--kill-tx ...]
    tx_child.py DB count RUN_ID ROOT NAME TIMES MODE [--ready-go] [--as-worker]    MODE: tx | plain | hold

KIND:N is the N-th journal row of that kind written through `store.append`; METHOD:N the N-th
call of the store's `tx_begin` or `tx_mark` (the rows that change a transaction's header).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from agents import book_leg, status
from crashpoint import kill_at_call, kill_at_journal_write, ready_then_go, report, take

import daybook
from daybook.demo.agent import http_json


@daybook.tool(bufferable=True, idempotent=True, irreversible=False, scopes="fs:{root}/{name}")
def put_file(*, root: str, name: str, content: str, idempotency_key: str) -> str:
    """Write a whole file atomically (a temp file renamed over it); the same call twice is one."""
    tmp = Path(root, f".{name}.{os.getpid()}.tmp")
    tmp.write_text(content)
    os.replace(tmp, Path(root, name))
    return name


@daybook.tool(irreversible=True, reconcile=status, scopes="api:bank:payments")
def notify_payment(*, bank: str, n: int, idempotency_key: str) -> Any:
    """An irreversible act the bank can be asked about by key: released once, at commit."""
    return http_json("POST", f"{bank}/payments", {"n": n}, idempotency_key)


@daybook.workflow(name="tx_crash")
def crash_flow(ctx: daybook.Context, root: str, bank: str, fail_first: bool) -> dict[str, Any]:
    scopes = [f"fs:{root}/**", "api:bank:**"]
    with ctx.transaction(scopes=scopes, retries=2) as tx:
        ctx.effect(put_file, root=root, name="a.txt", content="A")
        leg = ctx.effect(book_leg, bank=bank, n=1, fail_inverse_of=-1)
        ctx.effect(put_file, root=root, name="b.txt", content="B")
        ctx.effect(notify_payment, bank=bank, n=99)
        if fail_first and tx.attempt == 1:
            raise RuntimeError("fault injected at the tool boundary")
    return {"attempt": tx.attempt, "leg": leg["id"], "epoch": tx.epoch}


PRICES = {"x": 300, "y": 250, "z": 280}


def _plan(name: str, root: str, bank: str) -> Any:
    def branch(ctx: daybook.Context) -> dict[str, Any]:
        ctx.effect(put_file, root=root, name=f"{name}.txt", content=name)
        ctx.effect(book_leg, bank=bank, n=PRICES[name], fail_inverse_of=-1)
        ctx.effect(notify_payment, bank=bank, n=-PRICES[name])
        return {"price": PRICES[name]}

    return branch


@daybook.workflow(name="tx_spec")
def spec_flow(ctx: daybook.Context, root: str, bank: str) -> Any:
    """Three branches each stage a file, book a leg now and hold a notice; the cheapest wins."""
    return ctx.speculate(
        {n: _plan(n, root, bank) for n in PRICES},
        choose=lambda results: min(results, key=lambda k: results[k]["price"]),
        scopes=[f"fs:{root}/**", "api:bank:**"],
    )


def _read(root: str, name: str) -> int:
    p = Path(root, name)
    return int(p.read_text()) if p.exists() else 0


@daybook.workflow(name="tx_count")
def count_flow(ctx: daybook.Context, root: str, name: str, times: int, mode: str) -> int:
    """`times` read-then-write increments of the counter file `name`, each in a transaction
    (mode `tx`) or not (mode `plain`: updates can be lost); `hold` keeps one transaction open
    until the file `name + ".go"` appears (to show disjoint scopes run in parallel)."""
    for _ in range(times):
        if mode == "plain":
            n = ctx.decide("read", _read, root, name).value
            time.sleep(0.01)
            ctx.effect(put_file, root=root, name=name, content=str(n + 1))
            continue
        with ctx.transaction(scopes=[f"fs:{root}/{name}"]):
            n = ctx.decide("read", _read, root, name).value
            time.sleep(0.01)  # widen the read-to-write window: isolation must hold anyway
            if mode == "hold":
                ctx.decide("wait", _wait_for, str(Path(root, name + ".go")))
            ctx.effect(put_file, root=root, name=name, content=str(n + 1))
    return _read(root, name)


def _wait_for(where: str) -> bool:
    path = Path(where)
    deadline = time.monotonic() + 60
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(0.02)
    return True


@daybook.workflow(name="tx_dead_waiter")
def dead_waiter(ctx: daybook.Context, root: str, nap: float) -> int:
    """Sleep (suspended: no slot held), then a read-then-write increment of `acct` in a
    transaction: a lost update would show at the file."""
    if nap:
        ctx.sleep(nap)
    with ctx.transaction(scopes=[f"fs:{root}/acct"]):
        n = ctx.decide("read", _read, root, "acct").value
        ctx.effect(put_file, root=root, name="acct", content=str(n + 1))
    return n + 1


@daybook.workflow(name="tx_dead_holder")
def dead_holder(ctx: daybook.Context, root: str) -> int:
    """The same increment, holding the transaction open until the file `hold.go` appears."""
    with ctx.transaction(scopes=[f"fs:{root}/acct"]):
        n = ctx.decide("read", _read, root, "acct").value
        ctx.decide("hold", _wait_for, str(Path(root, "hold.go")))
        ctx.effect(put_file, root=root, name="acct", content=str(n + 1))
    return n + 1


def _kill_tx(book: daybook.Daybook, argv: list[str]) -> None:
    spec = take(argv, "--kill-tx")
    if spec is None:
        return
    when, method, n = spec.split(":")
    real = getattr(book.store, method)
    setattr(book.store, method, kill_at_call(real, int(n), before=when == "before"))


def main() -> None:
    db, action, run_id = sys.argv[1:4]
    rest = sys.argv[4:]
    # The counters' runs wait for each other in the process (a loaded machine may take longer
    # than the default spin before a frontier wait suspends the run).
    book = daybook.Daybook(db, lease_ttl=2.0, inline_wait=120.0 if action == "count" else 2.0)
    if "--as-worker" in rest:  # a worker's handle: a frontier wait suspends (at once past a dead owner)
        rest.remove("--as-worker")
        book.frontier_spin = book.inline_wait
    kill_at_journal_write(book, rest)
    _kill_tx(book, rest)
    if action == "start":
        root, bank, fail_first = rest[0], rest[1], rest[2] == "1"
        report(lambda: book.run(crash_flow, root, bank, fail_first, run_id=run_id))
    elif action == "spec":
        report(lambda: book.run(spec_flow, rest[0], rest[1], run_id=run_id))
    elif action == "count":
        ready_then_go(rest)
        root, name, times, mode = rest[0], rest[1], int(rest[2]), rest[3]
        report(lambda: book.run(count_flow, root, name, times, mode, run_id=run_id))
    elif action == "cancel":
        report(lambda: book.cancel(run_id, by="test") and None)
    else:
        report(lambda: book.resume(run_id, wait=10))
    print(json.dumps({"done": True}))


if __name__ == "__main__":
    main()
