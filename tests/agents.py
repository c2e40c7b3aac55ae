"""Workflows and tools the tests run, in the test process and in child processes alike."""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from typing import Any

import daybook
from daybook import Confirmed, Context, NotFound, StillUnknown
from daybook.demo.agent import http_json


def post(url: str, body: Any, key: str) -> Any:
    return http_json("POST", url, body, key)


def status(key: str, args: dict[str, Any]) -> Any:
    try:
        with urllib.request.urlopen(f"{args['bank']}/payments/{key}", timeout=10) as resp:
            return Confirmed(json.loads(resp.read()))
    except urllib.error.HTTPError as exc:
        return NotFound() if exc.code == 404 else StillUnknown()
    except OSError:
        return StillUnknown()


@daybook.tool(reconcile=status, retry=daybook.Retry(max_attempts=5, backoff=0.01))
def pay(*, bank: str, n: int, idempotency_key: str) -> Any:
    """A payment that the bank dedupes by key and can be asked about: reconcilable."""
    return post(f"{bank}/payments", {"n": n}, idempotency_key)


@daybook.tool(retry=daybook.Retry(max_attempts=5, backoff=0.01))
def pay_blind(*, bank: str, n: int, idempotency_key: str) -> Any:
    """A payment with no status query and not declared idempotent: unknowns need a person."""
    return post(f"{bank}/payments", {"n": n}, idempotency_key)


@daybook.tool(idempotent=True, retry=daybook.Retry(max_attempts=5, backoff=0.01))
def pay_idem(*, bank: str, n: int, idempotency_key: str) -> Any:
    """Declared idempotent: an unknown may be re-sent under the same key."""
    return post(f"{bank}/payments", {"n": n}, idempotency_key)


@daybook.tool(reconcile=status, retry=daybook.Retry(max_attempts=3, backoff=0.01))
def slow_pay(*, bank: str, n: int, seconds: float, idempotency_key: str) -> Any:
    time.sleep(seconds)
    return post(f"{bank}/payments", {"n": n}, idempotency_key)


@daybook.workflow
def payments(ctx: Context, bank: str, count: int) -> list[str]:
    """count payments, each keyed by its position; returns the bank's ids."""
    plan = ctx.decide("plan", lambda: list(range(count))).value
    return [ctx.effect(pay, decision=None, bank=bank, n=n)["id"] for n in plan]


@daybook.workflow
def slow_payments(ctx: Context, bank: str, count: int, seconds: float) -> list[str]:
    return [ctx.effect(slow_pay, bank=bank, n=n, seconds=seconds)["id"] for n in range(count)]


@daybook.workflow
def program(ctx: Context, bank: str, ops: list[str]) -> list[Any]:
    """A random mix of decisions ('d') and effects ('e') for the property test."""
    out: list[Any] = []
    for i, op in enumerate(ops):
        if op == "d":
            out.append(ctx.decide(f"d{i}", lambda i=i: i * 7).value)
        else:
            out.append(ctx.effect(pay, bank=bank, n=i)["n"])
    return out


@daybook.workflow
def timed(ctx: Context, bank: str, seconds: float) -> str:
    """Wait on a durable timer, then pay once."""
    ctx.sleep(seconds)
    return str(ctx.effect(pay, bank=bank, n=1)["id"])


@daybook.workflow
def approval(ctx: Context, bank: str) -> dict[str, Any]:
    """Park until someone signals `approve`; pay only if approved."""
    verdict = ctx.wait_for("approve")
    assert verdict is not None
    if not verdict.payload.get("ok"):
        return {"paid": None, "by": verdict.sender}
    return {"paid": ctx.effect(pay, bank=bank, n=1)["id"], "by": verdict.sender}


@daybook.workflow
def restart(ctx: Context, bank: str, timeout: float) -> dict[str, Any]:
    """An SRE-style gated action: restart only after on-call approves and the check still holds."""
    plan = ctx.decide("plan", lambda: {"service": "api", "why": "error rate 12%"})
    verdict = ctx.gate(
        "restart_service",
        decision=plan,
        approvers=["oncall"],
        timeout=timeout,
        precondition=lambda: True,
    )
    if not verdict.approved:
        return {"outcome": verdict.outcome}
    done = ctx.effect(pay, decision=plan, bank=bank, n=1)["id"]
    return {"outcome": "approved", "by": verdict.approver, "done": done}


