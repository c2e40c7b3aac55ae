"""Workflows the timeline view's tests draw: one run touching every lane (a decision, a model
call, an effect, an obligation, a durable timer, a transaction that aborts once and commits, a
child run), and a long run of many steps."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from agents import book_leg, pay

import daybook
from daybook import Context


@daybook.tool(bufferable=True, idempotent=True, irreversible=False, scopes="fs:{root}/{name}")
def put_file(*, root: str, name: str, content: str, idempotency_key: str) -> str:
    """Write a whole file atomically (a temp file renamed over it)."""
    tmp = Path(root, f".{name}.{os.getpid()}.tmp")
    tmp.write_text(content)
    os.replace(tmp, Path(root, name))
    return name


@daybook.workflow
def helper(ctx: Context, n: int) -> int:
    return ctx.decide("double", lambda: n * 2).value


@daybook.workflow
def every_lane(ctx: Context, bank: str, root: str) -> dict[str, Any]:
    """One of each kind of step, so each lane of the timeline has a bar."""
    plan = ctx.decide("plan", lambda: {"legs": 1, "note": "<img src=x onerror=alert(1)>"})
    ctx.llm(daybook.ScriptedLLM(lambda prompt: "go", model="scripted-1"), "shall we?")
    paid = ctx.effect(pay, decision=plan, bank=bank, n=1)["id"]
    owed = ctx.obligation("confirm", owner="ops", due_in=3600.0, about={"paid": paid})
    ctx.sleep(0.01)
    with ctx.transaction(scopes=[f"fs:{root}/**", "api:bank:**"], retries=2) as tx:
        ctx.effect(put_file, root=root, name="a.txt", content="A")
        ctx.effect(book_leg, bank=bank, n=2, fail_inverse_of=-1)
        if tx.attempt == 1:
            raise RuntimeError("fault injected: the first attempt aborts")
    doubled = ctx.child(helper, 21)
    ctx.fulfil(owed, "confirmed by phone")
    return {"paid": paid, "doubled": doubled, "attempt": tx.attempt}


@daybook.workflow
def many_steps(ctx: Context, n: int) -> int:
    """`n` recorded decisions: the long run the timeline must still draw."""
    total = 0
    for i in range(n):
        total += ctx.decide(f"step-{i % 7}", lambda i=i: i).value
    return total


@daybook.workflow
def needs_a_fix(ctx: Context, flag: str) -> str:
    """A step that raises until the file `flag` exists (the fix): a retry runs it again."""
    ctx.decide("plan", lambda: "read the flag")
    return ctx.decide("read_flag", lambda: Path(flag).read_text()).value
