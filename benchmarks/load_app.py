"""The workflow the worker load test runs: N payments against the bank, each keyed, reconcilable."""

from __future__ import annotations

from typing import Any

import daybook
from daybook.demo.agent import http_json, status_of


@daybook.tool(reconcile=status_of("payments"))
def load_pay(*, bank: str, n: int, idempotency_key: str) -> Any:
    return http_json("POST", f"{bank}/payments", {"n": n}, idempotency_key)


@daybook.workflow(name="load_run")
def load_run(ctx: daybook.Context, bank: str, effects: int) -> int:
    for n in range(effects):
        ctx.effect(load_pay, bank=bank, n=n)
    return effects