@daybook.workflow
def spender(ctx: Context, rounds: int) -> dict[str, Any]:
    """Spend $0.04 a round under a $0.10 cap, stopping when the budget refuses (`on_cap="fail"`:
    the admission raises rather than pausing the run for a raise)."""
    ctx.budget.cap(usd=0.10, on_cap="fail")
    for i in range(rounds):
        try:
            ctx.budget.admit(usd=0.04)
        except daybook.BudgetExceeded:
            return {"spent": ctx.budget.spent.get("usd", 0.0), "rounds": i}
        ctx.budget.charge(usd=0.04)
    return {"spent": ctx.budget.spent.get("usd", 0.0), "rounds": rounds}


@daybook.tool(
    reconcile=lambda key, args: _status_in("cancels", key, args),
    retry=daybook.Retry(max_attempts=2, backoff=0.01),
    certain=(ValueError,),  # "past cancellation" is a refusal: nothing was cancelled
)
def cancel_leg(*, original: dict[str, Any], result: dict[str, Any], idempotency_key: str) -> Any:
    if original.get("n") == original.get("fail_inverse_of"):
        raise ValueError(f"leg {original['n']} is past cancellation")
    return post(f"{original['bank']}/cancels", {"cancels": result["id"]}, idempotency_key)


def _status_in(collection: str, key: str, args: dict[str, Any]) -> Any:
    try:
        return Confirmed(http_json("GET", f"{args['original']['bank']}/{collection}/{key}"))
    except urllib.error.HTTPError as exc:
        return NotFound() if exc.code == 404 else StillUnknown()


@daybook.tool(reconcile=status, inverse=cancel_leg)
def book_leg(*, bank: str, n: int, fail_inverse_of: int, idempotency_key: str) -> Any:
    return post(f"{bank}/payments", {"n": n}, idempotency_key)


@daybook.workflow
def saga(ctx: Context, bank: str, legs: int, fail_inverse_of: int, notify: str) -> dict[str, Any]:
    """Book legs, then fail and unwind them newest first (a notional leg that cannot happen)."""
    for n in range(legs):
        ctx.effect(book_leg, bank=bank, n=n, fail_inverse_of=fail_inverse_of)
    if notify == "irreversible":
        ctx.effect(pay_blind, bank=bank, n=99)
    report = ctx.compensate(on_stuck=lambda r: STUCK_ALERTS.append(list(r.stuck)))
    return {"compensated": report.compensated}


STUCK_ALERTS: list[list[str]] = []


@daybook.workflow
def buggy_legs(ctx: Context, bank: str, legs: int, fixed_flag: str) -> dict[str, Any]:
    """Book legs, then hit a bug (a KeyError) until the file `fixed_flag` exists: the fix."""
    booked = [ctx.effect(book_leg, bank=bank, n=n, fail_inverse_of=-1)["id"] for n in range(legs)]
    if not os.path.exists(fixed_flag):
        booked_by_leg: dict[int, str] = {}
        booked.append(booked_by_leg[legs])  # the bug: a lookup that cannot succeed
    return {"booked": booked}


WORLD: dict[str, Any] = {"price": 100}


