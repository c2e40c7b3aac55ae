"""The seal on a verdict: what an approver signs, and the one check every reader makes.

A verdict's payload carries the act digest and a signature by the approver's private key over
the run, the gate, the digest, the outcome, the reason and the approver's name. The gate (in
the agent's process), `approvals` and `verdicts` all call `refusal`: a verdict is good only when
it is signed, by the key the approvers file (outside the store) has for its sender, who holds
the `approver` role, and its digest is the gated act's. A row anyone wrote into the inbox
without that key (a SQL INSERT, an in-process `inbox.send(..., internal=True)`) fails here.
"""

from __future__ import annotations

from typing import Any

from ..errors import DaybookError
from . import roster, signing


def fields(
    run_id: str, gate_id: str, digest: object, outcome: object, reason: object, approver: str
) -> dict[str, Any]:
    """The document a verdict's signature covers."""
    return {
        "run_id": run_id,
        "gate_id": gate_id,
        "digest": digest,
        "outcome": outcome,
        "reason": reason,
        "approver": approver,
    }


def seal(token: str, run_id: str, gate_id: str, payload: dict[str, Any], approver: str) -> dict[str, Any]:
    """`payload` (outcome, reason, digest) with its signature by `token`'s key."""
    doc = fields(run_id, gate_id, payload["digest"], payload["outcome"], payload["reason"], approver)
    return {**payload, "signature": signing.sign(token, doc)}


def refusal(store: Any, run_id: str, gate_id: str, digest: str, payload: Any, sender: str) -> str:
    """Why a verdict row is not a good verdict for this gate ("" when it is)."""
    if not isinstance(payload, dict):
        return "the verdict is not a JSON object"
    if payload.get("digest") is None:
        return "the verdict names no act digest (written before signed verdicts, or forged)"
    if payload.get("digest") != digest:
        return "the verdict was given for another act"
    if not payload.get("signature"):
        return f"the verdict is not signed (forged in {sender!r}'s name?)"
    try:
        member = roster.member(store, sender)
    except DaybookError as exc:
        return f"the approvers file cannot be read: {exc}"
    if member is None:
        return f"{sender!r} is not in the approvers file"
    if not member.may("approver"):
        return f"{sender!r} does not hold the approver role"
    doc = fields(run_id, gate_id, digest, payload.get("outcome"), payload.get("reason", ""), sender)
    if not signing.verify(member.public_key, doc, payload["signature"]):
        return f"the signature is not {sender!r}'s (another key, or an altered verdict)"
    return ""
