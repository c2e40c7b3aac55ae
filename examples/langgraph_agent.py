"""A LangGraph ReAct agent that refunds an order, made durable by daybook (needs
`daybook[langgraph]`; the model is scripted, no API key is used).

    python examples/langgraph_agent.py --db sqlite:///refunds.db --thread t1 --order A-1
    python examples/langgraph_agent.py --no-daybook --thread t1 --order A-1   # the same agent, plain

LangGraph keeps the thread in its SQLite checkpointer ($CHECKPOINTS). The refund tool's calls go
through `journaled_tool_calls`, keyed `<thread>/<tool call id>`, with a status query that asks
the refunds ledger (the counterparty, the file $REFUNDS) by that key; the model is wrapped in
`DurableChatModel`, so a resumed thread gets the same reply. Kill the process after the refund
landed and before LangGraph checkpointed it ($CRASH_AFTER_REFUND makes the tool wait there), run
the same command again: LangGraph resumes the thread and re-runs the tool node, daybook asks the
ledger, and the refund is not paid twice. `--no-daybook`: run again after the kill, it pays twice.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import time
import warnings
from pathlib import Path
from typing import Any

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.prebuilt import ToolNode, create_react_agent

import daybook
from daybook.integrations.langgraph import DurableChatModel, idempotency_key, journaled_tool_calls

# create_react_agent moved to langchain.agents in LangGraph 1.0; the prebuilt one still works.
warnings.filterwarnings("ignore", message="create_react_agent has been moved")

LEDGER = Path(os.environ.get("REFUNDS", "refunds.jsonl"))


def paid() -> list[dict[str, Any]]:
    return [json.loads(x) for x in LEDGER.read_text().splitlines()] if LEDGER.exists() else []


@tool
def refund(order: str, amount: float) -> str:
    """Refund `amount` on `order` (the counterparty: one ledger line per refund paid)."""
    line = {"order": order, "amount": amount, "key": idempotency_key(), "pid": os.getpid()}
    with LEDGER.open("a") as f:
        f.write(json.dumps(line) + "\n")
    if os.environ.get("CRASH_AFTER_REFUND"):
        time.sleep(120)  # paid, not yet answered or checkpointed: a kill here is the crash window
    return f"refunded {amount} on {order}"


def refund_status(key: str, args: dict[str, Any]) -> daybook.Confirmed | daybook.Absent:
    """Ask the ledger what happened to the refund with key `key`."""
    for line in paid():
        if line["key"] == key:
            return daybook.Confirmed(f"refunded {line['amount']} on {line['order']}")
    return daybook.Absent()


class Scripted(FakeMessagesListChatModel):
    """Turn 1: call `refund`; turn 2: say it is done. Counts its calls in $MODEL_CALLS."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Scripted:  # type: ignore[override]
        return self  # scripted: it needs no tool schemas

    def invoke(self, messages: Any, *args: Any, **kwargs: Any) -> BaseMessage:  # type: ignore[override]
        with Path(os.environ.get("MODEL_CALLS", os.devnull)).open("a") as f:
            f.write("call\n")
        if any(getattr(m, "type", "") == "tool" for m in messages):
            return AIMessage(content=f"order {self.responses[0].content} refunded")
        order = str(self.responses[0].content)
        call = {"name": "refund", "args": {"order": order, "amount": 30.0}, "id": "call_1"}
        return AIMessage(content="", tool_calls=[call])


def build(order: str, book: daybook.Daybook | None, saver: SqliteSaver) -> Any:
    model: Any = Scripted(responses=[AIMessage(content=order)])
    if book is None:
        return create_react_agent(model, ToolNode([refund]), checkpointer=saver)
    tools = ToolNode([refund], wrap_tool_call=journaled_tool_calls(book, status=refund_status))
    return create_react_agent(DurableChatModel(inner=model, book=book), tools, checkpointer=saver)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="sqlite:///refunds.db")
    parser.add_argument("--thread", default="t1")
    parser.add_argument("--order", default="A-1")
    parser.add_argument("--no-daybook", action="store_true")
    opts = parser.parse_args()
    saver = SqliteSaver(
        sqlite3.connect(os.environ.get("CHECKPOINTS", "checkpoints.db"), check_same_thread=False)
    )
    book = None if opts.no_daybook else daybook.Daybook(opts.db)
    agent = build(opts.order, book, saver)
    config: Any = {"configurable": {"thread_id": opts.thread}}
    # A thread a crash left mid-step resumes from its last checkpoint (and re-runs that step).
    pending = agent.get_state(config).next
    state = agent.invoke(None if pending else {"messages": [("user", f"refund {opts.order}")]}, config)
    print(state["messages"][-1].content)
    if book is not None:
        book.close()


if __name__ == "__main__":
    main()
