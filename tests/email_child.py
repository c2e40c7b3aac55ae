"""The email adapter's agent process for crash tests, and the workflows it runs (imported by the
tests too): queue messages in an outbox, then release them to the test's SMTP server.

    email_child.py DB start RUN_ID ARGS_JSON [--kill-after KIND:N]
    email_child.py DB resume RUN_ID

KIND:N kills this process with SIGKILL right after the N-th journal row of that kind it writes.
The verifier reads the server's maildir, as an IMAP search would read a real mailbox.
"""

from __future__ import annotations

import json
import mailbox
import sys
from typing import Any

from crashpoint import kill_at_journal_write, report

import daybook
from daybook import Context, Daybook
from daybook.adapters.email import Outbox, Verify

SENDER = "agent@daybook.test"


def received_ids(spool: str) -> list[str]:
    """Message-IDs in the server's maildir, one per message received (re-sends included)."""
    return [str(m["Message-ID"]) for m in mailbox.Maildir(spool, create=False)]


def spool_verifier(spool: str) -> Verify:
    # The test server writes a message before it answers 250, so "not there" proves "not taken".
    return lambda message_id: message_id in received_ids(spool)


@daybook.workflow
def email_mailer(
    ctx: Context,
    host: str,
    port: int,
    spool: str | None,
    messages: list[list[Any]],
    timeout: float = 30.0,
) -> dict[str, Any]:
    """Queue each [to, subject, body], then release them all; verify only when given a spool."""
    outbox = Outbox(host, port, SENDER, verify=spool_verifier(spool) if spool else None, timeout=timeout)
    ids = [outbox.queue(ctx, to, subject, body) for to, subject, body in messages]
    return {"ids": ids, "sent": outbox.release(ctx)}


def main() -> None:
    db, action, run_id = sys.argv[1:4]
    rest = sys.argv[4:]
    book = Daybook(db, lease_ttl=2.0)
    kill_at_journal_write(book, rest)
    if action == "start":
        report(lambda: book.run(email_mailer, *json.loads(rest[0]), run_id=run_id))
    else:
        report(lambda: book.resume(run_id))


if __name__ == "__main__":
    main()
