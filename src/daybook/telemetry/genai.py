"""What a run's committed journal rows say as spans: names, times, attributes and ids (no
opentelemetry import: `otel.py` hands these plans to the SDK).

A step's span is planned from its rows up to the row that settled it (a decision's only row, an
effect's first confirmed or failed outcome, a wait's fired or received row), so every exporter in
every process plans the same span for it, with the same id. Model calls and tools follow the
OpenTelemetry GenAI semantic conventions:

- a model call (`ctx.llm`, `ctx.model_call`, a framework integration's model step), known by
  what its rows record (a `reserved` row before the call, the `usage` an SDK reported, or a
  completion recorded under `llm` before calls were reserved), not by its step's name: span
  `chat {model}`, kind client, with `gen_ai.operation.name` = `chat`, `gen_ai.provider.name` (the
  recorded `provider`, else guessed from the model's name, else left out),
  `gen_ai.request.model`, `gen_ai.response.model`, `gen_ai.usage.input_tokens`,
  `gen_ai.usage.output_tokens` (a framework call's from its recorded `usage`, `ctx.llm`'s from its
  completion), and `daybook.cost.usd` when the call's cost was recorded; a call that failed is
  span `chat` with `error.type`;
- a tool (`ctx.effect`, and an undo under `comp/<key>` with `daybook.compensation`): span
  `execute_tool {tool}`, with `gen_ai.operation.name` = `execute_tool`, `gen_ai.tool.name`,
  `gen_ai.tool.type` = `function`, `gen_ai.tool.call.id` (the act's idempotency key);
- every step keeps `daybook.run_id`, `daybook.step`, `daybook.status`, `daybook.key`, and for a
  tool `daybook.tool`, `daybook.attempts` and `daybook.ref` (the counterparty's reference).

Content (a completion's text, a tool's arguments and result) is left out unless asked for
(`content=True`, or `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`): then it is the
journal's copy, where a `daybook.Secret` is already its keyed digest, so a secret never reaches a
span in clear. A prompt is not journaled, so no span carries it.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from typing import Any

from ..journal import keys
from ..journal.decision import RESERVED, is_model_call
from ..records import Event, Kind, RunInfo

AttrValue = str | int | float | bool
CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_SETTLED = {"confirmed", "failed"}
_FIRED = {"fired", "received", "timeout"}
ENDS = frozenset({Kind.RUN_COMPLETED, Kind.RUN_FAILED, Kind.RUN_CANCELLED, Kind.RUN_EXPIRED})
# Model names' prefixes and the GenAI registry's provider names they belong to.
_PROVIDERS = (
    ("gpt-", "openai"),
    ("o1", "openai"),
    ("o3", "openai"),
    ("o4", "openai"),
    ("claude", "anthropic"),
    ("gemini", "gcp.gemini"),
    ("mistral", "mistral_ai"),
    ("command", "cohere"),
    ("deepseek", "deepseek"),
    ("grok", "x_ai"),
)


@dataclass(frozen=True)
class Planned:
    """One span to export: what the SDK is handed, ids included."""

    name: str
    client: bool  # a model call (SpanKind.CLIENT); else internal
    start: float
    end: float
    attributes: dict[str, AttrValue]
    error: str | None
    span_id: int
    root: bool = False  # the run's own span: no parent, its id is the trace's root


def content_default() -> bool:
    return os.environ.get(CONTENT_ENV, "").strip().lower() in ("1", "true", "yes")


def trace_ids(run_id: str) -> tuple[int, int]:
    """The run's trace id and root span id, the same in every process."""
    digest = hashlib.sha256(run_id.encode()).digest()
    return int.from_bytes(digest[:16], "big") or 1, int.from_bytes(digest[16:24], "big") or 1


