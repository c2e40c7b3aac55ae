"""Plain-text rendering of runs and journals for the CLI (a person reads these, not a program).

Everything the CLI prints passes through `safe` (tables, lines, errors) or `safe_json` (JSON):
run data (tool results, model text, run ids, names, errors) may hold terminal control
characters (ESC, CSI, BEL, C1 controls, \\r, bidi overrides), which would let a tool or a model
rewrite the operator's terminal; they are printed escaped (`\\x1b`), never raw (D12).
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from .. import Event, Kind, RunInfo
from ..coordination.budget import paused_at_cap
from ..runtime.lease import is_dead_here

# C0 controls but tab and newline, DEL, C1 controls, lone surrogates (undecodable argv bytes),
# and the Unicode format characters that reorder or hide text (bidi overrides, line separators).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_CONTROL_OR_BREAK = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029\u202a-\u202e\u2066-\u2069]")
# The same, less what JSON already escapes (C0): what json.dumps(ensure_ascii=False) leaves raw.
_JSON_RAW = re.compile("[\x7f-\x9f\ud800-\udfff\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe(text: str, *, lines: bool = False) -> str:
    """`text` with every terminal control character escaped as `\\x1b` / `\\u202e`: the one
    helper every CLI printer uses. `lines=True` keeps newlines and tabs (a message of several
    lines); otherwise they are escaped too (a table cell or a one-line field)."""
    return (_CONTROL if lines else _CONTROL_OR_BREAK).sub(_escape, text)


def safe_json(text: str) -> str:
    """JSON text with what `json.dumps(..., ensure_ascii=False)` leaves raw (C1 controls, lone
    surrogates, bidi overrides) written as `\\uXXXX` escapes: still the same JSON value."""
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def brief(value: Any, width: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    text = safe(text.replace("\n", " "))
    return text if len(text) <= width else text[: width - 3] + "..."


TERMINAL = -1  # `table(width=TERMINAL)`: fit the terminal, if the output is one


def terminal_width() -> int | None:
    """The width tables must fit: the terminal's (shutil, so $COLUMNS too) when stdout is a
    terminal, else None (no limit: a pipe or a file gets whole lines)."""
    if sys.stdout.isatty():
        return shutil.get_terminal_size((100, 24)).columns
    return None


def when(ts: float | None) -> str:
    if not ts:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def table(headers: list[str], rows: list[list[str]], width: int = TERMINAL) -> str:
    """Columns padded to line up, every cell escaped (`safe`); the widest columns are cut
    (ending "...") until a line fits `width` (TERMINAL: `terminal_width()`; 0: no limit)."""
    rows = [[safe(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    widths = _fit(widths, headers, terminal_width() if width == TERMINAL else (width or None))
    lines = ["  ".join(h[:w].ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        lines.append("  ".join(_cut(c, w).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines)


def _fit(widths: list[int], headers: list[str], width: int | None) -> list[int]:
    widths = list(widths)
    if width is None:
        return widths
    floor = [max(4, min(len(h), 8)) for h in headers]
    while sum(widths) + 2 * (len(widths) - 1) > width:
        i = max(range(len(widths)), key=lambda k: widths[k] - floor[k])
        if widths[i] <= floor[i]:
            break  # as narrow as it goes: let the terminal wrap
        widths[i] -= 1
    return widths


def _cut(cell: str, width: int) -> str:
    return cell if len(cell) <= width else cell[: max(width - 3, 0)] + "..."[:width]


def lease_state(info: RunInfo, now: float | None = None) -> str:
    """`free`, `held`, `dead` (its owner's process is gone, on this machine) or `expired` (no
    heartbeat since its deadline: the owner died elsewhere, or hangs)."""
    if not info.lease_owner:
        return "free"
    if is_dead_here(info.lease_owner):
        return "dead"
    if info.lease_expires is not None and info.lease_expires < (now or time.time()):
        return "expired"
    return "held"


def lease(info: RunInfo) -> str:
    """The `runs` table's lease column: the owner, and whether it is dead or its lease expired."""
    state = lease_state(info)
    if state == "free" or not info.lease_owner:
        return ""
    return info.lease_owner + ("" if state == "held" else f" ({state}: resume it)")


