"""The scripted-agent harness: a task is a fixed list of calls with a ground-truth end state;
a `World` is one run's view of a resource with the fault injector at its tool boundary; the
Tx-Full policy runs the task as a daybook workflow (one `ctx.transaction` per step), whose tools
find their world through the `WORLDS` registry (workflow arguments must be JSON)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from faults import InjectedFault, Injector, LostReply
from resources import MISSING, Op, Store, expected

import daybook


@dataclass(frozen=True)
class Task:
    """A scripted agent's task: its calls, in order, and the state they must leave."""

    id: str
    ops: tuple[Op, ...]

    @property
    def truth(self) -> dict[str, int]:
        return expected(list(self.ops))

    def prefixes(self) -> list[dict[str, int]]:
        """Every clean state the task can stop in (first k calls applied once each)."""
        return [expected(list(self.ops[:k])) for k in range(len(self.ops) + 1)]


@dataclass
class Outcome:
    """What one run of one task did; `corrupt`: its end state is no clean prefix state."""

    success: bool
    faults: int
    retries: int
    recovered: int
    corrupt: bool


@dataclass
class World:
    """One run: the store it acts on, the injector, and the steps it completed."""

    run: str
    store: Store
    injector: Injector
    draw: str = ""  # the fault stream's name (task and repeat, not the mode)
    done: set[int] = field(default_factory=set)

    def call(self, step: int, op: Op, key: str | None) -> Any:
        """The tool boundary: a `pre` fault applies nothing, a `post` fault applies and loses
        the reply."""
        kind = self.injector.next(self.run, step, self.draw or self.run)
        if kind == "pre":
            raise InjectedFault(f"{self.run} step {step}: injected pre fault")
        result = self.store.apply(op, key)
        if kind == "post":
            raise LostReply(f"{self.run} step {step}: applied, reply lost")
        return result

    def outcome(self, task: Task, success: bool) -> Outcome:
        state = self.store.state()
        ok = success and state == task.truth
        return Outcome(
            success=ok,
            faults=self.injector.run_faults(self.run),
            retries=self.injector.run_retries(self.run),
            recovered=self.injector.recovered(self.run, self.done),
            corrupt=state not in task.prefixes(),
        )


WORLDS: dict[str, World] = {}
_LOCK = threading.Lock()


def register(world: World) -> str:
    with _LOCK:
        WORLDS[world.run] = world
    return world.run


def _status(key: str, args: dict[str, Any]) -> Any:
    got = WORLDS[args["world"]].store.status(key)
    return daybook.Absent() if got is MISSING else daybook.Confirmed(got)


@daybook.tool(idempotent=True, irreversible=False)
def atx_undo(*, original: dict[str, Any], result: Any, idempotency_key: str) -> None:
    """The inverse: put the before-image back (inverses are not fault-injected)."""
    WORLDS[original["world"]].store.undo(original["name"], result)


@daybook.tool(
    inverse=atx_undo,
    status=_status,
    certain=(InjectedFault,),
    # One attempt per transaction attempt: a fault aborts the transaction, which retries the
    # step under a fresh epoch (the paper's mechanism), rather than the effect retrying itself.
    retry=daybook.Retry(max_attempts=1, backoff=0.001, reconcile_rounds=3),
    scopes="res:{world}:{name}",
)
def atx_call(
    *, world: str, step: int, verb: str, name: str, value: int, api: str, idempotency_key: str
) -> Any:
    return WORLDS[world].call(step, Op(verb, name, value, api), idempotency_key)


@daybook.workflow(name="atomix_task")
def atx_task(ctx: daybook.Context, world: str, ops: list[dict[str, Any]], retries: int) -> int:
    """Tx-Full: each call is a transaction over its resource, retried `retries` times."""
    for step, op in enumerate(ops):
        with ctx.transaction(scopes=[f"res:{world}:{op['name']}"], retries=retries):
            ctx.effect(atx_call, world=world, step=step, **op)
        WORLDS[world].done.add(step)  # harness bookkeeping; a replay adds the same steps again
    return len(ops)


def run_tx_full(book: daybook.Daybook, world: World, task: Task, retries: int) -> Outcome:
    register(world)
    ops = [op.as_args() for op in task.ops]
    try:
        book.run(atx_task, world.run, ops, retries, run_id=world.run)
        ok = True
    except daybook.RunFailed:
        ok = False
    return world.outcome(task, ok)
