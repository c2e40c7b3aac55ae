"""A support agent on the OpenAI Agents SDK that refunds an order, made durable by daybook
(needs `daybook[openai-agents]`; the model is scripted, no API key is used).

    python examples/openai_agents_refund.py --db sqlite:///refunds.db --run r1 --order A-1
    python examples/openai_agents_refund.py --no-daybook --order A-1     # the same agent, plain

The refund tool is a `durable_tool`: its call is an effect keyed `<run id>/<call id>`, with a
status query that asks the refunds ledger (the counterparty) by that key. Kill the process after
the refund landed and before the SDK recorded it, run the same command again: the run resumes,
asks the ledger, and the refund is not paid twice. `--no-daybook` runs the same agent without
daybook: run again after the kill, it pays twice. The ledger is the file $REFUNDS; with
$CRASH_AFTER_REFUND set the tool waits after paying (the window a kill lands in).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

from agents import Agent, FunctionTool, Model, ModelResponse, RunConfig, Runner, Usage, function_tool
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

import daybook
from daybook.integrations.openai_agents import DurableModel, durable_tool, idempotency_key, run_agent

LEDGER = Path(os.environ.get("REFUNDS", "refunds.jsonl"))


def paid() -> list[dict[str, Any]]:
    return [json.loads(x) for x in LEDGER.read_text().splitlines()] if LEDGER.exists() else []


def pay_refund(order: str, amount: float) -> str:
    """Refund `amount` on `order` (the counterparty: one ledger line per refund paid)."""
    line = {"order": order, "amount": amount, "key": idempotency_key(), "pid": os.getpid()}
    with LEDGER.open("a") as f:
        f.write(json.dumps(line) + "\n")
    if os.environ.get("CRASH_AFTER_REFUND"):
        time.sleep(120)  # paid, not yet answered: a kill here is the crash window
    return f"refunded {amount} on {order}"


refund = function_tool(pay_refund, name_override="refund")
# The same tool held for a person's approval by the SDK: daybook turns the hold into a gate.
refund_with_approval = function_tool(pay_refund, name_override="refund", needs_approval=True)


def refund_status(key: str, args: dict[str, Any]) -> daybook.Confirmed | daybook.Absent:
    """Ask the ledger what happened to the refund with key `key`."""
    for line in paid():
        if line["key"] == key:
            return daybook.Confirmed(f"refunded {line['amount']} on {line['order']}")
    return daybook.Absent()


class ScriptedModel(Model):
    """Turn 1: call `refund`; turn 2: say it is done. Counts its calls in $MODEL_CALLS."""

    def __init__(self, order: str) -> None:
        self.order = order

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        calls = Path(os.environ.get("MODEL_CALLS", os.devnull))
        with calls.open("a") as f:
            f.write("call\n")
        answered = isinstance(input, list) and any(
            isinstance(i, dict) and i.get("type") == "function_call_output" for i in input
        )
        if not answered:
            args_json = json.dumps({"order": self.order, "amount": 30.0})
            item: Any = ResponseFunctionToolCall(
                type="function_call",
                call_id="call_1",
                name="refund",
                arguments=args_json,
                id="fc_1",
                status="completed",
            )
        else:
            text = ResponseOutputText(type="output_text", text=f"order {self.order} refunded", annotations=[])
            item = ResponseOutputMessage(
                id="msg_1", type="message", role="assistant", status="completed", content=[text]
            )
        return ModelResponse(output=[item], usage=Usage(requests=1), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


def build(order: str, durable: bool, approval: bool = False) -> Agent[Any]:
    model: Model = DurableModel(ScriptedModel(order)) if durable else ScriptedModel(order)
    plain = refund_with_approval if approval else refund
    tool: FunctionTool = durable_tool(plain, status=refund_status) if durable else plain
    return Agent(name="support", instructions="Refund what the customer asks.", model=model, tools=[tool])


PLAIN = RunConfig(tracing_disabled=True)


@daybook.workflow
async def refund_agent(ctx: daybook.Context, order: str) -> str:
    result = await run_agent(
        ctx, build(order, durable=True), f"please refund order {order}", run_config=PLAIN
    )
    return str(result.final_output)


@daybook.workflow
async def approved_refund_agent(ctx: daybook.Context, order: str) -> str:
    agent = build(order, durable=True, approval=True)
    result = await run_agent(ctx, agent, f"please refund order {order}", approvers=["lead"], run_config=PLAIN)
    return str(result.final_output)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--db", default=None)
    p.add_argument("--run", default=None)
    p.add_argument("--order", default="A-1")
    p.add_argument("--no-daybook", action="store_true")
    p.add_argument("--gated", action="store_true", help="the refund waits for `daybook approve`")
    a = p.parse_args()
    if a.no_daybook:
        out = asyncio.run(
            Runner.run(build(a.order, durable=False), f"please refund order {a.order}", run_config=PLAIN)
        )
        print(out.final_output)
        return
    with daybook.Daybook(a.db, inline_wait=0) as book:
        try:
            print(book.run(approved_refund_agent if a.gated else refund_agent, a.order, run_id=a.run))
        except daybook.Suspended:
            print(f"waiting for approval: {book.approvals()[0]['gate_id']}")


if __name__ == "__main__":
    main()