def _loop(bank: str, scenario: str) -> daybook.AgentLoop:
    """An agent that books two legs then stops; the scenario picks how it is judged."""
    replies = [
        json.dumps(
            {
                "tool": "book_leg",
                "args": {"bank": bank, "n": 0, "fail_inverse_of": -1 if scenario != "stuck" else 0},
                "why": "first leg",
            }
        ),
        json.dumps(
            {
                "tool": "book_leg",
                "args": {"bank": bank, "n": 1, "fail_inverse_of": -1 if scenario != "stuck" else 0},
                "why": "second leg",
            }
        ),
        json.dumps({"tool": "stop"}),
    ]

    def judge(goal: str, history: list[dict[str, Any]]) -> daybook.Judgement:
        if scenario == "ok":
            return daybook.Judgement(True)
        if scenario in ("compensated", "stuck"):
            return daybook.Judgement(False, note="legs do not net to zero")
        return daybook.Judgement(False, confidence=0.4, deterministic=False, note="unsure")

    def reply(prompt: str) -> str:
        # A function of the prompt, like a real (stateless) model: a resumed process that
        # replays the first calls still gets the right next reply.
        return replies[min(int(prompt.rsplit("steps=", 1)[1]), len(replies) - 1)]

    return daybook.AgentLoop(
        llm=daybook.ScriptedLLM(reply),
        tools={"book_leg": book_leg},
        observe=lambda: {"price": WORLD["price"]},
        prompt=lambda goal, obs, history: f"{goal} {json.dumps(obs)} steps={len(history)}",
        judge=judge,
        policy=daybook.Policy(review_timeout=0.3),
        estimate={"usd": 0.01},
        cost=lambda completion: {"usd": 0.01, "tokens": float(completion["output_tokens"])},
    )


@daybook.workflow
def looped(ctx: Context, bank: str, scenario: str) -> dict[str, Any]:
    ctx.budget.cap(usd=1.0)
    return _loop(bank, scenario).run(ctx, "hedge the exposure").as_dict()


# -- the ledgers, the resolver and the HTTP adapter (issue 5) ------------------------------------

BANK_API: dict[str, Any] = {
    "name": "bankapi",
    "base_url": "http://127.0.0.1:1",  # each test passes the bank's real address
    "endpoints": {
        "wire": {
            "method": "POST",
            "path": "/wires",
            "status_path": "/wires/{key}",
            "lookup_path": "/by-id/{ref}",
            "reference": "id",
            "inverse": {"method": "POST", "path": "/reversals"},
        },
        "gl": {"method": "POST", "path": "/gl", "status_path": "/gl/{key}", "reference": "id"},
    },
}


def bank_api(bank: str, **wire: Any) -> Any:
    from daybook.adapters.http import JsonApi

    config = {**BANK_API, "endpoints": {**BANK_API["endpoints"]}}
    config["endpoints"]["wire"] = {**config["endpoints"]["wire"], **wire}
    return JsonApi.from_config(config, base_url=bank)


@daybook.workflow
def http_payout(ctx: Context, bank: str, amount: int, wire: dict[str, Any]) -> dict[str, Any]:
    """Decide a payout under a versioned policy, wire it, post it to the GL (the HTTP adapter)."""
    api = bank_api(bank, **wire)
    plan = ctx.decide(
        "plan",
        lambda: {"to": "ACME", "amount": amount},
        why=daybook.Why(
            policy="payouts",
            version="v3",
            observation={"snapshot": "balances-2026-11-22"},
            alternatives=["hold", "split in two"],
        ),
    )
    sent = api.call(ctx, "wire", to=plan.value["to"], amount=plan.value["amount"])
    gl = api.call(
        ctx, "gl", lines=[{"account": "cash", "amount": -amount}, {"account": "payable", "amount": amount}]
    )
    return {"wire": sent["id"], "gl": gl["id"]}


@daybook.workflow
def close_day(ctx: Context, bank: str, poll: float) -> dict[str, Any]:
    """The closing step: waits at the barrier while any effect in the book is unknown."""
    ctx.barrier(poll=poll)
    return dict(ctx.effect(pay, bank=bank, n=999))


def _touched(args: dict[str, Any]) -> Any:
    try:
        with open(args["path"]) as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return daybook.Absent()
    return daybook.Confirmed({"lines": len(lines)}) if args["line"] in lines else daybook.Absent()


@daybook.tool(accepts_keys=False, verify=_touched)
def append_line(*, path: str, line: str, idempotency_key: str) -> Any:
    """A keyless act (nobody to ask about a key): only looking at the file tells if it happened."""
    with open(path, "a") as f:
        f.write(line + "\n")
    with open(path) as f:
        return {"lines": len(f.read().splitlines())}


@daybook.workflow
def keyless(ctx: Context, path: str) -> Any:
    return ctx.effect(append_line, path=path, line="deployed v2")


