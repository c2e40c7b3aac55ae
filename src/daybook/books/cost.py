"""The cost ledger: what a run (or a tree of runs) spent on model calls and priced effects, read
from its journal, and what replay saved and what a re-run spent again.

Every figure comes from rows: a model call's recorded row holds its usage and what it cost when
it was made (`Decisions.model_call`; a row from before that is priced with today's table); an
effect's confirmed outcome holds its `cost=`; an explicit `ctx.budget.charge` is its own step.
**Saved**: each execution that replayed recorded model calls wrote, before its first new row or
at its exit, a `run_replayed` row (calls, usd, tokens): those calls were not paid again. A
process killed mid-replay wrote none (nothing is claimed that is not journaled). **Re-spent**: a
model call made again for the same step: a `reserved` row with no completion after it (a crash
cut the call off; the call it made may have been billed: it is estimated at the cost of the call
that was recorded for that step), or a recorded call a recovery superseded (`daybook recover`:
the step ran again; its first cost is known).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from ..journal.decision import RESERVED, is_model_call
from ..journal.price import PriceTable
from ..records import Event, Kind
from ..runtime.tree import descendants
from ..store import Store


@dataclass(frozen=True)
class CostLine:
    """One step's cost: a model call (`kind="model"`, `name` its model), an effect with a cost
    (`"effect"`, its tool) or an explicit charge (`"charge"`). `attempts`: how many times the
    call was made (more than 1: re-spent); `respent_usd` is the part of `usd` those extra runs
    cost (estimated for a call a crash cut off). `state`: settled, failed, in_flight (reserved,
    no completion yet) or superseded (a recovery ran the step again)."""

    run_id: str
    step: int
    kind: str
    name: str
    input_tokens: int = 0
    output_tokens: int = 0
    usd: float = 0.0
    attempts: int = 1
    respent_usd: float = 0.0
    priced: bool = True
    state: str = "settled"
    amounts: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class ModelCost:
    """One model's calls in the ledger: how many, their tokens and USD (0 if unpriced)."""

    model: str
    calls: int
    input_tokens: int
    output_tokens: int
    usd: float
    priced: bool


@dataclass(frozen=True)
class Cost:
    """What a run (or, with `tree`, the run and every run below it) cost: `usd` and `tokens`
    paid in all (model calls, effects with a cost, explicit charges; re-spent calls included),
    per model, per step (`lines`); `saved_*`: what replayed model calls did not cost again;
    `respent_*`: what model calls made again cost; `unpriced`: models the price table does not
    know (their tokens count, their USD is 0); `other`: amounts by name that are not usd."""

    run_id: str
    runs: tuple[str, ...]
    usd: float
    tokens: int
    input_tokens: int
    output_tokens: int
    calls: int
    saved_calls: int
    saved_usd: float
    saved_tokens: int
    respent_calls: int
    respent_usd: float
    respent_tokens: int
    models: tuple[ModelCost, ...]
    lines: tuple[CostLine, ...]
    unpriced: tuple[str, ...]
    other: dict[str, float]
    prices_as_of: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Call:
    """One model-call step as its rows tell it (attempts, the recorded completion)."""

    step: int
    attempts: int = 0
    open: bool = False  # a reserved row not (yet) followed by its completion
    lost: int = 0  # attempts a crash cut off
    row: Event | None = None
    superseded: list[Event] = field(default_factory=list)
    failed: bool = False


def cost(store: Store, run_id: str, prices: PriceTable, tree: bool = False) -> Cost:
    """The cost ledger of `run_id` (with `tree`, of it and every run below it)."""
    runs = [run_id] + ([r.run_id for r in descendants(store, run_id)] if tree else [])
    lines: list[CostLine] = []
    saved = {"calls": 0.0, "usd": 0.0, "tokens": 0.0}
    for rid in runs:
        events = [ev for ev in store.load(rid) if ev.run_id == rid]  # a fork's shared rows: its parent's
        lines.extend(_lines(rid, events, prices))
        for ev in events:
            if ev.kind == Kind.RUN_REPLAYED:
                for k in saved:
                    saved[k] += float(ev.data.get(k) or 0.0)
    return _totals(run_id, runs, lines, saved, prices)


def _lines(run_id: str, events: list[Event], prices: PriceTable) -> list[CostLine]:
    calls: dict[int, _Call] = {}
    other: list[CostLine] = []
    for ev in events:
        if ev.kind == Kind.DECISION and ev.step is not None and (is_model_call(ev) or ev.step in calls):
            _note_call(calls.setdefault(ev.step, _Call(ev.step)), ev)
        elif ev.kind == Kind.RUN_RETRIED and ev.data.get("supersede"):
            for step in ev.data["supersede"]:
                call = calls.get(int(step))
                if call is not None and call.row is not None:
                    call.superseded.append(call.row)  # paid, and the step runs again
                    call.row = None
        elif ev.kind == Kind.OUTCOME and ev.status == "confirmed" and isinstance(ev.data.get("cost"), dict):
            other.append(_priced_line(run_id, ev, "effect", ev.name, ev.data["cost"]))
        elif ev.kind == Kind.DECISION and ev.name == "budget:charge" and ev.status == "recorded":
            other.append(_priced_line(run_id, ev, "charge", "charge", ev.data.get("value")))
    model_lines = [_call_line(run_id, call, prices) for call in calls.values()]
    return sorted(model_lines + other, key=lambda line: line.step)


def _note_call(call: _Call, ev: Event) -> None:
    if ev.status == RESERVED:
        if call.open:
            call.lost += 1  # the previous attempt never got its completion recorded
        call.attempts += 1
        call.open = True
        return
    if not call.open:
        call.attempts += 1  # a row from before reservations: one call, recorded
    call.open = False
    if ev.status == "recorded":
        call.row = ev
    else:
        call.failed = True


