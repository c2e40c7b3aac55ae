"""The effect ledger: every effect with its request, response, key, counterparty reference,
source decision, compensation handle, and its status history (one entry per journal row).

Also how an operator names an effect: by its idempotency key, or by run id and step.
"""

from __future__ import annotations

from ..errors import ConfigError
from ..records import JSON, Event, Kind, Status
from ..store import Store

EFFECT_KINDS = (Kind.INTENT.value, Kind.ATTEMPT.value, Kind.OUTCOME.value)
_HISTORY_FIELDS = ("reason", "resolved_by", "by", "evidence", "answer", "ref", "resolution")


def effects(
    store: Store, run_id: str | None = None, *, status: str | None = None, tool: str | None = None
) -> list[dict[str, JSON]]:
    """Every effect (of one run, or all); `status` filters on the current status (confirmed,
    failed, unknown, in flight), `tool` on the tool's name."""
    if run_id is not None:
        events = [e for e in store.load(run_id) if e.kind in EFFECT_KINDS]
    else:
        events = [e for kind in EFFECT_KINDS for e in store.events_of_kind(kind)]
        events.sort(key=lambda e: (e.run_id, e.seq))
    found: dict[tuple[str, int], dict[str, JSON]] = {}
    for ev in events:
        if ev.step is None:
            continue
        at = (ev.run_id, ev.step)
        if ev.kind == Kind.INTENT:
            found[at] = _opened(ev)
        row = found.get(at)
        if row is not None:
            _apply(row, ev)
    return [
        r
        for r in found.values()
        if (status is None or r["status"] == status) and (tool is None or r["tool"] == tool)
    ]


def _opened(intent: Event) -> dict[str, JSON]:
    return {
        "run_id": intent.run_id,
        "step": intent.step,
        "tool": intent.name,
        "key": intent.key,
        "decision": intent.data.get("decision"),
        "request": intent.data.get("args"),
        "status": "in flight",
        "response": None,
        "ref": None,
        "compensation": None,
        "history": [],
    }


def _apply(row: dict[str, JSON], ev: Event) -> None:
    """Fold one journal row of the effect into its ledger row and status history."""
    entry: dict[str, JSON] = {"at": ev.at, "attempt": ev.attempt}
    entry["status"] = ev.status if ev.kind == Kind.OUTCOME else ev.kind
    entry.update({f: ev.data[f] for f in _HISTORY_FIELDS if f in ev.data})
    history = row["history"]
    assert isinstance(history, list)
    history.append(entry)
    if ev.kind == Kind.OUTCOME:
        row["status"] = ev.status
        if ev.status == Status.CONFIRMED:
            row["response"] = ev.data.get("result")
            row["compensation"] = ev.data.get("compensation")
        if ev.data.get("ref") is not None:
            row["ref"] = ev.data["ref"]
    elif ev.kind == Kind.ATTEMPT:
        row["status"] = "in flight"


def find_effect(store: Store, effect: str, step: int | None = None) -> tuple[str, int]:
    """(run id, step) of an effect named by its idempotency key, or by run id and step."""
    if step is not None:
        return effect, step
    ev = store.find_intent(effect)
    if ev is not None and ev.step is not None:
        return ev.run_id, ev.step
    raise ConfigError(
        f"no effect has key {effect!r}; name it by its key (see `daybook effects`) or by RUN STEP"
    )
