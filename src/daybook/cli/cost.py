"""The cost ledger on the command line: `daybook cost RUN [--tree] [--json] [--prices FILE]`."""

from __future__ import annotations

import click

from .. import Daybook
from ..books.cost import Cost, CostLine, totals_text
from ..books.cost import cost as cost_ledger
from ..journal.price import table as price_table
from . import render
from .app import json_option, json_out, say, with_book


@click.command()
@click.argument("run_id")
@click.option("--tree", is_flag=True, help="The run and every run below it (its child runs).")
@click.option(
    "--prices",
    default=None,
    metavar="FILE",
    help="A price table (JSON, as daybook's prices.json) over the defaults, for model calls "
    "journaled without their cost (by an older daybook); a call's recorded cost is kept.",
)
@json_option("JSON instead of tables: totals, saved, re-spent, models, lines, unpriced.")
@with_book(read_only=True)
def cost(book: Daybook, run_id: str, tree: bool, prices: str | None, as_json: bool) -> None:
    """What a run cost: USD and tokens per model call, step, model and in all, what replay
    saved (model calls not paid again) and what re-runs spent again."""
    book.get_run(run_id)
    ledger = cost_ledger(book.store, run_id, price_table(prices) if prices else book.prices, tree)
    if as_json:
        json_out(ledger.as_dict())
        return
    say(_text(ledger))


def _text(c: Cost) -> str:
    scope = f"run {c.run_id}" + (f" and {len(c.runs) - 1} run(s) below it" if len(c.runs) > 1 else "")
    out = [f"cost of {scope} (prices as of {c.prices_as_of or 'unknown'})"]
    out.append(render.table(["", ""], [[label, value] for label, value in totals_text(c)]))
    if c.models:
        rows = [
            [m.model, str(m.calls), str(m.input_tokens), str(m.output_tokens), _usd(m.usd, m.priced)]
            for m in c.models
        ]
        out.append(render.table(["model", "calls", "in", "out", "usd"], rows))
    if c.lines:
        out.append(
            render.table(["run", "step", "what", "name", "tokens", "usd", "note"], [_row(x) for x in c.lines])
        )
    return "\n\n".join(out)


def _row(x: CostLine) -> list[str]:
    note = x.state
    if x.attempts > 1:
        note += f", made {x.attempts} times (re-spent ${x.respent_usd:.6f})"
    others = ", ".join(f"{k}={v:g}" for k, v in sorted(x.amounts.items()) if k != "usd")
    if others:
        note += f", {others}"
    tokens = str(x.input_tokens + x.output_tokens) if x.kind == "model" else "-"
    return [x.run_id, str(x.step), x.kind, x.name, tokens, _usd(x.usd, x.priced), note]


def _usd(usd: float, priced: bool) -> str:
    return f"${usd:.6f}" if priced else f"${usd:.6f} (unpriced)"


COMMANDS = (cost,)
