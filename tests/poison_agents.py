"""Workflows that produce values a store cannot hold, for tests in this process and for workers.

Each counts its model calls in a file (`calls`: one line per call), so a test can tell one call
from a hot loop by reading the counterparty's side."""

from __future__ import annotations

import json
from typing import Any

import daybook
from daybook import Context


def ask_model(calls: str) -> Any:
    with open(calls, "a") as fh:
        fh.write("model-call\n")
    # A reply cut inside an emoji's escape: json.loads gives a lone surrogate.
    return json.loads('{"text": "Sure \\ud83d"}')


@daybook.workflow
def poison_decide(ctx: Context, calls: str) -> str:
    return str(ctx.decide("plan", ask_model, calls).value["text"])


def count_call(calls: str) -> int:
    with open(calls, "a") as fh:
        fh.write("model-call\n")
    return 1


@daybook.workflow
def one_step(ctx: Context, calls: str) -> int:
    return int(ctx.decide("step", count_call, calls).value)
