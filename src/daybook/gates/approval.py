"""Approvals from outside a run: registered approvers, the gates waiting for them, verdicts.

An approver is registered once (`add_approver` returns its private key, the "token"; only the
public key is kept, in the approvers file outside the store: `gates.roster`). A verdict is
given only by a registered approver whose key matches and who is allowed by the gate; it is
delivered as the signal `verdict:<gate id>`, signed with that key (`gates.seal`), and the gate
checks the signature itself. A verdict after the gate timed out or was decided is recorded as
late (with who and when) and does nothing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from ..errors import ConfigError, CorruptJournal, NotAuthorized, RunNotFound
from ..records import JSON, Event, Kind, RunStatus, dumps
from ..runtime.tree import ancestors, descendants, root_of
from ..store import Store, flag, load_listed
from . import outbox, roster, seal, signing
from .expiry import standing
from .gate import action_digest


def add_approver(store: Store, name: str, roles: tuple[str, ...] | None = None) -> str:
    """Register approver `name` (or give it a new key pair) and return its private key."""
    return roster.add(store, name, roles)


def approvals(store: Store, run_id: str | None = None) -> list[dict[str, JSON]]:
    """Gates waiting for a verdict, across unfinished runs (a paused run's too: it reads the
    verdict when resumed), each with its run's `parent` and tree `root`; with `run_id`, only
    that run's and its descendants' (a child's gate is its parent's pending approval too)."""
    pending = _waiting(store)
    for g in pending:
        # Where the gate's approval request stands in the outbox (`none`: opened before it).
        g["notice"] = outbox.notice(store, str(g["run_id"]), str(g["gate_id"]))
        g["root"] = root_of(store, str(g["run_id"]))
        above = ancestors(store, str(g["run_id"]))
        g["parent"] = above[0] if above else None
    if run_id is None:
        return pending
    tree = {run_id} | {r.run_id for r in descendants(store, run_id)}
    return [g for g in pending if g["run_id"] in tree]


def _waiting(store: Store) -> list[dict[str, JSON]]:
    pending: list[dict[str, JSON]] = []
    for status in (RunStatus.SUSPENDED.value, RunStatus.RUNNING.value, RunStatus.PAUSED.value):
        for info in store.list_runs(status, 1000):
            events = _gate_rows(store, info.run_id)
            if events is None:
                continue  # damaged: flagged, found by `daybook check`
            found = gates(info.run_id, events)
            queued = _queued(store, info.run_id, events, found)
            now = time.time()
            for g in found:
                if g["state"] == "waiting" and not _complete(g, queued):
                    pending.append(_approved_by(standing(g, now), queued))
    return pending


def _gate_rows(store: Store, run_id: str) -> list[Event] | None:
    """The rows of a run's journal its gates are read from, not the whole journal (a waiting
    run of 20,000 rows has a few): None (and the run put in `store.damage`) when one does not
    decode."""
    try:
        return store.load_named(run_id, _GATE_KINDS, _GATE_NAMES)
    except CorruptJournal as exc:
        flag(store.damage, run_id, str(exc))
        return None


def _approved_by(gate: dict[str, JSON], queued: dict[str, list[tuple[str, str]]]) -> dict[str, JSON]:
    """The row with `approved_by`: the approvers whose approval the gate counted (`given`)
    and those whose signed approval is on its way (the run reads it when it next runs)."""
    given = gate.get("given")
    names = list(given) if isinstance(given, list) else []
    for sender, outcome in queued.get(str(gate["gate_id"]), []):
        if outcome == "approve" and sender not in names:
            names.append(sender)
    gate["approved_by"] = names
    return gate


def _complete(gate: dict[str, JSON], queued: dict[str, list[tuple[str, str]]]) -> bool:
    """Whether the verdicts already on their way (signed, not read yet) decide the gate: a
    denial, or enough distinct approvals with the ones it counted (the first ones decide)."""
    waiting = queued.get(str(gate["gate_id"]), [])
    if any(outcome != "approve" for _, outcome in waiting):
        return True
    given = gate.get("given")
    approvers = {sender for sender, _ in waiting} | set(given if isinstance(given, list) else [])
    need = gate.get("approvals")
    return bool(waiting) and len(approvers) >= (need if isinstance(need, int) else 1)


def approve(
    store: Store, run_id: str, gate_id: str, *, approver: str, token: str, reason: str, approve: bool
) -> str:
    """Deliver a verdict for one gate of a run, as an authenticated approver: "delivered", or
    "late" when the gate already timed out or has a verdict. It is signed with `token` (the
    approver's private key), which nothing keeps."""
    member = authentic(store, approver, token)
    if member is None or not member.may("approver"):
        why = (
            f"approver {approver!r} is unknown or its token does not match (the token is its private key)"
            if member is None
            else f"{approver!r} does not hold the approver role (roles: {', '.join(member.roles)})"
        )
        _refused(store, run_id, gate_id, approver, approve, why)
        raise NotAuthorized(
            f"{why}; register it with `daybook approvers add NAME` and use the key it gives "
            "(`dbk1_...`; a token from before signed verdicts no longer works)"
        )
    if store.get_run(run_id) is None:
        raise RunNotFound(run_id, store.url)
    events = store.load(run_id)
    found = {g["gate_id"]: g for g in gates(run_id, events)}
    gate = found.get(gate_id)
    if gate is None:
        raise ConfigError(
            f"run {run_id!r} has no gate {gate_id!r}; list waiting gates with `daybook approvals`"
        )
    gate = standing(gate, time.time())  # addressed to its escalation level now due
    allowed = gate["approvers"]
    if isinstance(allowed, list) and approver not in allowed:
        why = f"{approver!r} may not decide gate {gate_id!r} (allowed: {allowed})"
        _refused(store, run_id, gate_id, approver, approve, why)
        raise NotAuthorized(why)
    payload: dict[str, Any] = {
        "outcome": "approve" if approve else "decline",
        "reason": reason,
        "digest": gate["digest"],
    }
    payload = seal.seal(token, run_id, gate_id, payload, approver)
    queued = _queued(store, run_id, events, list(found.values()))
    late = (
        _complete(gate, queued)  # the verdicts already waiting to be read decide it
        or gate["state"] != "waiting"
        or bool(gate["expired"])  # past its deadline, and its policy neither escalates nor waits
    )
    name = f"{'late-' if late else ''}verdict:{gate_id}"
    if store.signal(run_id, name, dumps(payload, "verdict"), approver, time.time(), any_status=late) is None:
        raise ConfigError(f"run {run_id!r} is finished; the verdict was not recorded")
    return "late" if late else "delivered"


def gates(run_id: str, events: list[Event]) -> list[dict[str, JSON]]:
    """The gate requests a journal holds and where each stands: waiting, decided or timed_out.

    A row carries the request as journaled (run_id, gate_id, action, approvers now addressed,
    about, facts, approvals needed, expiry policy, escalate_to, timeout, opened, deadline, ask,
    first) and its progress (state, given: the approvers whose approval counted, level,
    overdue). `approval.standing` adds what the clock says (a level now due, expired)."""
    found: dict[str, dict[str, JSON]] = {}
    for ev in events:
        if ev.kind == Kind.DECISION and ev.status == "recorded":
            head, _, rest = ev.name.partition(":")
            value = ev.data.get("value")
            if head == "gate" and isinstance(value, dict):
                row = _request(run_id, ev, value)
                found[str(row["gate_id"])] = row
            elif head in _PROGRESS and rest in found and isinstance(value, dict):
                _PROGRESS[head](found[rest], value)
        elif ev.kind == Kind.SIGNAL and ev.name.startswith("signal:verdict:"):
            gate = found.get(ev.name.removeprefix("signal:verdict:"))
            if gate is not None and ev.status in ("received", "timeout"):
                # Read: decided, unless its check says it was no verdict or not the last needed.
                gate["state"] = "decided" if ev.status == "received" else "timed_out"
    return list(found.values())


def _request(run_id: str, ev: Event, value: dict[str, Any]) -> dict[str, JSON]:
    gate_id = value.get("decision") or f"{run_id}/{ev.step}"
    timeout = value.get("timeout")
    opened = value.get("opened")
    start = float(opened) if isinstance(opened, int | float) else ev.at
    row: dict[str, JSON] = {
        "run_id": run_id,
        "gate_id": gate_id,
        "action": value.get("action"),
        "approvers": value.get("approvers"),
        "first_approvers": value.get("approvers"),
        "since": ev.at,
        "state": "waiting",
        "deadline": None if timeout is None else start + float(timeout),
        "about": value.get("about"),
        "digest": action_digest(run_id, gate_id, value),
        "expiry": value.get("expiry") or "deny",
        "escalate_to": value.get("escalate_to") or [],
        "timeout": timeout,
        "opened": start,
        "approvals": value.get("approvals") or 1,
        "given": [],
        "level": 0,
        "overdue": False,
        "ask": value.get("ask") or 1,
        "first": value.get("first"),
    }
    if "facts" in value:
        row["facts"] = value["facts"]
    return row


def _checked_verdict(gate: dict[str, JSON], value: dict[str, Any]) -> None:
    if not value.get("ok"):
        gate["state"] = "waiting"  # what it read was no verdict: it waits on
        return
    approver, outcome = value.get("approver"), value.get("outcome")
    given = gate["given"]
    if approver is None or outcome != "approve" or not isinstance(given, list):
        return  # a denial (decided), or a check from before counted approvals
    if approver not in given:
        given.append(approver)
    need = gate["approvals"]
    if len(given) < (need if isinstance(need, int) else 1):
        gate["state"] = "waiting"  # more approvers needed


def _escalated(gate: dict[str, JSON], value: dict[str, Any]) -> None:
    gate.update(state="waiting", level=value.get("level"), approvers=value.get("approvers"))
    gate["deadline"] = value.get("deadline")


def _overdue(gate: dict[str, JSON], value: dict[str, Any]) -> None:
    gate.update(state="waiting", overdue=True)


# Steps that move an open gate on: a verdict's check, an escalation, the deadline of a `wait`.
_PROGRESS: dict[str, Callable[[dict[str, JSON], dict[str, Any]], None]] = {
    "verdict-check": _checked_verdict,
    "escalate": _escalated,
    "overdue": _overdue,
}

# What `gates` and `_queued` read of a journal: the signals (verdicts, and the inbox rows a wait
# consumed) and the gate steps (a request, a verdict's check, an escalation, a deadline's).
_GATE_KINDS = (Kind.SIGNAL.value,)
_GATE_NAMES = ("gate:", *(head + ":" for head in _PROGRESS))


def verdicts(store: Store, run_id: str | None = None) -> list[dict[str, JSON]]:
    """Every verdict attempt, oldest first per run: `delivered`, `late` (after the gate timed
    out or was decided; it did nothing), `refused` (a wrong token, an unregistered approver, or
    one the gate does not allow; journaled with who claimed to be deciding and why), and the
    gates that `timed_out` with no verdict."""
    ids = [run_id] if run_id is not None else [r.run_id for r in store.list_runs(None, 100_000)]
    rows: list[dict[str, JSON]] = []
    for rid in ids:
        events = load_listed(store, rid)
        digests = {g["gate_id"]: str(g["digest"]) for g in gates(rid, events or [])}
        rows.extend(_attempts(store, rid, digests, _checked(events or [])))
        if events is None:
            continue
        rows.extend(
            {
                "run_id": rid,
                "gate_id": g["gate_id"],
                "state": "timed_out",
                "approver": None,
                "outcome": None,
                "reason": "no verdict before the deadline",
                "at": g["deadline"],
            }
            for g in gates(rid, events)
            if g["state"] == "timed_out"
        )
    return rows


_ATTEMPTS = {"": "delivered", "late-": "late", "refused-": "refused"}


def _checked(events: list[Event]) -> dict[int, JSON]:
    """What the gate found when it read each verdict (inbox id -> the recorded check, or None
    for a verdict read before signed verdicts): history, whatever the approvers file says now."""
    reading: dict[str, int] = {}
    found: dict[int, JSON] = {}
    for ev in events:
        if ev.kind == Kind.SIGNAL and ev.name.startswith("signal:verdict:") and ev.status == "received":
            inbox_id = ev.data.get("inbox_id")
            if isinstance(inbox_id, int):
                reading[ev.name.removeprefix("signal:verdict:")] = inbox_id
                found[inbox_id] = None
        elif ev.kind == Kind.DECISION and ev.name.startswith("verdict-check:") and ev.status == "recorded":
            inbox_id = reading.pop(ev.name.removeprefix("verdict-check:"), None)
            if inbox_id is not None:
                found[inbox_id] = ev.data.get("value")
    return found


def _attempts(
    store: Store, run_id: str, digests: dict[str, str], checked: dict[int, JSON]
) -> list[dict[str, JSON]]:
    """The verdict rows of a run's inbox; one that does not carry its approver's signature (a
    row written into the store by hand) is shown `refused`, with why: it decides nothing. A
    verdict the gate has read shows what the gate's check found then (`checked`); one not read
    yet, or late, is checked now."""
    rows: list[dict[str, JSON]] = []
    for inbox_id, name, payload_text, sender, at in store.inbox(run_id):
        kind, _, gate_id = name.partition("verdict:")
        state = _ATTEMPTS.get(kind)
        if state is None or not gate_id:
            continue
        payload = json.loads(payload_text)
        reason = payload.get("why") or payload.get("reason", "") if isinstance(payload, dict) else ""
        if state != "refused":
            why = _why_refused(store, run_id, gate_id, digests, payload, sender, checked.get(inbox_id, ""))
            state, reason = ("refused", why) if why else (state, reason)
        rows.append(
            {
                "run_id": run_id,
                "gate_id": gate_id,
                "state": state,
                "approver": sender,
                "outcome": payload.get("outcome") if isinstance(payload, dict) else None,
                "reason": reason,
                "at": at,
            }
        )
    return rows


def _why_refused(
    store: Store, run_id: str, gate_id: str, digests: dict[str, str], payload: Any, sender: str, check: JSON
) -> str:
    if check is None:
        return ""  # read before signed verdicts: history
    if isinstance(check, dict):
        return "" if check.get("ok") else str(check.get("why") or "refused by the gate")
    return seal.refusal(store, run_id, gate_id, digests.get(gate_id, ""), payload, sender)


def _refused(store: Store, run_id: str, gate_id: str, approver: str, approve: bool, why: str) -> None:
    """Journal a refused verdict in the run's inbox (who claimed to decide, when, why). It is
    never read as a verdict. Nothing is written for a run that does not exist."""
    payload = {"outcome": "approve" if approve else "decline", "why": why}
    store.signal(
        run_id,
        f"refused-verdict:{gate_id}",
        dumps(payload, "refusal"),
        approver,
        time.time(),
        any_status=True,
        wake=False,  # a refusal is not news for the run: a suspended run stays suspended
    )


def _queued(
    store: Store, run_id: str, events: list[Event], found: list[dict[str, JSON]]
) -> dict[str, list[tuple[str, str]]]:
    """Per gate, the good verdicts (signed by their approver) in the inbox that no wait has
    consumed yet, as (approver, outcome): a forged row neither hides a gate nor makes a real
    verdict late."""
    consumed = {
        ev.data.get("inbox_id") for ev in events if ev.kind == Kind.SIGNAL and ev.status == "received"
    }
    digests = {str(g["gate_id"]): str(g["digest"]) for g in found}
    queued: dict[str, list[tuple[str, str]]] = {}
    for inbox_id, name, payload, sender, _ in store.inbox(run_id):
        gate_id = name.removeprefix("verdict:")
        if inbox_id in consumed or gate_id == name or gate_id not in digests:
            continue
        body = json.loads(payload)
        if not seal.refusal(store, run_id, gate_id, digests[gate_id], body, sender):
            queued.setdefault(gate_id, []).append((sender, str(body.get("outcome"))))
    return queued


def authentic(store: Store, name: str, token: str | None) -> roster.Member | None:
    """Registered person `name`, if `token` is its private key; else None."""
    member = roster.member(store, name)
    if member is None or not token:
        return None
    try:
        return member if signing.public_of(token) == member.public_key else None
    except NotAuthorized:
        return None  # not a key at all (e.g. a token from before signed verdicts)


def is_approver(store: Store, name: str, token: str) -> bool:
    """Whether `token` is registered approver `name`'s key (a sign-in check; it writes nothing)."""
    return authentic(store, name, token) is not None