def _usage(row: Event, prices: PriceTable) -> tuple[str, int, int, float, bool]:
    """(model, input tokens, output tokens, usd, priced) of a recorded model call."""
    # A framework's call records what its SDK reported beside its value (`ctx.model_call`).
    raw = row.data.get("usage") if isinstance(row.data.get("usage"), dict) else row.data.get("value")
    value: dict[str, Any] = raw if isinstance(raw, dict) else {}
    model = str(value.get("model") or "")
    inp, out = _int(value.get("input_tokens")), _int(value.get("output_tokens"))
    charged = row.data.get("cost")
    if isinstance(charged, dict) and "usd" in charged:
        return model, inp, out, float(charged["usd"]), bool(row.data.get("priced"))
    usd, priced = prices.cost(model, inp, out)  # recorded before the runtime priced calls
    return model, inp, out, usd, priced


def _call_line(run_id: str, call: _Call, prices: PriceTable) -> CostLine:
    paid = [_usage(r, prices) for r in call.superseded]
    final = _usage(call.row, prices) if call.row is not None else None
    # A call a crash cut off is estimated at what the step's recorded call cost.
    estimate = final or (paid[-1] if paid else None)
    lost = call.lost * (estimate[3] if estimate else 0.0)
    respent = lost + sum(p[3] for p in paid[: len(paid) - (0 if final else 1)])
    every = paid + ([final] if final else [])
    model = estimate[0] if estimate else "?"
    state = "settled" if final else "superseded" if paid else "failed" if call.failed else "in_flight"
    return CostLine(
        run_id=run_id,
        step=call.step,
        kind="model",
        name=model,
        input_tokens=sum(p[1] for p in every) + call.lost * (estimate[1] if estimate else 0),
        output_tokens=sum(p[2] for p in every) + call.lost * (estimate[2] if estimate else 0),
        usd=sum(p[3] for p in every) + lost,
        attempts=call.attempts,
        respent_usd=respent,
        priced=all(p[4] for p in every) if every else False,
        state=state,
    )


def _priced_line(run_id: str, ev: Event, kind: str, name: str, raw: Any) -> CostLine:
    amounts = {
        str(k): float(v)
        for k, v in (raw or {}).items()
        if isinstance(v, int | float) and not isinstance(v, bool)
    }
    return CostLine(
        run_id=run_id,
        step=ev.step or 0,
        kind=kind,
        name=name,
        input_tokens=0,
        output_tokens=0,
        usd=amounts.get("usd", 0.0),
        amounts=amounts,
    )


def _totals(
    run_id: str, runs: list[str], lines: list[CostLine], saved: dict[str, float], prices: PriceTable
) -> Cost:
    models: dict[str, list[CostLine]] = {}
    for line in lines:
        if line.kind == "model" and line.state != "in_flight":
            models.setdefault(line.name, []).append(line)
    per_model = tuple(
        ModelCost(
            model=name,
            calls=sum(x.attempts for x in got),
            input_tokens=sum(x.input_tokens for x in got),
            output_tokens=sum(x.output_tokens for x in got),
            usd=sum(x.usd for x in got),
            priced=all(x.priced for x in got),
        )
        for name, got in sorted(models.items())
    )
    respent = [x for x in lines if x.kind == "model" and x.attempts > 1]
    other: dict[str, float] = {}
    for line in lines:
        for k, v in line.amounts.items():
            if k not in ("usd", "tokens"):
                other[k] = other.get(k, 0.0) + v
    inp = sum(m.input_tokens for m in per_model)
    out = sum(m.output_tokens for m in per_model)
    return Cost(
        run_id=run_id,
        runs=tuple(runs),
        usd=sum(x.usd for x in lines),
        tokens=inp + out,
        input_tokens=inp,
        output_tokens=out,
        calls=sum(m.calls for m in per_model),
        saved_calls=int(saved["calls"]),
        saved_usd=saved["usd"],
        saved_tokens=int(saved["tokens"]),
        respent_calls=sum(x.attempts - 1 for x in respent),
        respent_usd=sum(x.respent_usd for x in lines),
        respent_tokens=sum(_respent_tokens(x) for x in respent),
        models=per_model,
        lines=tuple(lines),
        unpriced=tuple(sorted({m.model for m in per_model if not m.priced})),
        other=other,
        prices_as_of=prices.as_of,
    )


def _respent_tokens(line: CostLine) -> int:
    """The tokens of the extra runs of a call made `attempts` times (each about the same)."""
    return (line.input_tokens + line.output_tokens) * (line.attempts - 1) // max(line.attempts, 1)


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def totals_text(c: Cost) -> Iterable[tuple[str, str]]:
    """The ledger's headline figures as (label, value) pairs (the CLI and the web page)."""
    yield (
        "spent",
        f"${c.usd:.6f} ({c.tokens} tokens: {c.input_tokens} in, {c.output_tokens} out; {c.calls} calls)",
    )
    yield (
        "saved by replay",
        f"${c.saved_usd:.6f} ({c.saved_tokens} tokens, {c.saved_calls} calls not paid again)",
    )
    yield "re-spent", f"${c.respent_usd:.6f} ({c.respent_tokens} tokens, {c.respent_calls} calls made again)"
    if c.unpriced:
        yield (
            "unpriced models",
            ", ".join(c.unpriced) + " (tokens counted, 0 USD: add them to the price table)",
        )
    for name, amount in sorted(c.other.items()):
        yield name, f"{amount:g}"
