"""A Pydantic AI agent that refunds an order, made durable by daybook's durability capability
(needs `daybook[pydantic-ai]`; the model is a scripted `FunctionModel`, no API key is used).

    python examples/pydantic_ai_agent.py --db sqlite:///refunds.db --run r1 --order A-1
    python examples/pydantic_ai_agent.py --no-daybook --order A-1     # the same agent, plain

The agent carries `DaybookDurability`: its model requests are recorded decisions and its
refund tool call an effect, with a status query that asks the refunds ledger (the counterparty,
the file $REFUNDS) by the call's key. Kill the process after the refund landed and before the
agent got the answer ($CRASH_AFTER_REFUND makes the tool wait there), run the same command again:
the run resumes, asks the ledger, and the refund is not paid twice. `--no-daybook`: run again
after the kill, it pays twice.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

import daybook
from daybook.integrations.pydantic_ai import DaybookDurability, ToolProfile, idempotency_key, run_agent

LEDGER = Path(os.environ.get("REFUNDS", "refunds.jsonl"))


def paid() -> list[dict[str, Any]]:
    return [json.loads(x) for x in LEDGER.read_text().splitlines()] if LEDGER.exists() else []


def refund(order: str, amount: float) -> str:
    """Refund `amount` on `order` (the counterparty: one ledger line per refund paid)."""
    line = {"order": order, "amount": amount, "key": idempotency_key(), "pid": os.getpid()}
    with LEDGER.open("a") as f:
        f.write(json.dumps(line) + "\n")
    if os.environ.get("CRASH_AFTER_REFUND"):
        time.sleep(120)  # paid, not yet answered: a kill here is the crash window
    return f"refunded {amount} on {order}"


def refund_status(key: str, args: dict[str, Any]) -> daybook.Confirmed | daybook.Absent:
    """Ask the ledger what happened to the refund with key `key`."""
    for line in paid():
        if line["key"] == key:
            return daybook.Confirmed(f"refunded {line['amount']} on {line['order']}")
    return daybook.Absent()


def scripted(order: str) -> FunctionModel:
    """Turn 1: call `refund`; turn 2: say it is done. Counts its calls in $MODEL_CALLS."""

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        with Path(os.environ.get("MODEL_CALLS", os.devnull)).open("a") as f:
            f.write("call\n")
        answered = any(getattr(p, "part_kind", "") == "tool-return" for m in messages for p in m.parts)
        if answered:
            return ModelResponse(parts=[TextPart(f"order {order} refunded")])
        args = {"order": order, "amount": 30.0}
        return ModelResponse(parts=[ToolCallPart("refund", args, tool_call_id="call_1")])

    return FunctionModel(reply)


def build(order: str, durable: bool, approval: bool = False) -> Agent[None, Any]:
    profiles = {"refund": ToolProfile(status=refund_status)}
    capabilities = [DaybookDurability(tools=profiles)] if durable else []
    output: Any = [str, DeferredToolRequests] if approval else str
    agent: Agent[None, Any] = Agent(
        scripted(order), name="support", capabilities=capabilities, output_type=output
    )
    agent.tool_plain(requires_approval=approval)(refund)
    return agent


@daybook.workflow
async def refund_agent(ctx: daybook.Context, order: str) -> str:
    result = await run_agent(ctx, build(order, durable=True), f"please refund order {order}")
    return str(result.output)


@daybook.workflow
async def approved_refund_agent(ctx: daybook.Context, order: str) -> str:
    agent = build(order, durable=True, approval=True)
    result = await run_agent(ctx, agent, f"please refund order {order}", approvers=["lead"])
    return str(result.output)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="sqlite:///refunds.db")
    parser.add_argument("--run", default="refund-1")
    parser.add_argument("--order", default="A-1")
    parser.add_argument("--no-daybook", action="store_true")
    opts = parser.parse_args()
    if opts.no_daybook:
        agent = build(opts.order, durable=False)
        print(asyncio.run(agent.run(f"please refund order {opts.order}")).output)
        return
    with daybook.Daybook(opts.db) as book:
        print(book.run(refund_agent, opts.order, run_id=opts.run))


if __name__ == "__main__":
    main()
