"""A delivering process for the outbox tests: delivers the approval outbox of a store to one
webhook (its HMAC secret from $HOOK_SECRET), pass after pass until every request is delivered,
then prints `{"done": true}`. `--kill-before-send N` / `--kill-before-record N`: SIGKILL this
process just before its N-th send (after the try was recorded), or just after it (the receiver
has the request, its `delivered` is not recorded). `--ready-go`: see crashpoint.ready_then_go.

usage: outbox_child.py DB_URL HOOK_URL [--kill-before-send N] [--kill-before-record N] [--ready-go]

`outbox_child.py open DB_URL RUN_ID --kill-after-request`: run `gated_refund` up to its gate,
SIGKILLed just after the gate's approval request is durable (before the gate's row is).
"""

from __future__ import annotations

import json
import os
import sys
import time

from crashpoint import die, ready_then_go, take

import daybook
from daybook import Daybook, Secret, Webhook
from daybook.gates import outbox
from daybook.gates.delivery import Deliverer

CARD = "4111-2222-3333-4444-outbox"  # a secret in the gated act's arguments


@daybook.workflow
def gated_refund(ctx: daybook.Context, amount: int) -> str:
    verdict = ctx.gate("refund", about={"amount": amount, "card": Secret(CARD)}, timeout=3600)
    return verdict.outcome


def open_killed(db_url: str, run_id: str) -> None:
    """Open the gate of run `run_id`, dying once its request is in the outbox."""
    with Daybook(db_url, inline_wait=0) as book:
        real = book.store.entity_record

        def record(name: str, agent: str, action: str, data: str, now: float) -> bool:
            done = real(name, agent, action, data, now)
            if action == "request":
                die()
            return done

        book.store.entity_record = record  # type: ignore[method-assign]
        book.run(gated_refund, 50, run_id=run_id)


def main(argv: list[str]) -> None:
    if argv[1] == "open":
        open_killed(argv[2], argv[3])
        return
    before_send = take(argv, "--kill-before-send")
    before_record = take(argv, "--kill-before-record")
    ready_then_go(argv)
    db_url, hook_url = argv[1], argv[2]
    hook = Webhook(hook_url, secret=Secret(os.environ["HOOK_SECRET"]), timeout=1.0)
    sends = 0
    real = hook.send

    def send(request: dict) -> None:  # type: ignore[type-arg]
        nonlocal sends
        sends += 1
        if before_send is not None and sends == int(before_send):
            die()
        real(request)
        if before_record is not None and sends == int(before_record):
            die()

    object.__setattr__(hook, "send", send)
    with Daybook(db_url) as book:
        deliverer = Deliverer(book.store, [hook], backoff=0.01, lease_ttl=1.0, poll=0.01)
        while any(r["state"] != "delivered" for r in outbox.outbox(book.store)):
            deliverer.run_once()
            time.sleep(0.01)
    print(json.dumps({"done": True}), flush=True)


if __name__ == "__main__":
    main(sys.argv)
