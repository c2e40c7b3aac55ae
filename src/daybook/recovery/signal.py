"""Failure signals: the small vocabulary a raw error is normalized to before recovery decides.

Semantic recovery never looks at a raw exception, an HTTP status or a socket error: it looks at
`FailureEvent(step, state, action, signal)`. The mapping works from the journaled error (its type
name and message), so the same failure normalizes the same way whatever raised it, live or
read back from the journal by another process days later.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class FailureSignal(StrEnum):
    TIMEOUT = "TIMEOUT"
    INVALID_OUTPUT = "INVALID_OUTPUT"
    MISSING_INPUT = "MISSING_INPUT"
    TOOL_ERROR = "TOOL_ERROR"
    DENIED = "DENIED"
    CONTRACT = "CONTRACT"


@dataclass(frozen=True)
class FailureEvent:
    """A failure at an action boundary: the step that failed (None when no step did, e.g. a
    contract checked in code), the instance active there, the action and its signal."""

    step: int | None
    state: str | None
    action: str | None
    signal: FailureSignal
    message: str = ""


# Checked in order: the first family whose type names or message pattern matches wins.
_BY_TYPE: tuple[tuple[FailureSignal, frozenset[str]], ...] = (
    (FailureSignal.CONTRACT, frozenset({"ContractViolation", "AssertionError"})),
    (
        FailureSignal.TIMEOUT,
        frozenset(
            {"TimedOut", "TimeoutError", "timeout", "ReadTimeout", "ConnectTimeout", "TimeoutException"}
        ),
    ),
    (
        FailureSignal.DENIED,
        frozenset({"NotAuthorized", "BudgetExceeded", "PermissionError", "ScopeViolation", "Denied"}),
    ),
    (FailureSignal.MISSING_INPUT, frozenset({"KeyError", "MissingInput", "LookupError"})),
    (
        FailureSignal.INVALID_OUTPUT,
        frozenset({"ValueError", "ValidationError", "JSONDecodeError", "InvalidOutput", "TypeError"}),
    ),
)
_HTTP = re.compile(r"\b(?:HTTP|status)[^0-9]{0,12}([1-5][0-9]{2})\b|\b([1-5][0-9]{2}) (?:[A-Z][a-z]+)")
_TEXT: tuple[tuple[FailureSignal, re.Pattern[str]], ...] = (
    (FailureSignal.TIMEOUT, re.compile(r"timed? ?out|deadline", re.I)),
    (FailureSignal.MISSING_INPUT, re.compile(r"missing (?:required )?(?:input|field|key|argument)", re.I)),
    (FailureSignal.INVALID_OUTPUT, re.compile(r"invalid (?:output|response|json)|malformed", re.I)),
    (FailureSignal.DENIED, re.compile(r"denied|forbidden|not authori[sz]ed", re.I)),
)


def normalize(error: Mapping[str, Any] | BaseException) -> FailureSignal:
    """The signal of a raw error: an exception, or its journaled form ({"type", "message"})."""
    kind, message = _raw(error)
    for signal, names in _BY_TYPE:
        if kind in names:
            return signal
    status = _http_status(message)
    if status is not None:
        if status in (401, 403):
            return FailureSignal.DENIED
        if status in (408, 504):
            return FailureSignal.TIMEOUT
        if status in (400, 422):
            return FailureSignal.INVALID_OUTPUT
        return FailureSignal.TOOL_ERROR
    for signal, pattern in _TEXT:
        if pattern.search(message):
            return signal
    return FailureSignal.TOOL_ERROR


def _raw(error: Mapping[str, Any] | BaseException) -> tuple[str, str]:
    if not isinstance(error, BaseException):
        return str(error.get("type") or ""), str(error.get("message") or "")
    inner = getattr(error, "error", None)
    if isinstance(inner, Mapping):  # a step failure carries the tool's own error
        return str(inner.get("type") or type(error).__name__), str(inner.get("message") or error)
    return type(error).__name__, str(error)


def _http_status(message: str) -> int | None:
    found = _HTTP.search(message)
    if found is None:
        return None
    return int(found.group(1) or found.group(2))