def span_id(run_id: str, what: str) -> int:
    """The id of the span of `what` (a step, a later end) in run `run_id`: the same in every
    process, so a span sent twice (the crash window, docs/observability.md) is one at a collector
    that keeps one span per id."""
    return int.from_bytes(hashlib.sha256(f"{run_id}\x00{what}".encode()).digest()[:8], "big") or 1


def steps_of(events: list[Event]) -> dict[int, list[Event]]:
    by_step: dict[int, list[Event]] = {}
    for ev in events:
        if ev.step is not None:
            by_step.setdefault(ev.step, []).append(ev)
    return by_step


def settling(rows: list[Event]) -> int | None:
    """The index in `rows` of the row that settled the step (None: not settled yet)."""
    first = rows[0]
    for i, row in enumerate(rows):
        if first.kind == Kind.INTENT:
            if row.kind == Kind.OUTCOME and row.status in _SETTLED:
                return i
        elif first.kind in (Kind.TIMER, Kind.SIGNAL):
            if row.status in _FIRED:
                return i
        elif row.status != RESERVED:
            # A model call's reservation, written before the call, settles nothing: the step
            # settles at the recorded (or failed) row after it.
            return i
    return None


def settled(rows: list[Event]) -> bool:
    """Whether a step's rows are final: a decision, a settled effect, a fired wait."""
    return settling(rows) is not None


def plan(info: RunInfo, events: list[Event], after: int, content: bool = False) -> list[Planned]:
    """The spans of what settled past seq `after` (the run's export cursor): each step whose
    settling row is past it, and the run's span for each end row past it."""
    spans: list[Planned] = []
    for step, rows in sorted(steps_of(events).items()):
        at = settling(rows)
        if at is not None and rows[at].seq > after:
            spans.append(_step(info.run_id, step, rows[: at + 1], content))
    ends = [ev for ev in events if ev.kind in ENDS]
    for n, end in enumerate(ends):
        if end.seq > after and events:
            spans.append(_run(info, events[0].at, end, first=n == 0))
    return spans


def _run(info: RunInfo, start: float, end: Event, first: bool) -> Planned:
    attrs: dict[str, AttrValue] = {
        "daybook.run_id": info.run_id,
        "daybook.workflow": info.workflow,
        "daybook.status": _END_STATUS.get(end.kind, str(info.status)),
    }
    error = None
    if end.kind != Kind.RUN_COMPLETED:
        err = end.data.get("error")
        error = str(err.get("message", err) if isinstance(err, dict) else err or end.kind)
    # The first end is the trace's root span; a later one (a retried run ending again) a child.
    sid = trace_ids(info.run_id)[1] if first else span_id(info.run_id, f"end/{end.seq}")
    return Planned(f"daybook.run {info.workflow}", False, start, end.at, attrs, error, sid, root=first)


_END_STATUS: dict[str, str] = {
    Kind.RUN_COMPLETED: "completed",
    Kind.RUN_FAILED: "failed",
    Kind.RUN_CANCELLED: "cancelled",
    Kind.RUN_EXPIRED: "expired",
}


def _step(run_id: str, step: int, rows: list[Event], content: bool) -> Planned:
    first, last = rows[0], rows[-1]
    name, client, attrs = _what(first, last, content)
    attrs.update({"daybook.run_id": run_id, "daybook.step": step, "daybook.status": last.status or ""})
    if first.key:
        attrs["daybook.key"] = first.key
    error = str(last.data.get("error") or "failed") if last.status == "failed" else None
    return Planned(name, client, first.at, last.at, attrs, error, span_id(run_id, f"step/{step}"))


