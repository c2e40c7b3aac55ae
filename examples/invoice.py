"""An invoice as one atomic multi-record commit, and that commit as one effect (T9).

A billing agent creates invoices: the invoice header and each of its lines are records in the
store, written together in one commit (all of them visible at once, or none) with one audit entry.
The tool that makes the commit is one effect of the run, under one idempotency key, and the commit
is keyed by that same key: a resume after a crash between the commit and its journaled outcome,
or a second call under the key, returns the same commit instead of making a second invoice. The
commit id is the effect's counterparty reference.

    DAYBOOK_DB=sqlite:///invoices.db python examples/invoice.py [NUMBER]

The store comes from $DAYBOOK_DB (a temporary SQLite file when unset): the tool commits into it.
"""

from __future__ import annotations

import os
import sys
import tempfile
from typing import Any

import daybook

DB = os.environ.get("DAYBOOK_DB") or f"sqlite:///{tempfile.mkdtemp(prefix='daybook-invoice-')}/journal.db"
book = daybook.Daybook(DB)


def write_invoice(tx: daybook.Transaction, number: str, lines: list[dict[str, Any]]) -> float:
    """Stage the invoice's lines and its header; the executor computes the totals."""
    if not lines or any("unit_price" not in ln or "description" not in ln for ln in lines):
        raise ValueError("lines must be non-empty, each with a description and a unit_price")
    total = 0.0
    for i, line in enumerate(lines, 1):
        qty = line.get("qty", 1)
        line_total = round(qty * line["unit_price"], 2)
        total += line_total
        tx.put("lines", f"{number}/{i}", {**line, "qty": qty, "line_total": line_total})
    tx.put("invoices", number, {"total": round(total, 2), "lines": len(lines)})
    return round(total, 2)


create_invoice = book.commit_tool(
    write_invoice,
    message="Create invoice {number}",
    author="billing-agent",
    name="create_invoice",
)


@daybook.workflow(name="bill")
def bill(ctx: daybook.Context, number: str, lines: list[dict[str, Any]]) -> dict[str, Any]:
    """Create the invoice (one commit, one effect), then report what was committed."""
    made = ctx.effect(create_invoice, number=number, lines=lines)
    return {"commit_id": made["commit_id"], "total": made["result"], "records": len(made["records"])}


LINES = [
    {"description": "seats", "qty": 10, "unit_price": 150},
    {"description": "setup", "unit_price": 350},
    {"description": "discount", "unit_price": -100},
]


def main() -> None:
    number = sys.argv[1] if len(sys.argv) > 1 else "INV-1"
    result = book.run(bill, number, LINES, run_id=f"bill-{number}")
    print("result:", result)
    [effect] = [e for e in book.effects(f"bill-{number}")]
    print(f"effect {effect['key']}: reference {effect['ref']}")
    print("commits:", len(book.commits()))
    print("invoice:", book.record("invoices", number))


if __name__ == "__main__":
    main()
