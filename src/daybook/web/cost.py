"""The cost section of a run's page: what the run cost, what replay saved, what re-runs spent
again, per model (`books.cost`, as `daybook cost RUN` prints it). Built by `html`: escaped."""

from __future__ import annotations

from ..book import Daybook
from ..books.cost import totals_text
from .html import Markup, table, tag


def cost_section(book: Daybook, run_id: str) -> Markup:
    """Totals and per-model lines; nothing when the run made no model call and paid nothing."""
    ledger = book.cost(run_id)
    if not ledger.lines:
        return Markup("")
    totals = table(["", ""], ([label, value] for label, value in totals_text(ledger)))
    models = table(
        ["model", "calls", "input tokens", "output tokens", "usd"],
        (
            [
                m.model,
                str(m.calls),
                str(m.input_tokens),
                str(m.output_tokens),
                f"{m.usd:.6f}" + ("" if m.priced else " (unpriced)"),
            ]
            for m in ledger.models
        ),
    )
    note = tag(
        "p", f"prices as of {ledger.prices_as_of or 'unknown'}; `daybook cost {run_id}` lists each step"
    )
    return tag("section", tag("h2", "Cost"), totals, models, note, id="cost")
