"""A workflow that streams a model's reply through `ctx.llm(..., stream="answer")`, shared by the
streams tests and their child processes (tests/stream_child.py)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import daybook
from daybook import Completion, Context, ScriptedLLM

WORDS = 150  # more than a batch (journal.stream.BATCH): the reply commits in several groups


def reply(prompt: str) -> str:
    # A function of the prompt, like a model at temperature 0; $STREAM_REPLY makes another
    # process's model answer otherwise (a re-sampled reply after a crash).
    tag = os.environ.get("STREAM_REPLY", "w")
    return " ".join(f"{tag}{i}" for i in range(WORDS))


class PacedLLM(ScriptedLLM):
    """Gives its pieces at a model's pace, so a reader reads while the reply is written."""

    def stream(self, prompt: str, **params: Any) -> Iterator[str | Completion]:
        for piece in super().stream(prompt, **params):
            time.sleep(0.002)
            yield piece


llm = PacedLLM(reply)


@daybook.workflow
def streamed(ctx: Context, topic: str) -> str:
    """A note, the model's reply streamed to `answer`, another note; returns the reply."""
    notes = ctx.stream("notes")
    notes.write({"topic": topic})
    answer = ctx.llm(llm, f"tell me about {topic}", stream="answer").value
    notes.write({"words": len(str(answer["text"]).split())})
    return str(answer["text"])
