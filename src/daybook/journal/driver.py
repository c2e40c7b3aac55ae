"""Drivers of an effect's lifecycle: they carry out the operations the state machine asks for.

The machine (`lifecycle.py`) never touches the tool; a driver calls it (with a timeout, in strict
mode's step scope), puts the resolver's questions to the counterparty and sleeps between rounds,
then sends back `("ok", value)` or `("err", exception)`. One driver is synchronous, one async.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import queue
import threading
from collections.abc import Callable, Generator
from typing import Any, TypeVar

from . import strict
from .execution import Execution
from .lifecycle import Op, Reply
from .tool import Tool

T = TypeVar("T")


def drive(
    exe: Execution, machine: Generator[Op, Reply, Any], tool: Tool[Any], key: str, args: dict[str, Any]
) -> Any:
    """Run the machine to its end in this thread; returns the effect's result."""
    reply: Reply = None
    while True:
        try:
            op, arg = machine.send(reply)
        except StopIteration as done:
            return done.value
        reply = None
        if op == "sleep":
            exe.sleep(arg)
            continue
        try:
            with strict.step():
                if op == "call":
                    reply = ("ok", call_with_timeout(lambda: tool.fn(**args, idempotency_key=key), arg))
                else:
                    question = functools.partial(ask, op, tool, key, args, arg)
                    reply = ("ok", call_with_timeout(question, tool.retry.query_timeout or 0.0))
        except Exception as exc:
            reply = ("err", exc)


async def drive_async(
    exe: Execution, machine: Generator[Op, Reply, Any], tool: Tool[Any], key: str, args: dict[str, Any]
) -> Any:
    """Run the machine to its end on the event loop; returns the effect's result."""
    reply: Reply = None
    while True:
        try:
            op, arg = machine.send(reply)
        except StopIteration as done:
            return done.value
        reply = None
        if op == "sleep":
            if not exe.read_only:
                await asyncio.sleep(arg)
            continue
        try:
            with strict.step():
                result = await _call_async(op, arg, tool, key, args)
            reply = ("ok", result)
        except Exception as exc:
            reply = ("err", exc)


async def _call_async(op: str, arg: Any, tool: Tool[Any], key: str, args: dict[str, Any]) -> Any:
    # `arg` is the call's timeout for "call", the stored reference for the resolver's questions.
    if op == "call":
        pending = tool.fn(**args, idempotency_key=key)
        return await (asyncio.wait_for(pending, arg) if arg else pending)
    limit = tool.retry.query_timeout or 0.0
    answer: Any = call_with_timeout(functools.partial(ask, op, tool, key, args, arg), limit)
    if inspect.isawaitable(answer):
        answer = await (asyncio.wait_for(answer, limit) if limit else answer)
    return answer


def call_with_timeout(fn: Callable[[], Any], timeout: float) -> Any:
    """`fn()`, or `TimeoutError` once `timeout` seconds pass without an answer (0: no limit, and
    `fn` runs in this thread). It runs on a reused helper thread, in a copy of this context; a
    call that timed out keeps its thread until it returns, and nothing waits for it."""
    if not timeout:
        return fn()
    context = contextvars.copy_context()
    done = threading.Event()
    box: dict[str, Any] = {}
    _HANDS.give((lambda: context.run(fn), done, box))
    if not done.wait(timeout):
        raise TimeoutError(f"no answer within {timeout:g}s")
    if "err" in box:
        raise box["err"]
    return box["ok"]


Job = tuple[Callable[[], Any], threading.Event, dict[str, Any]]


class _Hands:
    """Daemon threads for calls under a timeout, kept for reuse (starting a thread per call
    costs more than a journal write); one idle for a minute ends."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[queue.SimpleQueue[Job]] = []

    def give(self, job: Job) -> None:
        with self._lock:
            jobs = self._idle.pop() if self._idle else None
        if jobs is None:
            jobs = queue.SimpleQueue()
            threading.Thread(target=self._serve, args=(jobs,), name="daybook-call", daemon=True).start()
        jobs.put(job)

    def _serve(self, jobs: queue.SimpleQueue[Job]) -> None:
        while True:
            try:
                fn, done, box = jobs.get(timeout=60.0)
            except queue.Empty:
                with self._lock:
                    if jobs in self._idle:
                        self._idle.remove(jobs)
                        return
                continue  # a job was handed over just now
            try:
                box["ok"] = fn()
            except BaseException as exc:
                box["err"] = exc
            done.set()
            with self._lock:
                self._idle.append(jobs)


_HANDS = _Hands()


def ask(op: str, tool: Tool[Any], key: str, args: dict[str, Any], ref: Any) -> Any:
    """Put the resolver's question to the counterparty: by key, by looking, or by its reference."""
    if op == "status":
        assert tool.reconcile is not None
        return tool.reconcile(key, args)
    if op == "verify":
        assert tool.verify is not None
        return tool.verify(args)
    assert tool.lookup is not None
    return tool.lookup(ref)


async def ready(value: T) -> T:
    return value