@daybook.workflow
def blind(ctx: Context, bank: str) -> Any:
    """One payment with no status query: a dropped reply leaves it unknown until a person says."""
    return ctx.effect(pay_blind, bank=bank, n=1)


# Built at import so `daybook tools --app tests/agents.py` lists the API's endpoints too.
BANK_API_TOOLS = bank_api(BANK_API["base_url"])


@daybook.workflow
async def family(ctx: Context, bank: str, count: int, seconds: float) -> list[list[str]]:
    """Two child runs paying `count` times each, concurrently (child runs, H8)."""
    import asyncio

    kids = [ctx.child(slow_payments, bank, count, seconds), ctx.child(slow_payments, bank, count, seconds)]
    return list(await asyncio.gather(*kids))


@daybook.workflow
def tree_spender(ctx: Context, usd: float) -> float:
    ctx.budget.admit(usd=usd)
    ctx.budget.charge(usd=usd)
    return usd


@daybook.workflow
def household(ctx: Context, cap: float, spends: list[float], on_cap: str | None = None) -> list[Any]:
    """A parent with a budget cap whose children spend against it."""
    ctx.budget.cap(usd=cap, on_cap=on_cap)
    out: list[Any] = []
    for usd in spends:
        try:
            out.append(ctx.child(tree_spender, usd))
        except daybook.StepFailed as exc:
            out.append(str(exc))
    return out


@daybook.workflow
def payments_with(ctx: Context, bank: str, count: int, tool: str) -> list[str]:
    """count payments through `tool` (pay, pay_idem or pay_blind); returns the bank's ids."""
    chosen = {"pay": pay, "pay_idem": pay_idem, "pay_blind": pay_blind}[tool]
    return [ctx.effect(chosen, bank=bank, n=n)["id"] for n in range(count)]


# -- the cost ledger and budgets the runtime enforces (issue 31) ---------------------------------

# 1,000 output tokens a reply: $0.01 a call on gpt-4o's default price ($10 per million out).
LONG_REPLY = " ".join(["word"] * 1000)
PAID_LOOKUPS: list[str] = []  # what the paid counterparty was asked, in this process


def answering(model: str = "gpt-4o") -> daybook.ScriptedLLM:
    """A model whose reply depends only on the prompt (so a process that resumes gets the same)."""
    return daybook.ScriptedLLM(lambda prompt: LONG_REPLY, model=model)


@daybook.workflow
def model_calls(ctx: Context, n: int) -> dict[str, Any]:
    """`n` model calls on a priced model, no cap: what they cost, as the run's budget saw it."""
    llm = answering()
    for i in range(n):
        ctx.llm(llm, f"question {i}")
    return {"spent": ctx.budget.spent}


@daybook.workflow
def capped_calls(ctx: Context, n: int, cap: float, on_cap: str = "pause") -> dict[str, Any]:
    """`n` model calls of $0.01 each under `cap(usd=cap, on_cap=on_cap)`."""
    ctx.budget.cap(usd=cap, on_cap=on_cap)
    llm = answering()
    for i in range(n):
        ctx.llm(llm, f"question {i}")
    return {"spent": ctx.budget.spent, "caps": ctx.budget.caps}


@daybook.workflow
def cost_tree(ctx: Context) -> list[Any]:
    """One model call here and two child runs of two calls each."""
    ctx.llm(answering(), "parent question")
    return [ctx.child(model_calls, 2), ctx.child(model_calls, 2)]


@daybook.tool(cost={"usd": 0.01}, idempotent=True)
def paid_lookup(*, q: str, idempotency_key: str) -> str:
    PAID_LOOKUPS.append(idempotency_key)
    return q.upper()


@daybook.workflow
def paid_lookups(ctx: Context, n: int, cap: float, on_cap: str = "fail") -> dict[str, Any]:
    """`n` lookups of a tool that costs $0.01 each, under a cap."""
    ctx.budget.cap(usd=cap, on_cap=on_cap)
    got = [ctx.effect(paid_lookup, q=f"q{i}") for i in range(n)]
    return {"got": got, "spent": ctx.budget.spent}
