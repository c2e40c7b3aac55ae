"""A delivering process for the outbox tests: delivers the approval outbox of a store to one
webhook (its HMAC secret from $HOOK_SECRET), pass after pass until every request is delivered,
then prints `{"done": true}`. `--kill-before-send N` / `--kill-before-record N`: SIGKILL this
process just before its N-th send (after the try was recorded), or just after it (the receiver
has the request, its `delivered` is not recorded). `--ready-go`: see crashpoint.ready_then_go.

usage: outbox_child.py DB_URL HOOK_URL [--kill-before-send N] [--kill-before-record N] [--ready-go]
"""

from __future__ import annotations

import json
import os
import sys
import time

from crashpoint import die, ready_then_go, take

from daybook import Daybook, Secret, Webhook
from daybook.gates import outbox
from daybook.gates.delivery import Deliverer


def main(argv: list[str]) -> None:
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
