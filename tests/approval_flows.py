"""Workflows and tools of the approval-lifecycle tests, run in the test process and in child
processes alike (`python approval_flows.py DB start|resume RUN_ID [WORKFLOW ARGS_JSON]`).

The store is opened with `gate_irreversible=True` everywhere, so an irreversible tool's call
passes an approval gate bound to its arguments, with its `precheck` and `approvals`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from agents import post

import daybook
from daybook import Context, Daybook


def quoted(args: dict[str, Any]) -> dict[str, Any]:
    """The facts the approver sees: the price the quote file holds now."""
    return {"price": json.loads(Path(args["quote"]).read_text())["price"]}


@daybook.tool(irreversible=True, precheck=quoted)
def buy(*, bank: str, n: int, quote: str, idempotency_key: str) -> Any:
    """A purchase at a price that moves: gated, with the price re-read after the approval."""
    return post(f"{bank}/payments", {"n": n}, idempotency_key)


@daybook.tool(irreversible=True, approvals=2)
def wire(*, bank: str, n: int, idempotency_key: str) -> Any:
    """A wire that needs two distinct approvers (four eyes)."""
    return post(f"{bank}/payments", {"n": n}, idempotency_key)


@daybook.workflow(name="approvals.expiring")
def expiring(
    ctx: Context, on_timeout: str, timeout: float, escalate_to: list[Any] | None = None
) -> dict[str, Any]:
    verdict = ctx.gate(
        "drop_table", approvers=["alice"], timeout=timeout, on_timeout=on_timeout, escalate_to=escalate_to
    )
    return {"outcome": verdict.outcome, "by": verdict.approver, "gate": verdict.gate_id}


@daybook.workflow(name="approvals.purchase")
def purchase(ctx: Context, bank: str, quote: str) -> dict[str, Any]:
    try:
        paid = ctx.effect(buy, bank=bank, n=1, quote=quote)
    except daybook.ReleaseDeclined as exc:
        return {"paid": None, "why": str(exc)}
    return {"paid": paid["id"]}


@daybook.workflow(name="approvals.four_eyes")
def four_eyes(ctx: Context, bank: str) -> dict[str, Any]:
    try:
        paid = ctx.effect(wire, bank=bank, n=7)
    except daybook.ReleaseDeclined as exc:
        return {"paid": None, "why": str(exc)}
    return {"paid": paid["id"]}


@daybook.workflow(name="approvals.two_of")
def two_of(ctx: Context) -> dict[str, Any]:
    verdict = ctx.gate("deploy", approvals=2, timeout=None)
    return {"outcome": verdict.outcome, "approvers": list(verdict.approvers)}


def main() -> None:
    from crashpoint import report, take

    db, action, run_id, *rest = sys.argv[1:]
    inline = take(rest, "--inline-wait")
    book = Daybook(
        db, lease_ttl=1.0, inline_wait=0.05 if inline is None else float(inline), gate_irreversible=True
    )
    flows = {"expiring": expiring, "purchase": purchase, "four_eyes": four_eyes, "two_of": two_of}

    def run() -> object:
        if action == "start":
            return book.run(flows[rest[0]], *json.loads(rest[1]), run_id=run_id)
        return book.resume(run_id)

    report(run)


if __name__ == "__main__":
    main()
