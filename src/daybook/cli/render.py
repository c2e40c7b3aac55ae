"""Plain-text rendering of runs and journals for the CLI (a person reads these, not a program)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from .. import Event, Kind, RunInfo


def brief(value: Any, width: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    text = text.replace("\n", " ")
    return text if len(text) <= width else text[: width - 3] + "..."


def when(ts: float | None) -> str:
    if not ts:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines)


def _decision(d: dict[str, Any]) -> str:
    return brief(d.get("error") if "error" in d else d.get("value"))


def _intent(d: dict[str, Any]) -> str:
    return "args " + brief(d.get("args"))


def _outcome(d: dict[str, Any]) -> str:
    if "result" in d:
        by = f" [{d['resolved_by']}{' by ' + d['by'] if d.get('by') else ''}]" if d.get("resolved_by") else ""
        return brief(d["result"]) + by
    if "error" in d:
        err = d["error"]
        return brief(f"{err.get('type')}: {err.get('message')}") + (
            "" if d.get("final", True) else " (will retry)"
        )
    return brief(d.get("reason") or d.get("resolution") or "")


def _timer(d: dict[str, Any]) -> str:
    return f"fires at {when(d['fire_at'])}" if "fire_at" in d else ""


def _signal(d: dict[str, Any]) -> str:
    if "deadline" in d:
        return f"waiting for {d.get('name')!r}" + (
            f" until {when(d['deadline'])}" if d.get("deadline") else ""
        )
    if "payload" in d:
        return f"from {d.get('sender')}: " + brief(d.get("payload"))
    return ""


def _attempt(d: dict[str, Any]) -> str:
    return brief(d.get("reason", ""))


def _run_started(d: dict[str, Any]) -> str:
    return "input " + brief(d.get("input"))


def _run_completed(d: dict[str, Any]) -> str:
    return "result " + brief(d.get("result"))


def _run_failed(d: dict[str, Any]) -> str:
    err = d.get("error") or {}
    return brief(f"{err.get('type')}: {err.get('message')}")


_DETAIL: dict[str, Callable[[dict[str, Any]], str]] = {
    Kind.DECISION: _decision,
    Kind.INTENT: _intent,
    Kind.OUTCOME: _outcome,
    Kind.TIMER: _timer,
    Kind.SIGNAL: _signal,
    Kind.ATTEMPT: _attempt,
    Kind.RUN_STARTED: _run_started,
    Kind.RUN_COMPLETED: _run_completed,
    Kind.RUN_FAILED: _run_failed,
}


def detail(ev: Event) -> str:
    """The journal table's last column: what an event says, in a line (one formatter per kind)."""
    d = ev.data
    kind_detail = _DETAIL.get(ev.kind)
    if kind_detail is not None:
        return kind_detail(d)
    return brief(d.get("message", d), 90)


def journal(info: RunInfo, events: list[Event]) -> str:
    start = events[0].at if events else info.created_at
    opened: dict[int, float] = {}
    rows = []
    for ev in events:
        took = ""
        if ev.step is not None:
            if ev.kind in (Kind.INTENT, Kind.ATTEMPT):
                opened[ev.step] = ev.at
            elif ev.kind == Kind.OUTCOME and ev.step in opened:
                took = f"{(ev.at - opened[ev.step]) * 1000:.1f}ms"
        rows.append(
            [
                str(ev.seq),
                "" if ev.step is None else str(ev.step),
                ev.kind,
                ev.name,
                ev.key or "",
                ev.status or "",
                f"+{ev.at - start:.3f}s",
                took,
                detail(ev),
            ]
        )
    head = [
        f"run {info.run_id}  workflow {info.workflow}  status {info.status}",
        f"created {when(info.created_at)}  updated {when(info.updated_at)}  "
        f"lease {info.lease_owner or 'free'}"
        + (f" until {when(info.lease_expires)}" if info.lease_owner else ""),
    ]
    if info.error:
        head.append(f"attention: {info.error.get('message', info.error)}")
    body = table(["seq", "step", "kind", "name", "key", "status", "at", "took", "detail"], rows)
    trace = info.error.get("traceback") if isinstance(info.error, dict) else None
    # The traceback of a failed or parked run: where the bug is, without a debugger.
    tail = f"\n\ntraceback (the workflow raised):\n{trace.rstrip()}" if trace else ""
    return "\n".join(head) + "\n\n" + body + tail
