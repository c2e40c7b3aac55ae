"""What a run cost, on its page and as a picture: the cost section of a run's page (what the run
cost, what replay saved, what re-runs spent again, per model: `books.cost`, as `daybook cost
RUN` prints it) and the cost view (`/runs/RUN?view=cost`): spend against caps for the run and
its tree, and per quantity a chart of the spend accumulated over the run's steps against the cap
line, with each model's share. Built by `html`: escaped."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from ..book import Daybook
from ..books.cost import totals_text
from ..coordination.budget import charged, paused_at_cap
from ..journal.decision import is_model_call
from ..records import Event, Kind, Status
from .html import Markup, join, table, tag
from .views import Query, View, register


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


# -- the cost view (`/runs/RUN?view=cost`) ------------------------------------------------------

LEDGER_FIELDS = (
    "usd",
    "tokens",
    "input_tokens",
    "output_tokens",
    "calls",
    "saved_calls",
    "saved_usd",
    "saved_tokens",
    "respent_calls",
    "respent_usd",
    "respent_tokens",
)


def data(book: Daybook, run_id: str, query: Query) -> dict[str, Any]:
    """What the chart draws: per quantity (usd, tokens, ...) the run's spend accumulated over its
    steps, the cap in force at each step (a raise moves it), and each model's share; the ledger's
    totals (saved by replay, re-spent); and the same spent-against-caps for every run of its tree."""
    info = book.get_run(run_id)
    events = [ev for ev in book.journal(run_id) if ev.run_id == info.run_id]  # a fork's own rows
    ledger = book.cost(run_id)
    tree = book.cost(run_id, tree=True)
    books = {rid: book.budget(rid) for rid in tree.runs}
    runs = [{"run_id": rid, **got} for rid, got in books.items()]
    # What the whole tree spent: a child's spend counts against this run's caps too (H8).
    tree_spent: dict[str, float] = {}
    for got in books.values():
        for q, v in got["spent"].items():
            tree_spent[q] = tree_spent.get(q, 0.0) + v
    return {
        "run": run_id,
        "budget": books[run_id],
        "paused": paused_at_cap(events),
        "series": _series(events),
        "ledger": {k: getattr(ledger, k) for k in LEDGER_FIELDS},
        "models": [asdict(m) for m in ledger.models],
        # Steps whose model call was made more than once: a crash cut one off after its
        # reservation (estimated at the recorded call's cost), or a recovery ran it again.
        "respent": [
            {
                "step": line.step,
                "model": line.name,
                "attempts": line.attempts,
                "usd": line.respent_usd,
                "state": line.state,
            }
            for line in ledger.lines
            if line.kind == "model" and (line.attempts > 1 or line.respent_usd > 0)
        ],
        "prices_as_of": ledger.prices_as_of,
        "unpriced": list(ledger.unpriced),
        "tree": {
            "runs": runs,
            "spent": tree_spent,
            **{k: getattr(tree, k) for k in LEDGER_FIELDS},
        },
    }


def _series(events: list[Event]) -> dict[str, dict[str, Any]]:
    """{quantity: {"spent": [[step, total so far]], "cap": [[step, cap]], "models": {model:
    [[step, total so far]]}}}, one point per row that charged the budget, in journal order."""
    caps: dict[str, float] = {}
    spent: dict[str, float] = {}
    by_model: dict[str, dict[str, float]] = {}
    out: dict[str, dict[str, Any]] = {}

    def line(q: str) -> dict[str, Any]:
        return out.setdefault(q, {"spent": [[0, 0.0]], "cap": [], "models": {}})

    for ev in events:
        step = ev.step or 0
        moved = _caps_moved(ev, caps)
        for q in moved:
            line(q)["cap"].append([step, caps[q]])
        if moved:
            continue
        amounts = charged(ev) if ev.kind in (Kind.DECISION, Kind.OUTCOME) else {}
        model = _model_of(ev) if amounts and ev.kind == Kind.DECISION else None
        for q, v in amounts.items():
            spent[q] = spent.get(q, 0.0) + v
            got = line(q)
            got["spent"].append([step, spent[q]])
            if q in caps:
                got["cap"].append([step, caps[q]])
            if model is not None:
                mine = by_model.setdefault(q, {})
                mine[model] = mine.get(model, 0.0) + v
                got["models"].setdefault(model, [[0, 0.0]]).append([step, mine[model]])
    return out


def _caps_moved(ev: Event, caps: dict[str, float]) -> list[str]:
    """The caps a row sets (`budget:cap`) or raises (a raise received), updated in `caps`."""
    if ev.kind == Kind.DECISION and ev.status == Status.RECORDED and ev.name == "budget:cap":
        given = {q: float(v) for q, v in (ev.data.get("value") or {}).items() if q != "on_cap"}
        caps.update(given)
        return list(given)
    if ev.kind == Kind.SIGNAL and ev.name == "signal:budget:raise" and ev.status == "received":
        raised = {q: float(v) for q, v in (ev.data.get("payload") or {}).items()}
        for q, v in raised.items():
            caps[q] = caps.get(q, 0.0) + v
        return list(raised)
    return []


def _model_of(ev: Event) -> str | None:
    """The model a charged decision row called (`ctx.llm`'s completion, or a framework's usage)."""
    if not is_model_call(ev):
        return None
    usage = ev.data.get("usage")
    value = usage if isinstance(usage, dict) else ev.data.get("value")
    return str(value.get("model") or "?") if isinstance(value, dict) else "?"


def _money(value: float) -> str:
    return f"{value:.6f}"


def shell(book: Daybook, run_id: str, query: Query) -> Markup:
    """Spent against each cap (this run, its tree), the ledger's totals, per model; the charts'
    places (spent over steps with the cap line, per quantity)."""
    found = data(book, run_id, query)
    budget = found["budget"]
    names = sorted(set(budget["caps"]) | set(budget["spent"]) | set(found["series"]))
    tree_spent = found["tree"]["spent"]
    caps_rows = [
        [
            q,
            f"{budget['spent'].get(q, 0.0):g}",
            f"{tree_spent.get(q, 0.0):g}",
            f"{budget['caps'][q]:g}" if q in budget["caps"] else "no cap",
            _share(budget["spent"].get(q, 0.0), budget["caps"].get(q)),
            _share(tree_spent.get(q, 0.0), budget["caps"].get(q)),
        ]
        for q in names
    ]
    led = found["ledger"]
    totals = [
        ["spent", f"${_money(led['usd'])}", f"{led['tokens']} tokens", f"{led['calls']} calls"],
        [
            "saved by replay",
            f"${_money(led['saved_usd'])}",
            f"{led['saved_tokens']} tokens",
            f"{led['saved_calls']} calls",
        ],
        [
            "re-spent",
            f"${_money(led['respent_usd'])}",
            f"{led['respent_tokens']} tokens",
            f"{led['respent_calls']} calls",
        ],
    ]
    tree = found["tree"]
    tree_rows = [
        [
            r["run_id"],
            ", ".join(f"{q} {v:g}" for q, v in sorted(r["spent"].items())) or "-",
            ", ".join(f"{q} {v:g}" for q, v in sorted(r["caps"].items())) or "-",
        ]
        for r in tree["runs"]
    ]
    parts: list[Any] = []
    if found["paused"]:
        parts.append(tag("p", "paused at a cap: ", found["paused"], class_="flash error", id="cost-paused"))
    parts += [
        tag("h2", "Spent against caps"),
        table(
            ["quantity", "spent by the run", "spent by its tree", "cap", "run's share", "tree's share"],
            caps_rows,
            id="cost-caps",
        )
        if caps_rows
        else tag("p", "This run set no cap and charged nothing.", id="cost-caps"),
        *(
            tag(
                "div",
                id=f"cost-chart-{q}",
                class_="chart",
                data_quantity=q,
                role="img",
                aria_label=f"{q} spent over steps against its cap",
            )
            for q in sorted(found["series"], key=lambda q: (q not in budget["caps"], q))  # capped first
        ),
        tag("h2", "Totals"),
        table(["", "usd", "tokens", "model calls"], totals, id="cost-totals"),
        *(
            [
                tag("h2", "Calls made again (re-spent)"),
                table(
                    ["step", "model", "times made", "usd re-spent", "state"],
                    (
                        [r["step"], r["model"], r["attempts"], _money(r["usd"]), r["state"]]
                        for r in found["respent"]
                    ),
                    id="cost-respent",
                ),
            ]
            if found["respent"]
            else []
        ),
        tag("h2", "Per model"),
        table(
            ["model", "calls", "input tokens", "output tokens", "usd"],
            (
                [
                    m["model"],
                    m["calls"],
                    m["input_tokens"],
                    m["output_tokens"],
                    _money(m["usd"]) + ("" if m["priced"] else " (unpriced)"),
                ]
                for m in found["models"]
            ),
            id="cost-models",
        ),
        tag("h2", f"The run's tree ({len(tree['runs'])} runs)"),
        table(["run", "spent", "caps"], tree_rows, id="cost-tree"),
        tag(
            "p",
            f"the tree spent ${_money(tree['usd'])} ({tree['tokens']} tokens, {tree['calls']} calls); "
            f"replay saved ${_money(tree['saved_usd'])}, re-runs spent ${_money(tree['respent_usd'])} again",
            id="cost-tree-total",
        ),
        tag(
            "p", f"prices as of {found['prices_as_of'] or 'unknown'}; `daybook cost {run_id}` lists each step"
        ),
    ]
    return join(parts)


def _share(spent: float, cap: float | None) -> str:
    if cap is None:
        return "-"
    if cap <= 0:
        return "over" if spent > 0 else "0%"
    # Admission reserves a call's estimate (its prompt); the reply's tokens may carry it past.
    return f"{100 * spent / cap:.0f}%" + (" (over the cap)" if spent > cap + 1e-12 else "")


VIEW = register(View("cost", "Cost", shell, data, "cost.js"))
