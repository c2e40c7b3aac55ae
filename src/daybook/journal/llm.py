"""The pluggable model client: a protocol any LLM SDK can be wrapped in, and a scripted client.

daybook never calls a model itself; `ctx.llm(client, prompt)` records what the client returned,
so replay never samples the model again. Tests and the demo use `ScriptedLLM`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import ConfigError


@dataclass(frozen=True)
class Completion:
    text: str
    model: str
    input_tokens: int = 0
    output_tokens: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "model": self.model,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
        }


class LLMClient(Protocol):
    model: str

    def complete(self, prompt: str, **params: Any) -> Completion: ...


class ScriptedLLM:
    """Answers from a script: a list of replies in order, or a function of the prompt; and in
    pieces (`stream`, for `ctx.llm(..., stream=NAME)`): its words, then the `Completion`.

    `calls` counts real invocations, so a test can show that replay made none. A list is read
    in order within one process: a process that resumes a run after recorded model calls starts
    the list from the top again. For crash tests give a function of the prompt, which, like a
    real model, depends only on what it is asked.
    """

    def __init__(self, replies: Sequence[str] | Callable[[str], str], model: str = "scripted-1") -> None:
        self.model = model
        self._replies = replies
        self.calls = 0

    def complete(self, prompt: str, **params: Any) -> Completion:
        if callable(self._replies):
            text = self._replies(prompt)
        else:
            if self.calls >= len(self._replies):
                raise ConfigError(
                    f"ScriptedLLM ran out of replies after {self.calls} calls; add more replies"
                )
            text = self._replies[self.calls]
        self.calls += 1
        return Completion(
            text=text,
            model=self.model,
            input_tokens=len(prompt.split()),
            output_tokens=len(text.split()),
        )

    def stream(self, prompt: str, **params: Any) -> Iterator[str | Completion]:
        """The reply as a streaming model gives it: its words (each with the space after it),
        then the whole `Completion` (one call, counted in `calls`)."""
        done = self.complete(prompt, **params)
        yield from _PIECES.findall(done.text)
        yield done


_PIECES = re.compile(r"\s+|\S+\s*")  # a leading space on its own, then each word with its space
