"""Workflows that handle a planted secret, for tests/test_secrets.py (run in this process and,
for resume, in a fresh one with `--app`). The secret comes from $PLANTED_SECRET, as it would
from a secret manager; the bank (a real HTTP server) records what it received."""

from __future__ import annotations

import json
import os
import urllib.request
from typing import Any

import daybook


def _post(bank: str, coll: str, key: str, body: dict[str, Any]) -> dict[str, Any]:
    req = urllib.request.Request(
        f"{bank}/{coll}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Idempotency-Key": key},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        reply: dict[str, Any] = json.loads(resp.read())
    return reply


@daybook.tool(secrets=("password",), idempotent=True)
def login(bank: str, user: str, password: str, idempotency_key: str) -> dict[str, Any]:
    # The bank echoes the whole request back, password included (as careless APIs do).
    return _post(bank, "logins", idempotency_key, {"user": user, "password": password})


@daybook.tool(idempotent=True)
def login_unmarked(bank: str, user: str, password: str, idempotency_key: str) -> dict[str, Any]:
    return _post(bank, "logins", idempotency_key, {"user": user, "password": password})


@daybook.tool(secret_result=True, idempotent=True)
def issue_token(bank: str, idempotency_key: str) -> str:
    rec = _post(bank, "tokens", idempotency_key, {"for": "api"})
    return f"tok-{os.environ['PLANTED_SECRET']}-{rec['id']}"


@daybook.tool(idempotent=True)
def call_api(bank: str, token: str, idempotency_key: str) -> dict[str, Any]:
    rec = _post(bank, "calls", idempotency_key, {"auth": token})
    return {"id": rec["id"]}


@daybook.tool(secrets=("password",), idempotent=True, certain=(PermissionError,))
def bad_login(user: str, password: str, idempotency_key: str) -> None:
    raise PermissionError(f"login refused for {user} with password {password}")


@daybook.workflow
def sign_in(ctx: daybook.Context, bank: str, user: str) -> dict[str, Any]:
    # A value read from a secret store, recorded as a secret decision: the journal keeps a digest.
    password = ctx.decide("password", lambda: daybook.Secret(os.environ["PLANTED_SECRET"]))
    rec = ctx.effect(login, bank=bank, user=user, password=password.value)
    token = ctx.effect(issue_token, bank=bank)
    # Used before the run waits: after a resume the token comes back withheld, and this call,
    # settled, replays from the journal without needing it.
    call = ctx.effect(call_api, bank=bank, token=token)
    go = ctx.wait_for("go", timeout=3600)
    return {"login": rec["id"], "call": call["id"], "go": go.payload if go else None}


@daybook.workflow
def sign_in_unmarked(ctx: daybook.Context, bank: str, user: str) -> dict[str, Any]:
    password = ctx.decide("password", lambda: os.environ["PLANTED_SECRET"])
    rec = ctx.effect(login_unmarked, bank=bank, user=user, password=password.value)
    return {"login": rec["id"]}


@daybook.workflow
def refused(ctx: daybook.Context, user: str) -> None:
    ctx.effect(bad_login, user=user, password=daybook.Secret(os.environ["PLANTED_SECRET"]))


@daybook.workflow
def sign_in_env(ctx: daybook.Context, bank: str, user: str) -> dict[str, Any]:
    # Unmarked, read from the environment (as a resume in the same deployment reads it again).
    rec = ctx.effect(login_unmarked, bank=bank, user=user, password=os.environ["PLANTED_SECRET"])
    return {"login": rec["id"]}


@daybook.workflow
def card_holder(ctx: daybook.Context, card: str) -> dict[str, Any]:
    # Unmarked: only a payload codec keeps the card out of the store (tests/test_codec_keys.py).
    quote = ctx.decide("quote", lambda: {"card": card, "price": 42}).value
    ctx.sleep(0.5)  # suspends: a worker finishes it
    return {"charged": quote["price"], "card": card}
