"""Tools: functions that change the world, with the profile daybook needs to call them safely.

A tool is called as `fn(**args, idempotency_key=key)`; the key comes from the run, never from the
tool. The profile says whether a re-send under the same key is safe (`idempotent`), how to ask
the counterparty what happened (`reconcile`), how long the counterparty remembers keys
(`dedup_window`) and how to retry transient failures (`retry`).
"""

from __future__ import annotations

import http.client
import inspect
import socket
import urllib.error
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, overload

from .errors import ConfigError

R = TypeVar("R")


class OutcomeUnknown(Exception):
    """Raise from a tool when the request may have reached the counterparty but no answer came."""


class TransientError(Exception):
    """Raise from a tool when the request certainly did not take effect and may be retried."""


@dataclass(frozen=True)
class Confirmed:
    """The counterparty did it; `result` is what the tool would have returned."""

    result: Any


@dataclass(frozen=True)
class NotFound:
    """The counterparty never received the request: safe to send again under the same key."""


@dataclass(frozen=True)
class StillUnknown:
    """The counterparty cannot tell yet (pending, or its status endpoint is down): ask again later."""


ReconcileResult = Confirmed | NotFound | StillUnknown


@dataclass(frozen=True)
class Retry:
    """How a step is retried. `max_attempts=None` means unlimited; every attempt uses the same key."""

    max_attempts: int | None = 3
    backoff: float = 0.2
    max_backoff: float = 10.0
    multiplier: float = 2.0
    timeout: float | None = None
    reconcile_rounds: int | None = 5

    def __post_init__(self) -> None:
        if self.max_attempts is not None and self.max_attempts < 1:
            raise ConfigError(
                f"Retry(max_attempts={self.max_attempts}): use an int >= 1, or None for unlimited"
            )
        if self.backoff < 0 or self.max_backoff < 0:
            raise ConfigError("Retry backoff must be >= 0 seconds")

    def delay(self, attempt: int) -> float:
        return float(min(self.max_backoff, self.backoff * self.multiplier ** max(0, attempt - 1)))

    def allows(self, attempt: int) -> bool:
        return self.max_attempts is None or attempt <= self.max_attempts


@dataclass(frozen=True)
class Tool(Generic[R]):
    """A world-changing function and its counterparty profile. Build one with `@daybook.tool`."""

    fn: Callable[..., R]
    name: str
    idempotent: bool = False
    reconcile: Callable[[str, dict[str, Any]], ReconcileResult] | None = None
    dedup_window: float | None = None
    retry: Retry = field(default_factory=Retry)
    inverse: Tool[Any] | None = None
    irreversible: bool = False
    # The counterparty's own list of keys (for `daybook reconcile`: keys the journal never issued).
    list_keys: Callable[[], list[str]] | None = None
    # The counterparty's own id for the act (wire id, order id, commit sha), from the result.
    reference: Callable[[Any], Any] | None = None

    is_async: bool = field(init=False)

    def __post_init__(self) -> None:
        # Looked up on every call on the hot path; inspect is slow enough to matter there.
        object.__setattr__(self, "is_async", inspect.iscoroutinefunction(self.fn))

    def __call__(self, *args: Any, **kwargs: Any) -> R:
        # Calling a tool directly bypasses the journal; allowed (tests, scripts) but never keyed.
        return self.fn(*args, **kwargs)


@overload
def tool(fn: Callable[..., R], /) -> Tool[R]: ...


@overload
def tool(
    *,
    name: str | None = None,
    idempotent: bool = False,
    reconcile: Callable[[str, dict[str, Any]], ReconcileResult] | None = None,
    dedup_window: float | None = None,
    retry: Retry | None = None,
    inverse: Tool[Any] | None = None,
    irreversible: bool | None = None,
    list_keys: Callable[[], list[str]] | None = None,
    reference: Callable[[Any], Any] | None = None,
) -> Callable[[Callable[..., R]], Tool[R]]: ...


def tool(
    fn: Callable[..., R] | None = None,
    /,
    *,
    name: str | None = None,
    idempotent: bool = False,
    reconcile: Callable[[str, dict[str, Any]], ReconcileResult] | None = None,
    dedup_window: float | None = None,
    retry: Retry | None = None,
    inverse: Tool[Any] | None = None,
    irreversible: bool | None = None,
    list_keys: Callable[[], list[str]] | None = None,
    reference: Callable[[Any], Any] | None = None,
) -> Any:
    """Declare a tool. Use bare (`@tool`) or with a profile (`@tool(reconcile=status)`).

    `inverse`: the tool that undoes this one, called by `ctx.compensate()` as
    `inverse(original=ARGS, result=RESULT, idempotency_key="comp/<key>")`. `irreversible`: it
    cannot be undone (an email, a payment out): no model-proposed undo is ever tried for it, and
    it is never used as one. Left unset, a tool with no profile at all (none of idempotent,
    reconcile, inverse, dedup_window, list_keys, reference) counts as irreversible."""

    def wrap(f: Callable[..., R]) -> Tool[R]:
        params = inspect.signature(f).parameters
        accepts_key = "idempotency_key" in params or any(
            p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()
        )
        if not accepts_key:
            raise ConfigError(
                f"tool {f.__qualname__} must accept an `idempotency_key` keyword argument: daybook "
                "hands every call the key that names its decision, to pass to the counterparty"
            )
        if dedup_window is not None and dedup_window <= 0:
            raise ConfigError(f"tool {f.__qualname__}: dedup_window must be > 0 seconds or None")
        if inverse is not None and not isinstance(inverse, Tool):
            raise ConfigError(f"tool {f.__qualname__}: inverse= must be a @daybook.tool")
        made = Tool(
            fn=f,
            name=name or f.__name__,
            idempotent=idempotent,
            reconcile=reconcile,
            dedup_window=dedup_window,
            retry=retry or Retry(),
            inverse=inverse,
            # A tool declared with no counterparty profile at all is treated as irreversible and
            # keyless: the most conservative reading (gated by the agent loop, never undone by a
            # model-proposed plan). Say `irreversible=False` to opt out.
            irreversible=(
                irreversible
                if irreversible is not None
                else not (idempotent or reconcile or inverse or dedup_window or list_keys or reference)
            ),
            list_keys=list_keys,
            reference=reference,
        )
        _TOOLS[made.name] = made
        return made

    return wrap(fn) if fn is not None else wrap


_TOOLS: dict[str, Tool[Any]] = {}


def lookup(name: str) -> Tool[Any] | None:
    """The tool registered under `name` in this process (compensation finds inverses here)."""
    return _TOOLS.get(name)


def classify(exc: BaseException) -> str:
    """Map a tool's exception to `unknown`, `transient` or `failed`.

    `unknown` when the request may have been delivered without an answer (timeouts, a connection
    dropped mid-exchange); `transient` when it certainly was not delivered (connection refused);
    `failed` for everything else: the counterparty answered no, or the tool itself is broken.
    """
    if isinstance(exc, urllib.error.URLError) and not isinstance(exc, urllib.error.HTTPError):
        reason = exc.reason
        if isinstance(reason, BaseException):
            return classify(reason)
        return "unknown"
    if isinstance(exc, OutcomeUnknown):
        return "unknown"
    if isinstance(exc, TransientError | ConnectionRefusedError | socket.gaierror):
        return "transient"
    if isinstance(
        exc,
        TimeoutError
        | ConnectionError
        | http.client.RemoteDisconnected
        | http.client.IncompleteRead
        | http.client.BadStatusLine,
    ):
        return "unknown"
    return "failed"
