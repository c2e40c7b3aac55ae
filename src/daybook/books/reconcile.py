"""Reconciliation: the journal against the counterparties' own records.

`absent_there`: an effect confirmed in the journal that the counterparty has no record of (asked
through the tool's status query). `never_issued`: a key the counterparty holds that the journal
never issued (from the tool's `list_keys`, for keys that look like this store's runs). The tools
must be imported in this process.
"""

from __future__ import annotations

import time

from ..journal.tool import NotFound
from ..journal.tool import lookup as lookup_tool
from ..records import JSON, Event, Kind, Status
from ..store import Store, load_listed


def reconcile(store: Store, run_ids: list[str], day: str | None = None) -> list[dict[str, JSON]]:
    """The mismatches for these runs (only rows of `day`, YYYY-MM-DD local time, if given)."""
    confirmed, issued = _confirmed(store, run_ids, day)
    mismatches: list[dict[str, JSON]] = []
    for name, intents in sorted(confirmed.items()):
        tool = lookup_tool(name)
        if tool is None or tool.reconcile is None:
            continue
        for intent in intents:
            answer = tool.reconcile(str(intent.key), dict(intent.data.get("args") or {}))
            if isinstance(answer, NotFound):
                mismatches.append(
                    {
                        "kind": "absent_there",
                        "tool": name,
                        "key": intent.key,
                        "run_id": intent.run_id,
                        "step": intent.step,
                    }
                )
        if tool.list_keys is not None:
            prefixes = tuple(f"{rid}/" for rid in run_ids)
            for key in tool.list_keys():
                if key.startswith(prefixes) and key not in issued:
                    mismatches.append({"kind": "never_issued", "tool": name, "key": key})
    return mismatches


def _confirmed(store: Store, run_ids: list[str], day: str | None) -> tuple[dict[str, list[Event]], set[str]]:
    """Intents confirmed in the journal, by tool name, and every key the journal issued."""
    confirmed: dict[str, list[Event]] = {}
    issued: set[str] = set()
    for rid in run_ids:
        intents: dict[int, Event] = {}
        for ev in load_listed(store, rid) or []:
            if day and time.strftime("%Y-%m-%d", time.localtime(ev.at)) != day:
                continue
            if ev.kind == Kind.INTENT and ev.step is not None:
                intents[ev.step] = ev
                issued.add(str(ev.key))
            elif ev.kind == Kind.OUTCOME and ev.status == Status.CONFIRMED and ev.step in intents:
                confirmed.setdefault(ev.name, []).append(intents[ev.step])
    return confirmed, issued
