"""The store as an auditor reads it: `check` (is every row sound?) and `salvage` (what of a damaged
run can still be read?). Both read rows exactly as stored (`Store.raw_rows`) and decode them one
at a time, so one bad row is a finding about that row, never a failure of the whole read.

`check` finds: what the database engine's own check reports (SQLite `quick_check`), a header or
journal row that does not decode, a header with an unknown status, a run's journal whose seq
numbers do not run 1, 2, 3, ... without a gap, an attempt or outcome with no intent before it,
journal rows with no header (and a header with no journal), and inbox, entity log and commit
payloads that are not JSON.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import CorruptJournal, RunNotFound
from ..records import JSON, SCHEMA_VERSION, Kind, RunStatus
from . import Store
from .rows import RAW_TABLES, event_from_row, run_from_row

Finding = dict[str, JSON]
Found = Callable[..., None]

_STATUSES = frozenset(s.value for s in RunStatus)
_SETTLING = frozenset({Kind.ATTEMPT.value, Kind.OUTCOME.value})
# (table, position of the JSON column, what the row is called) for the side tables.
_PAYLOADS = (("inbox", 3, "inbox row"), ("entity_log", 5, "entity log row"), ("commits", 5, "commit"))


def check(store: Store) -> list[Finding]:
    """Every problem found in the store, each as {"run_id", "seq", "problem"} (run_id and seq
    None where they do not apply); [] when the store is sound."""
    findings: list[Finding] = []

    def found(problem: str, run_id: str | None = None, seq: int | None = None) -> None:
        findings.append({"run_id": run_id, "seq": seq, "problem": problem})

    try:
        for message in store.quick_check():
            found(f"the database's own check (quick_check) reports: {message}")
        _check_rows(store, found)
    except Exception as exc:  # a file too damaged to read is the finding, not a crash
        found(f"the store cannot be read to the end: {type(exc).__name__}: {exc}")
    return findings


def _check_rows(store: Store, found: Found) -> None:
    headers = _check_headers(store, found)
    journals = set(store.journal_run_ids())
    for run_id in sorted(headers - journals):
        found("the run has a header but no journal rows", run_id)
    for run_id in sorted(journals):
        if run_id not in headers:
            found("journal rows with no run header", run_id)
        _check_journal(run_id, store.raw_rows("events", run_id), found)
    for table, column, what in _PAYLOADS:
        for row in store.raw_rows(table):
            try:
                json.loads(row[column])
            except (TypeError, ValueError) as exc:
                found(f"{what} {row[0]!r} in daybook_{table}: its payload is not valid JSON ({exc})")


def _check_headers(store: Store, found: Found) -> set[str]:
    """Check each run header; returns the run ids that have one (sound or not)."""
    seen: set[str] = set()
    for row in store.raw_rows("runs"):
        seen.add(str(row[0]))
        try:
            info = run_from_row(row)
        except CorruptJournal as exc:
            found(str(exc), str(row[0]))
            continue
        if info.status not in _STATUSES:
            found(f"the header's status {info.status!r} is not a run status", info.run_id)
    return seen


def _check_journal(run_id: str, rows: Sequence[Sequence[Any]], found: Found) -> None:
    expected = 1
    intents: set[int | None] = set()
    for row in rows:
        seq = int(row[1])
        if seq > expected:
            found(f"seq {expected} to {seq - 1} are missing (a gap in the journal)", run_id, expected)
        elif seq < expected:
            found("a journal starts at seq 1; this row comes before it", run_id, seq)
        expected = max(expected, seq + 1)
        try:
            ev = event_from_row(row)
        except CorruptJournal as exc:
            found(str(exc), run_id, seq)
            continue
        if ev.kind == Kind.INTENT:
            intents.add(ev.step)
        elif ev.kind in _SETTLING and ev.step not in intents:
            found(f"{ev.kind} of step {ev.step} has no intent before it", run_id, seq)


def salvage(store: Store, run_id: str) -> dict[str, JSON]:
    """The run and its journal with every readable row decoded as `export` gives it, and each
    row that does not decode as it is stored (`raw`, the payload's text) with an `error`."""
    headers = store.raw_rows("runs", run_id)
    rows = store.raw_rows("events", run_id)
    if not headers and not rows:
        raise RunNotFound(run_id, store.url)
    out: dict[str, JSON] = {"format": "daybook.export", "schema_version": SCHEMA_VERSION, "raw": True}
    out["run"], out["run_error"] = _header(headers[0]) if headers else (None, "the run has no header")
    events: list[JSON] = []
    for row in rows:
        try:
            events.append(event_from_row(row).as_dict())
        except CorruptJournal as exc:
            columns = dict(zip(RAW_TABLES["events"].replace(" ", "").split(","), row, strict=True))
            del columns["run_id"], columns["parent"]
            columns["raw"] = columns.pop("data")
            events.append({**columns, "error": str(exc)})
    out["events"] = events
    out["damaged_rows"] = sum(1 for e in events if isinstance(e, dict) and "error" in e)
    return out


def _header(row: Sequence[Any]) -> tuple[dict[str, JSON], str | None]:
    try:
        return run_from_row(row).as_dict(), None
    except CorruptJournal as exc:
        header: dict[str, JSON] = dict(zip(RAW_TABLES["runs"].replace(" ", "").split(","), row, strict=True))
        for column in ("input", "result", "error"):
            with contextlib.suppress(ValueError):  # else kept as the text stored
                header[column] = None if header[column] is None else json.loads(str(header[column]))
        return header, str(exc)
