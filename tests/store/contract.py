"""Helpers of the store conformance suite: run headers and journal rows as a caller builds them."""

from __future__ import annotations

from typing import Any

from daybook.records import SCHEMA_VERSION, Event, RunInfo

NOW = 1_000_000.0


def header(run_id: str, status: str = "running", **fields: Any) -> RunInfo:
    base: dict[str, Any] = {
        "run_id": run_id, "workflow": "wf", "ref": "app:wf", "status": status,
        "input": {"n": 1}, "result": None, "error": None, "created_at": NOW, "updated_at": NOW,
        "lease_owner": None, "lease_expires": None, "schema_version": SCHEMA_VERSION,
    }  # fmt: skip
    base.update(fields)
    return RunInfo(**base)


def row(run_id: str, seq: int, kind: str = "decision", **fields: Any) -> Event:
    step = fields.pop("step", seq)
    return Event(run_id=run_id, seq=seq, kind=kind, step=step, name=fields.pop("name", f"s{seq}"),
                 at=fields.pop("at", NOW + seq), **fields)  # fmt: skip


def started(run_id: str) -> Event:
    return Event(run_id=run_id, seq=1, kind="run_started", step=None, name="wf", data={"input": 1}, at=NOW)