def _what(first: Event, last: Event, content: bool) -> tuple[str, bool, dict[str, AttrValue]]:
    if first.kind == Kind.INTENT:
        return f"execute_tool {first.name}", False, _tool(first, last, content)
    if first.kind in (Kind.TIMER, Kind.SIGNAL):
        return f"daybook.wait {first.name}", False, {}
    if first.name.startswith("gate:"):
        return f"daybook.gate {first.name}", False, {}
    if is_model_call(first) or is_model_call(last):
        attrs = model_call(last.data, content)  # the recorded row (after any reservation)
        attempt = last.data.get("attempt")
        if isinstance(attempt, int) and not isinstance(attempt, bool) and attempt > 1:
            attrs["daybook.attempts"] = attempt  # re-sampled after a crash cut a call off
        model = attrs.get("gen_ai.response.model") or ""
        return f"chat {model}".strip(), True, attrs
    return f"daybook.decision {first.name}", False, {}


def _tool(first: Event, last: Event, content: bool) -> dict[str, AttrValue]:
    attrs: dict[str, AttrValue] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": first.name,
        "gen_ai.tool.type": "function",
        "daybook.tool": first.name,
        "daybook.attempts": max(last.attempt, 1),  # the journal counts attempts from 1
    }
    if first.key:
        attrs["gen_ai.tool.call.id"] = first.key
    if keys.is_compensation(first.key):
        attrs["daybook.compensation"] = True
    ref = last.data.get("ref")
    if isinstance(ref, str | int) and not isinstance(ref, bool):
        attrs["daybook.ref"] = str(ref)
    cost = _cost(last.data) or _cost(first.data)
    if cost is not None:
        attrs["daybook.cost.usd"] = cost
    if content:
        # The journal's copies: a secret in them is already its keyed digest.
        attrs["gen_ai.tool.call.arguments"] = _json(first.data.get("args"))
        if last.kind == Kind.OUTCOME and "result" in last.data:
            attrs["gen_ai.tool.call.result"] = _json(last.data.get("result"))
    return attrs


def model_call(data: dict[str, Any], content: bool = False) -> dict[str, AttrValue]:
    """The GenAI semantic conventions' attributes of a recorded model call (a decision row's data):
    the model and tokens of the `usage` a framework's SDK reported (`ctx.model_call`), else of
    the completion (`ctx.llm`'s value); a failed call's `error.type`."""
    attrs: dict[str, AttrValue] = {"gen_ai.operation.name": "chat"}
    error = data.get("error")
    if isinstance(error, dict) and error.get("type"):
        attrs["error.type"] = str(error["type"])
    value = data.get("value")
    usage = data.get("usage")
    facts = usage if isinstance(usage, dict) else value
    if not isinstance(facts, dict):
        return attrs  # failed, or a completion that is not a dict: no model to name
    model = str(facts.get("model") or "")
    attrs.update(
        {
            "gen_ai.request.model": str(facts.get("request_model") or model),
            "gen_ai.response.model": model,
            "gen_ai.usage.input_tokens": _count(facts.get("input_tokens")),
            "gen_ai.usage.output_tokens": _count(facts.get("output_tokens")),
        }
    )
    provider = facts.get("provider") or _provider(model)
    if provider:
        attrs["gen_ai.provider.name"] = str(provider)
    cost = _cost(data) if usage is not None else _cost(data) or _cost(value)
    if cost is not None:
        attrs["daybook.cost.usd"] = cost
    # Only `ctx.llm`'s completion has a text to show; a framework's value is its SDK's own shape.
    if content and isinstance(value, dict) and usage is None and isinstance(value.get("text"), str):
        message = {"role": "assistant", "parts": [{"type": "text", "content": value["text"]}]}
        attrs["gen_ai.output.messages"] = _json([message])
    return attrs


def _provider(model: str) -> str | None:
    low = model.lower()
    return next((name for prefix, name in _PROVIDERS if low.startswith(prefix)), None)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _cost(data: Any) -> float | None:
    """A recorded cost in USD (the cost ledger's `cost` {"usd": ...} or a flat `cost_usd`)."""
    if not isinstance(data, dict):
        return None
    cost = data.get("cost")
    usd = cost.get("usd") if isinstance(cost, dict) else data.get("cost_usd")
    if isinstance(usd, int | float) and not isinstance(usd, bool):
        return float(usd)
    return None


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
