"""A LangGraph graph driven by a daybook run under a budget, as its own process (the LangGraph
budget tests' child):

    langgraph_cost_child.py DB RUN_ID CAPS_JSON ON_CAP [--resume] [--die-at-call N]

The run `RUN_ID` caps its budget and invokes a graph whose chat node asks a scripted model three
times (thread `RUN_ID`, checkpointed in $CHECKPOINTS). The model reports its usage (30 tokens in,
5 out, model `scripted-lg`) and appends a line to $MODEL_CALLS each time it is asked (the
counterparty's own count); `--die-at-call N` SIGKILLs the process inside the N-th model call,
after its reservation was journaled and before its completion was. Prints one JSON line: the
run's result, or the error it stopped with."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph

import daybook
from daybook.integrations.langgraph import DurableChatModel

PRICES = {"scripted-lg": {"input": 1.0, "output": 2.0}}  # USD per million tokens
CALLS = 3  # model calls the graph makes


class Reporting(FakeMessagesListChatModel):
    """A model that reports its usage as a real one does, and counts what it was asked."""

    model_name: str = "scripted-lg"

    def invoke(self, messages: Any, *args: Any, **kwargs: Any) -> BaseMessage:  # type: ignore[override]
        path = Path(os.environ["MODEL_CALLS"])
        with path.open("a") as f:
            f.write("call\n")
        if os.environ.get("DIE_AT_CALL") == str(len(path.read_text().splitlines())):
            os.kill(os.getpid(), 9)  # the reservation is journaled, the completion is not
        usage: Any = {"input_tokens": 30, "output_tokens": 5, "total_tokens": 35}
        meta = {"model_name": "scripted-lg"}
        return AIMessage(content=f"reply to {len(messages)}", usage_metadata=usage, response_metadata=meta)


BOOK: daybook.Daybook | None = None


def graph() -> Any:
    assert BOOK is not None
    model = DurableChatModel(inner=Reporting(responses=[AIMessage(content="x")]), book=BOOK)

    def chat(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"]), HumanMessage(content="go on")]}

    def route(state: MessagesState) -> str:
        return END if len(state["messages"]) > 2 * CALLS else "chat"

    saver = SqliteSaver(sqlite3.connect(os.environ["CHECKPOINTS"], check_same_thread=False))
    builder = StateGraph(MessagesState).add_node("chat", chat).add_edge(START, "chat")
    return builder.add_conditional_edges("chat", route).compile(checkpointer=saver)


@daybook.workflow(name="lg_capped")
def lg_capped(ctx: daybook.Context, caps: dict[str, float], on_cap: str) -> list[str]:
    ctx.budget.cap(on_cap=on_cap, **caps)
    agent = graph()
    config: Any = {"configurable": {"thread_id": ctx.run_id}}
    state = agent.get_state(config)
    if state.next:  # stopped mid-graph (a pause, a crash): go on from the last checkpoint
        values = agent.invoke(None, config)
    elif state.values:  # finished in an earlier execution of this body
        values = state.values
    else:
        values = agent.invoke({"messages": [HumanMessage(content="hello")]}, config)
    return [str(m.content) for m in values["messages"]]


def main() -> None:
    global BOOK
    argv = sys.argv[1:]
    resume = "--resume" in argv
    if resume:
        argv.remove("--resume")
    if "--die-at-call" in argv:
        i = argv.index("--die-at-call")
        os.environ["DIE_AT_CALL"] = argv[i + 1]
        del argv[i : i + 2]
    db, run_id, caps, on_cap = argv
    with daybook.Daybook(db, prices=PRICES, inline_wait=0) as book:
        BOOK = book
        try:
            out: Any = (
                book.resume(run_id)
                if resume
                else book.run(lg_capped, json.loads(caps), on_cap, run_id=run_id)
            )
        except daybook.DaybookError as exc:
            out = {"error": type(exc).__name__, "message": str(exc)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
