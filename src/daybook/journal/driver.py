"""Drivers of an effect's lifecycle: they carry out the operations the state machine asks for.

The machine (`lifecycle.py`) never touches the tool; a driver calls it (with a timeout, in strict
mode's step scope), puts the resolver's questions to the counterparty and sleeps between rounds,
then sends back `("ok", value)` or `("err", exception)`. One driver is synchronous, one async.
"""

from __future__ import annotations

import asyncio
import inspect
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
                    reply = ("ok", ask(op, tool, key, args, arg))
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
    answer: Any = ask(op, tool, key, args, arg)
    if inspect.isawaitable(answer):
        answer = await answer
    return answer


def call_with_timeout(fn: Callable[[], Any], timeout: float) -> Any:
    if not timeout:
        return fn()
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["ok"] = fn()
        except BaseException as exc:
            box["err"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise TimeoutError(f"no answer within {timeout:g}s")
    if "err" in box:
        raise box["err"]
    return box["ok"]


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
