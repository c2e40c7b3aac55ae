"""One workflow that carries a planted secret through every feature that writes rows, for
tests/test_every_payload_guarded.py. The secret comes from $PLANTED_SECRET; with
$SECRECY_MARK=1 it is marked (`daybook.Secret`, tools' `secrets=`), else it is plain text and
only a payload codec keeps it out of the store. Every tool appends what it received to
$SECRECY_LOG: the counterparty's own record that the value reached it live."""

from __future__ import annotations

import os
from typing import Any

import daybook


def _received(tool: str, value: Any) -> None:
    with open(os.environ["SECRECY_LOG"], "a", encoding="utf-8") as log:
        log.write(f"{tool}|{value}\n")


def _planted() -> Any:
    value = os.environ["PLANTED_SECRET"]
    return daybook.Secret(value) if os.environ.get("SECRECY_MARK") == "1" else value


@daybook.tool(secrets=("password",), idempotent=True)
def login(password: str, idempotency_key: str) -> str:
    _received("login", password)
    return "session-1"


@daybook.tool(secrets=("password",), idempotent=True)
def unreserve(original: dict[str, Any], result: Any, idempotency_key: str) -> None:
    _received("unreserve", "undone")


@daybook.tool(secrets=("password",), idempotent=True, inverse=unreserve)
def reserve(password: str, idempotency_key: str) -> str:
    _received("reserve", password)
    return "held-1"


@daybook.tool(secrets=("password",), idempotent=True, bufferable=True)
def stage_file(password: str, idempotency_key: str) -> str:
    _received("stage_file", password)
    return "staged"


@daybook.tool(secrets=("card",), irreversible=True, idempotent=True)
def charge(card: str, amount: int, idempotency_key: str) -> str:
    _received("charge", card)
    return "charged"


def _branch(ctx: daybook.Context, pw: Any, amount: int) -> dict[str, int]:
    ctx.effect(charge, card=pw, amount=amount)
    return {"amount": amount}


@daybook.workflow
def child_login(ctx: daybook.Context) -> str:
    pw = ctx.decide("child-password", _planted).value
    return str(ctx.effect(login, password=pw))


@daybook.workflow
def everything(ctx: daybook.Context, note: str) -> dict[str, Any]:
    pw = ctx.decide("password", _planted).value  # a decision
    ctx.effect(login, password=pw)  # an effect
    ctx.stream("log").write({"password": pw, "note": note})  # a durable stream's chunk
    plain = os.environ["PLANTED_SECRET"]  # secret by the tools' `secrets=` names only
    with ctx.transaction(scopes=["**"]):  # staged (buffered) and held (irreversible) calls
        ctx.effect(stage_file, password=plain)
        ctx.effect(charge, card=plain, amount=1)
    try:  # an abort whose error (and traceback) quotes the secret
        with ctx.transaction(scopes=["**"], retries=0):
            ctx.effect(reserve, password=pw)
            # The secret is live here (scrubbed); `note` is not (only a codec hides it).
            raise ValueError(f"the bank declined {os.environ['PLANTED_SECRET']} for {note}")
    except ValueError:
        pass
    ctx.speculate(  # speculation: each branch its own transaction
        {"a": lambda c: _branch(c, pw, 2), "b": lambda c: _branch(c, pw, 3)},
        choose=lambda results: min(results, key=lambda k: results[k]["amount"]),
    )
    with ctx.subtask("Login", "acct") as u:  # recovery: a subtask's checkpoints
        ctx.effect(login, password=pw, key="subtask-login")
        u.exit()
    ctx.child(child_login)  # a child run
    with ctx.transaction(scopes=["**"], gate=True):  # a release gate over a held call
        # Read live again: the run stops at the gate, and a resume replays `pw` withheld.
        ctx.effect(charge, card=_planted(), amount=4)
    verdict = ctx.gate("send", about={"password": _planted(), "note": note})  # a gate
    signal = ctx.wait_for("go", timeout=3600)  # the inbox
    update = ctx.handle_update("ask", lambda args: {"echo": args}, timeout=0)  # an update
    revisions = [r.text for r in ctx.revisions()]  # steering
    return {
        "note": note,
        "approved": verdict.approved,
        "signal": None if signal is None else signal.payload,
        "update": None if update is None else update[1],
        "revisions": revisions,
    }


@daybook.workflow
def breaks(ctx: daybook.Context, text: str) -> None:
    raise RuntimeError(f"failed on {text}")  # parked, its error (and traceback) in the header


SLOT = daybook.Skeleton("Slot", outputs=("{entity}",))


@daybook.tool(secrets=("password",), idempotent=True, certain=(RuntimeError,))
def confirm(password: str, slot: str, idempotency_key: str) -> str:
    _received("confirm", password)
    refused = os.environ["SECRECY_LOG"] + ".refused"
    if not os.path.exists(refused):  # the calendar refuses once, quoting what it was sent
        open(refused, "w").close()
        raise RuntimeError(f"calendar refused {slot} for {password}")
    return "confirmed"


@daybook.workflow
def recoverable(ctx: daybook.Context, note: str) -> dict[str, Any]:
    # Semantic recovery (`book.recover`): the confirmation fails once, the run fails, and
    # recovery restores slot[0]'s commit checkpoint and runs the confirmation again.
    with ctx.subtask(SLOT, "slot[0]") as u:
        pick = ctx.decide("pick", lambda: {"hour": 9, "note": note}).value
        u.commit(**{"slot[0]": pick})
    with ctx.subtask(SLOT, "slot[0]") as u:
        done = ctx.effect(confirm, password=_planted(), slot="slot[0]")
        u.exit()
    return {"pick": pick, "confirmed": done}
