"""What the code now running belongs to: the run's `ctx` (set by the runtime while a workflow
body runs, sync or async), the key of the act daybook is executing (set by the effect drivers
around a tool's call) and the decision whose function runs (what a stream's chunks belong to,
`journal.stream`). Three ContextVars, owned here and nowhere else; `daybook.current()` and
`daybook.idempotency_key()` read them, so integrations need none of their own.

A ContextVar follows the code into the tasks a body starts and into the threads daybook calls a
tool on (`timeout.call_with_timeout` copies the context); a thread the body starts by hand does
not inherit it (use `contextvars.copy_context().run`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar, Token
from typing import Any, TypeVar

T = TypeVar("T")

# Typed as `object`: this layer cannot name `Context` (it is built above the journal).
_CTX: ContextVar[object | None] = ContextVar("daybook_current_context", default=None)
_KEY: ContextVar[str | None] = ContextVar("daybook_current_key", default=None)
# The decision whose function is running (its id): what a stream's chunks written there belong to.
_DECIDING: ContextVar[str | None] = ContextVar("daybook_current_decision", default=None)


@contextlib.contextmanager
def running(ctx: object) -> Iterator[None]:
    """While the block runs (a workflow body), `ctx` is the current run's context."""
    token = _CTX.set(ctx)
    try:
        yield
    finally:
        _CTX.reset(token)


@contextlib.contextmanager
def acting(key: str) -> Iterator[None]:
    """While the block runs (a tool's call), `key` is the idempotency key of the act."""
    token = _KEY.set(key)
    try:
        yield
    finally:
        _KEY.reset(token)


# `acting(key)` without a context manager (an effect's hot path): `enter_act(key)` gives the
# mark to hand to `leave_act`. The ContextVar's own methods, bound: no Python frame per call.
enter_act: Callable[[str | None], Token[str | None]] = _KEY.set
leave_act: Callable[[Token[str | None]], None] = _KEY.reset


def context() -> object | None:
    """The current run's context, or None outside a workflow body."""
    return _CTX.get()


def key() -> str | None:
    """The key of the act being executed, or None outside a tool's call."""
    return _KEY.get()


def deciding(decision_id: str, fn: Callable[[], T]) -> Callable[[], T]:
    """`fn`, run as the function of decision `decision_id` (`act()` names it while it runs)."""

    def call() -> T:
        token = _DECIDING.set(decision_id)
        try:
            return fn()
        finally:
            _DECIDING.reset(token)

    return call


def deciding_async(decision_id: str, fn: Callable[[], Awaitable[T]]) -> Callable[[], Awaitable[T]]:
    """`deciding` for an `async def` decision function."""

    async def call() -> Any:
        token = _DECIDING.set(decision_id)
        try:
            return await fn()
        finally:
            _DECIDING.reset(token)

    return call


def act() -> str | None:
    """The act whose code is running: a decision's id while its function runs, else the key of
    the tool call being executed; None in the workflow body itself."""
    return _DECIDING.get() or _KEY.get()
