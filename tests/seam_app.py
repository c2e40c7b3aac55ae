"""A refund through `daybook.journaled_call`, the integrations' seam: the counterparty is a ledger
file (one JSON line per refund, with the key it was asked under), asked by key when an outcome is
unknown. The card number comes from $CARD and is a secret argument: the journal holds a digest.

    python tests/seam_app.py --db URL --run ID      (prints the run's result as JSON)

With $HANG_AFTER_REFUND set, the process hangs after the ledger line is written and before the
outcome is journaled (the test SIGKILLs it there). Also a `--app` for `daybook worker`.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import daybook
from daybook import Absent, Confirmed, Context


def _ledger() -> Path:
    return Path(os.environ["LEDGER"])


def ledger_lines() -> list[dict[str, Any]]:
    path = _ledger()
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def refund_status(key: str, args: dict[str, Any]) -> Any:
    """The counterparty, asked by key: did a refund under it happen?"""
    for line in ledger_lines():
        if line["key"] == key:
            return Confirmed({"refunded": line["order"], "key": key})
    return Absent()


def pay_refund(order: str, card: str) -> dict[str, Any]:
    key = daybook.idempotency_key()
    with _ledger().open("a") as f:
        f.write(json.dumps({"key": key, "order": order, "card_end": card[-4:]}) + "\n")
        f.flush()
        os.fsync(f.fileno())
    if os.environ.get("HANG_AFTER_REFUND"):
        time.sleep(120)  # refunded; the outcome is not journaled yet (SIGKILLed here)
    return {"refunded": order, "key": key}


def _call_id() -> str:
    # Any code the body calls reaches the run through daybook.current(), no ctx threaded down.
    return f"{daybook.current().run_id}/refund"


@daybook.workflow
def refund(ctx: Context, order: str) -> dict[str, Any]:
    result = daybook.journaled_call(
        ctx,
        "ledger:refund",
        _call_id(),
        pay_refund,
        args={"order": order, "card": os.environ.get("CARD", "none")},
        status=refund_status,
        secrets=("card",),
    )
    return {"result": result}


@daybook.workflow
async def refund_async(ctx: Context, order: str) -> dict[str, Any]:
    async def pay(order: str) -> dict[str, Any]:
        return {"refunded": order, "key": daybook.idempotency_key()}

    result = await daybook.journaled_call(ctx, "ledger:refund_async", None, pay, args={"order": order},
                                          idempotent=True)  # fmt: skip
    return {"result": result, "current": daybook.current() is ctx}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    parser.add_argument("--run", required=True)
    parser.add_argument("--order", default="A-1")
    a = parser.parse_args()
    with daybook.Daybook(a.db) as book:
        print(json.dumps(book.run(refund, a.order, run_id=a.run)), flush=True)


if __name__ == "__main__":
    main()
