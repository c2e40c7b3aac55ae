"""Run search: run headers filtered by workflow, status, time, parent, queue and search
attributes, newest first, a page at a time.

A page is a `RunPage` (a list of `RunInfo`) whose `cursor` is None on the last page, else an
opaque string that `runs(..., cursor=)` continues from: keyset paging on (created_at, run_id),
so a page never repeats or skips a run whatever is added meanwhile.
"""

from __future__ import annotations

import base64
import datetime
import json
from typing import Any

from ..errors import ConfigError
from ..records import JSON, RunInfo, RunStatus, check_text, whole
from ..store import Store

MAX_LIMIT = 1_000_000


class RunPage(list[RunInfo]):
    """One page of runs; `cursor` continues after it (None: there are no more)."""

    cursor: str | None = None


def encode_cursor(info: RunInfo) -> str:
    raw = json.dumps([info.created_at, info.run_id]).encode()
    return base64.urlsafe_b64encode(raw).decode("ascii")


def decode_cursor(cursor: str) -> tuple[float, str]:
    try:
        at, run_id = json.loads(base64.urlsafe_b64decode(cursor.encode("ascii")))
        return float(at), str(run_id)
    except (ValueError, TypeError, UnicodeError):
        raise ConfigError(
            f"cursor {cursor[:40]!r} is not one daybook gave: pass the `cursor` of the previous page"
        ) from None


def when(value: object, what: str) -> float | None:
    """A time filter as epoch seconds: a number, a datetime (naive: local time) or ISO 8601 text."""
    if value is None:
        return None
    if isinstance(value, datetime.datetime):
        return value.timestamp()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
        try:
            return datetime.datetime.fromisoformat(value).timestamp()
        except ValueError:
            pass
    raise ConfigError(f"{what} must be a time: epoch seconds, a datetime or ISO 8601 text, got {value!r}")


def filters_of(
    *,
    workflow: str | None,
    status: str | None,
    since: object,
    until: object,
    parent: str | None,
    queue: str | None,
    attributes: dict[str, JSON] | None,
) -> dict[str, Any]:
    if status is not None and status not in {s.value for s in RunStatus}:
        raise ConfigError(f"unknown status {status!r}; use one of {', '.join(s.value for s in RunStatus)}")
    for value, what in ((workflow, "workflow"), (parent, "parent"), (queue, "queue")):
        if value is not None:
            check_text(str(value), f"the {what} filter")
    if attributes is not None and not isinstance(attributes, dict):
        raise ConfigError(f"attributes must be a dict of name -> value, got {attributes!r}")
    return {
        "workflow": workflow,
        "status": status,
        "since": when(since, "since"),
        "until": when(until, "until"),
        "parent": parent,
        "queue": queue,
        "attributes": dict(attributes or {}),
    }


def runs(store: Store, filters: dict[str, Any], limit: int, cursor: str | None) -> RunPage:
    """A page of at most `limit` runs matching `filters`, after `cursor`."""
    limit = whole(limit, "limit", low=1, high=MAX_LIMIT)
    after = None if cursor is None else decode_cursor(cursor)
    only_status = not any(v for k, v in filters.items() if k != "status")
    if only_status and after is None:
        # The listing every daybook had: it also reads a store from before run search (read-only).
        found = store.list_runs(filters["status"], limit + 1)
    else:
        found = store.search_runs(filters, limit + 1, after)
    page = RunPage(found[:limit])
    if len(found) > limit:
        page.cursor = encode_cursor(page[-1])
    return page
