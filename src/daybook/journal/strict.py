"""Strict mode: refuse the usual sources of non-determinism inside a workflow body.

A workflow body must get time, randomness and ids from `ctx` (`ctx.now()`, `ctx.random()`,
`ctx.uuid()`, `ctx.sleep()`) or from recorded steps, or replay goes its own way. With
`Daybook(strict=True)`, calling `time.sleep`, `random.random` (and friends) or `uuid.uuid4`
directly in a body raises `NonDeterminismError` naming what to use instead. Code inside a step
(a `ctx.decide` function, a tool, a reconcile hook) may call them freely: its result is recorded.
`time.time` is not guarded, because libraries call it internally; use `ctx.now()`.
"""

from __future__ import annotations

import contextlib
import functools
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextvars import ContextVar, Token
from typing import Any

from ..errors import NonDeterminismError

# The run whose workflow body is executing in this context (None: not in a body, or in a step).
BODY: ContextVar[str | None] = ContextVar("daybook_body", default=None)

_GUARDED: list[tuple[Any, str, str]] = [
    (time, "sleep", "ctx.sleep(seconds)"),
    (random, "random", "ctx.random()"),
    (random, "randint", "ctx.decide(name, random.randint, a, b)"),
    (random, "choice", "ctx.decide(name, random.choice, options)"),
    (random, "uniform", "ctx.decide(name, random.uniform, a, b)"),
    (random, "shuffle", "a recorded step that returns the shuffled list"),
    (uuid, "uuid4", "ctx.uuid()"),
]
_installed = False
_lock = threading.Lock()


def install() -> None:
    """Wrap the guarded functions once per process (a no-op outside strict workflow bodies)."""
    global _installed
    with _lock:
        if _installed:
            return
        for module, name, instead in _GUARDED:
            setattr(module, name, _guard(getattr(module, name), f"{module.__name__}.{name}", instead))
        _installed = True


def _guard(fn: Callable[..., Any], label: str, instead: str) -> Callable[..., Any]:
    @functools.wraps(fn)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        run_id = BODY.get()
        if run_id is not None:
            raise NonDeterminismError(
                f"run {run_id!r}: {label}() called in the workflow body (strict mode); its value "
                f"would differ on replay. Use {instead} instead"
            )
        return fn(*args, **kwargs)

    return guarded


@contextlib.contextmanager
def body(run_id: str | None) -> Iterator[None]:
    """Mark the workflow body of `run_id` (None: leave strictness off)."""
    token = BODY.set(run_id)
    try:
        yield
    finally:
        BODY.reset(token)


@contextlib.contextmanager
def step() -> Iterator[None]:
    """Inside a step the guarded functions are allowed: the step's result is recorded."""
    token = BODY.set(None)
    try:
        yield
    finally:
        BODY.reset(token)


# `step()` without a context manager (an effect's hot path): `enter_step()` gives the mark
# to hand to `leave_step`. The ContextVar's own methods, bound: no Python frame per call.
enter_step: Callable[[], Token[str | None]] = functools.partial(BODY.set, None)
leave_step: Callable[[Token[str | None]], None] = BODY.reset
