"""The decision ledger read back: why an effect was taken.

An effect's intent links to the decision it came from; the decision's row holds its value, the
reasons given with it (policy and version, observation, alternatives, model, tokens, cost) and
the digest of the context it was computed from. With no decision before it, the run's mandate
(its workflow and input) is what the effect came from.
"""

from __future__ import annotations

from ..errors import ConfigError
from ..journal.decision import RESERVED
from ..records import JSON, Event, Kind, RunInfo, Status


def why(info: RunInfo, events: list[Event], step: int) -> dict[str, JSON]:
    """The effect at `step` of the run `info` (journal `events`) and the decision behind it."""
    run_id = info.run_id
    intent = next((e for e in events if e.step == step and e.kind == Kind.INTENT), None)
    if intent is None:
        raise ConfigError(f"run {run_id!r} has no effect at step {step}; see `daybook show {run_id}`")
    outcome = [e for e in events if e.step == step and e.kind == Kind.OUTCOME]
    decision_id = intent.data.get("decision")
    decision = None
    if decision_id:
        dstep = int(str(decision_id).rsplit("/", 1)[1])
        # A model call's decision is its completion, not the reservation written before it.
        made = (e for e in events if e.step == dstep and e.kind == Kind.DECISION and e.status != RESERVED)
        decision = next(made, None)
    last = outcome[-1] if outcome else None
    return {
        "effect": {
            "run_id": run_id,
            "step": step,
            "seq": intent.seq,
            "tool": intent.name,
            "key": intent.key,
            "args": intent.data.get("args"),
            "status": last.status if last else "in flight",
            "result": last.data.get("result") if last else None,
            "ref": last.data.get("ref") if last else None,
        },
        "decision": None if decision is None else _reasons(str(decision_id), decision),
        "mandate": {"workflow": info.workflow, "input": info.input, "code_version": info.code_version},
    }


def decisions(events: list[Event]) -> dict[str, dict[str, JSON]]:
    """Every recorded decision of a run's journal with its reasons, by decision id (a model
    call's completion, never its reservation): what `why` reads for one effect, read once for
    every effect of the run (the inspector's decisions view)."""
    found: dict[str, dict[str, JSON]] = {}
    for ev in events:
        if ev.kind == Kind.DECISION and ev.step is not None and ev.status == Status.RECORDED:
            decision_id = f"{ev.run_id}/{ev.step}"  # a fork's shared rows keep their own run's id
            found[decision_id] = _reasons(decision_id, ev)
            if isinstance(ev.data.get("cost"), dict):  # a model call: what it was charged
                found[decision_id]["charged"] = ev.data["cost"]
    return found


def _reasons(decision_id: str, decision: Event) -> dict[str, JSON]:
    return {
        "id": decision_id,
        "name": decision.name,
        "seq": decision.seq,
        "at": decision.at,
        "digest": decision.fp,
        "value": decision.data.get("value"),
        **(decision.data.get("why") or {}),
    }