def lease_line(info: RunInfo) -> str:
    """The `show` header's lease: whose, until when, and what to do when its owner is gone."""
    state = lease_state(info)
    if state == "free":
        return "lease free"
    line = f"lease {info.lease_owner} until {when(info.lease_expires)}"
    if state == "dead":
        return line + (
            " (owner dead: its process is gone; a worker takes the run over now, or "
            f"`daybook resume {info.run_id}`)"
        )
    if state == "expired":
        return line + (
            " (expired: its owner stopped heartbeating, dead or hung; a worker takes the run "
            f"over, or `daybook resume {info.run_id}`)"
        )
    return line


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
        name = str(d.get("name"))
        what = (
            f"approval of gate {name.removeprefix('verdict:')} (daybook approve / deny)"
            if name.startswith("verdict:")
            else repr(name)
        )
        return f"waiting for {what}" + (f" until {when(d['deadline'])}" if d.get("deadline") else "")
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


def _run_retried(d: dict[str, Any]) -> str:
    rec = d.get("recovery")
    if not isinstance(rec, dict):
        return brief(d.get("message", d), 90)
    # A semantic recovery's branch: what it restored and which steps run again.
    where = f"{rec.get('instance')} at {rec.get('checkpoint')}" if rec.get("checkpoint") else "the whole task"
    how = "restore" if rec.get("action") == "restore" else f"re-run ({rec.get('reason')})"
    return brief(f"{how} {where} by {d.get('by')}: steps {d.get('supersede')} run again", 120)


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
    Kind.RUN_RETRIED: _run_retried,
}


def detail(ev: Event) -> str:
    """The journal table's last column: what an event says, in a line (one formatter per kind)."""
    d = ev.data
    kind_detail = _DETAIL.get(ev.kind)
    if kind_detail is not None:
        return kind_detail(d)
    return brief(d.get("message", d), 90)


def _waiting_gates(info: RunInfo, events: list[Event]) -> list[str]:
    """The gates a suspended run waits on (a wait for `verdict:GATE` with nothing received)."""
    if info.status != "suspended":
        return []
    waiting: dict[int | None, str] = {}
    for ev in events:
        name = str(ev.data.get("name") or "") if ev.kind == Kind.SIGNAL else ""
        if name.startswith("verdict:") and "deadline" in ev.data:
            waiting[ev.step] = name.removeprefix("verdict:")
        elif ev.kind == Kind.SIGNAL and ev.step in waiting and "deadline" not in ev.data:
            waiting.pop(ev.step)
    return list(waiting.values())


def journal(
    info: RunInfo, events: list[Event], width: int = TERMINAL, tree: Sequence[tuple[int, RunInfo]] = ()
) -> str:
    """A run's journal as a table under a header (status, lease, queue, its place in a run
    tree: its parent, and its child runs indented by depth, what to do next)."""
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
        f"created {when(info.created_at)}  updated {when(info.updated_at)}  {lease_line(info)}",
    ]
    if info.queue is not None:
        key = f"  partition {info.partition}" if info.partition is not None else ""
        head.append(f"queue {info.queue}  priority {info.priority}{key}")
    if info.parent_run is not None:
        head.append(f"child of run {info.parent_run}")
    head.extend(f"{'  ' * depth}child run {kid.run_id}  {kid.workflow}  {kid.status}" for depth, kid in tree)
    gates = _waiting_gates(info, events)
    if gates:
        head.append(
            "waiting for approval: "
            + "; ".join(
                f"`daybook approve {info.run_id} {g} --as NAME` or `daybook deny {info.run_id} {g} --as NAME`"
                for g in gates
            )
            + ", the token in $DAYBOOK_TOKEN"
        )
    paused = paused_at_cap(events) if info.status == "suspended" else None
    if paused:
        head.append(f"paused at its budget: {paused}")
    if info.error:
        head.append(f"attention: {info.error.get('message', info.error)}")
    body = table(["seq", "step", "kind", "name", "key", "status", "at", "took", "detail"], rows, width)
    trace = info.error.get("traceback") if isinstance(info.error, dict) else None
    # The traceback of a failed or parked run: where the bug is, without a debugger.
    tail = f"\n\ntraceback (the workflow raised):\n{trace.rstrip()}" if trace else ""
    return "\n".join(head) + "\n\n" + body + tail
