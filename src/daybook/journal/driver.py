"""Drivers of an effect's lifecycle: they carry out the operations the state machine asks for.

The machine (`lifecycle.py`) never touches the tool; a driver calls it (with a timeout, in strict
mode's step scope), puts the resolver's questions to the counterparty and sleeps between rounds,
then sends back `("ok", value)` or `("err", exception)`. One driver is synchronous, one async.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import time
from collections.abc import Generator
from typing import Any, TypeVar

from . import current, strict
from .execution import Execution
from .lifecycle import Op, Reply
from .timeout import call_with_timeout
from .tool import Tool

T = TypeVar("T")

log = logging.getLogger("daybook")


@contextlib.contextmanager
def cancellable(exe: Execution, tool: Tool[Any], key: str, args: dict[str, Any]) -> Any:
    """While a call of a tool that declares `cancel` runs, a retraction naming it (its tool
    name, its key, or the decision the key names) asks it to stop, once (S11). The heartbeat
    thread does the asking; what the call then returns or raises settles the step."""
    beat = exe.heartbeat
    if tool.cancel is None or beat is None or exe.read_only:
        yield
        return
    cancel = tool.cancel

    def hook(retracts: list[tuple[int, str, str]]) -> None:
        used = {inbox_id for inbox_id, _ in exe.retracted.values()} | exe.consumed
        for inbox_id, target, who in retracts:
            named = target in (tool.name, key) or key.startswith(target + "/")
            if named and key not in exe.retracted and inbox_id not in used:
                exe.retracted[key] = (inbox_id, who)
                try:
                    cancel(**args, idempotency_key=key)
                except Exception:  # the call goes on; its outcome is journaled as usual
                    log.exception("daybook: cancel of %s (key %s) raised", tool.name, key)
                return

    beat.in_flight = hook
    try:
        yield
    finally:
        beat.in_flight = None


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
            exe.settings.sleep(arg)
            continue
        if op == "call" and not arg and (tool.cancel is None or exe.heartbeat is None):
            reply = call_inline(exe, tool, key, args)
            continue
        try:
            with strict.step():
                if op == "call":
                    with cancellable(exe, tool, key, args), current.acting(key):
                        reply = ("ok", call_with_timeout(lambda: tool.fn(**args, idempotency_key=key), arg))
                else:
                    question = functools.partial(ask, op, tool, key, args, arg)
                    reply = ("ok", call_with_timeout(question, tool.retry.query_timeout or 0.0))
        except Exception as exc:
            reply = ("err", exc)


def inline(exe: Execution, tool: Tool[Any]) -> bool:
    """Whether a call of `tool` needs no driver: synchronous, no timeout (no helper thread) and
    nothing to cancel it while it runs (`cancellable`)."""
    return not tool.is_async and not tool.retry.timeout and (tool.cancel is None or exe.heartbeat is None)


def call_inline(exe: Execution, tool: Tool[Any], key: str, args: dict[str, Any]) -> tuple[str, Any]:
    """The hot path of a call: no timeout and nothing to cancel it, so the tool runs right
    here, in a step's scope (`strict.step`) under its key (`current.acting`), with no context
    manager objects built (they cost more than the rest of the call's bookkeeping). The lease
    heartbeat, if any, knows it runs, and logs it if it hangs (`Heartbeat.calling`)."""
    beat = exe.heartbeat
    if beat is not None:
        beat.calling = (tool.name, exe.run_id, key, time.monotonic())
    marks = strict.enter_step(), current.enter_act(key)
    try:
        return ("ok", tool.fn(**args, idempotency_key=key))
    except Exception as exc:
        return ("err", exc)
    finally:
        current.leave_act(marks[1])
        strict.leave_step(marks[0])
        if beat is not None:
            beat.calling = None


async def drive_async(
    exe: Execution, machine: Generator[Op, Reply, Any], tool: Tool[Any], key: str, args: dict[str, Any]
) -> Any:
    """Run the machine to its end on the event loop; returns the effect's result."""
    import asyncio  # loaded already: this runs on an event loop

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
            stoppable = cancellable(exe, tool, key, args) if op == "call" else contextlib.nullcontext()
            with strict.step(), stoppable:
                result = await _call_async(op, arg, tool, key, args)
            reply = ("ok", result)
        except Exception as exc:
            reply = ("err", exc)


async def _call_async(op: str, arg: Any, tool: Tool[Any], key: str, args: dict[str, Any]) -> Any:
    # `arg` is the call's timeout for "call", the stored reference for the resolver's questions.
    import asyncio  # loaded already: this runs on an event loop

    if op == "call":
        with current.acting(key):
            pending = tool.fn(**args, idempotency_key=key)
            return await (asyncio.wait_for(pending, arg) if arg else pending)
    limit = tool.retry.query_timeout or 0.0
    answer: Any = call_with_timeout(functools.partial(ask, op, tool, key, args, arg), limit)
    if inspect.isawaitable(answer):
        answer = await (asyncio.wait_for(answer, limit) if limit else answer)
    return answer


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
