"""How a tool's exception reads: `unknown` (it may have reached the counterparty), `transient`
(it certainly did not) or `failed`; whether a failure is one the tool declared certain; and
how an exception is journaled (`error_info`).
"""

from __future__ import annotations

import traceback

from ..errors import EffectFailed
from ..records import safe_text
from . import wire
from .tool import OutcomeUnknown, TransientError


def classify(exc: BaseException) -> str:
    """Map a tool's exception to `unknown`, `transient` or `failed`, by what it says about delivery.

    `unknown` when the request may have been delivered without an answer (timeouts, a connection
    dropped mid-exchange, from the standard library or from requests, urllib3, httpx, aiohttp,
    botocore, asyncio, grpc and the SDKs wrapping them, recognised by class name along the
    exception's `__cause__`/`__context__` chain: see `wire`); `transient` when it certainly was
    not delivered (connection refused, never connected); `failed` for everything else, and
    always for `EffectFailed`. The lifecycle reads `failed` as unknown too when the tool can ask
    the counterparty (`status`, `verify`) and the exception is not declared certain.
    """
    if isinstance(exc, EffectFailed):
        return "failed"  # the tool said so: a certain failure, whatever it was raised from
    if isinstance(exc, OutcomeUnknown):
        return "unknown"
    if isinstance(exc, TransientError):
        return "transient"
    return wire.read(exc) or "failed"


def is_certain(exc: BaseException, certain: tuple[type[BaseException] | int, ...]) -> bool:
    """True if `exc` is a failure the tool declared certain: one of the exception types, or an
    HTTP error whose status is one of the codes (read from `.response.status_code`, `.status`,
    `.code` or `.status_code`, as requests, httpx, aiohttp and urllib carry it)."""
    if isinstance(exc, EffectFailed):
        return True
    types = tuple(c for c in certain if isinstance(c, type))
    if types and isinstance(exc, types):
        return True
    codes = {c for c in certain if isinstance(c, int)}
    return bool(codes) and http_status(exc) in codes


def http_status(exc: BaseException) -> int | None:
    """The HTTP status an HTTP client's error carries, if any."""
    response = getattr(exc, "response", None)
    for holder, attr in ((response, "status_code"), (response, "status"), (exc, "status"), (exc, "code"),
                         (exc, "status_code")):  # fmt: skip
        value = getattr(holder, attr, None) if holder is not None else None
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


# How much of a traceback is kept: enough for the frames that matter, never a megabyte row.
TRACEBACK_CHARS = 16_000


def error_info(exc: BaseException, full: bool = False) -> dict[str, str]:
    """How an exception is journaled: its type, message and the last frames of its traceback
    (`where`); with `full` (how a run ended) also the whole traceback, its tail kept if long
    (`traceback`, printed by `daybook show`)."""
    lines = _never_raised(exc) or traceback.format_exception(exc)
    info = {
        "type": type(exc).__name__,
        "message": safe_text(str(exc)),
        "where": safe_text("".join(lines[-3:])[-2000:]),
    }
    if full:
        info["traceback"] = safe_text("".join(lines)[-TRACEBACK_CHARS:])
    return info


def _never_raised(exc: BaseException) -> list[str] | None:
    """`traceback.format_exception(exc)` of an exception made only to be journaled, never raised
    (no traceback, cause, context or notes: each loser of a speculation's `BranchLost`): its one
    line, made as the traceback module makes it, without its TracebackException (most of an
    abort's CPU). None for any other exception."""
    if exc.__traceback__ is not None or exc.__cause__ is not None or exc.__context__ is not None:
        return None
    if hasattr(exc, "__notes__") or isinstance(exc, SyntaxError | BaseExceptionGroup):
        return None
    kind = type(exc)
    name, module = kind.__qualname__, kind.__module__
    if module not in ("__main__", "builtins"):
        name = f"{module if isinstance(module, str) else '<unknown>'}.{name}"
    try:
        text = str(exc)
    except Exception:
        text = "<exception str() failed>"
    return [f"{name}: {text}\n" if text else f"{name}\n"]
