"""Atomix transactions in daybook: a page write staged until commit, a hotel hold made now and
cancelled if the transaction aborts, a confirmation email held until commit; the first attempt
fails, so its hold is cancelled, its page and email never appear, and the retry commits under a
fresh epoch.

    python examples/transactions.py [DB_URL]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

import daybook

SITE = Path(tempfile.mkdtemp(prefix="daybook-shop-"))
HOLDS: list[str] = []  # the hotel's own books
OUTBOX: list[str] = []  # the mail server's own books


@daybook.tool(bufferable=True, idempotent=True, irreversible=False, scopes="fs:/srv/shop/{path}")
def write_page(path: str, html: str, idempotency_key: str) -> None:
    (SITE / path).write_text(html)


@daybook.tool(idempotent=True, irreversible=False)
def cancel_hold(original: dict[str, Any], result: str, idempotency_key: str) -> None:
    HOLDS.remove(result)


@daybook.tool(inverse=cancel_hold, scopes=lambda hotel, night, **_: [f"api:hotel:holds:{hotel}"])
def hold_room(hotel: str, night: str, idempotency_key: str) -> str:
    HOLDS.append(f"{hotel}/{night}/{idempotency_key}")
    return HOLDS[-1]


@daybook.tool(irreversible=True, scopes="email:outbox:{to}")
def send_confirmation(to: str, hold: str, idempotency_key: str) -> None:
    OUTBOX.append(f"to {to}: your room {hold}")


@daybook.workflow(name="book_offer")
def book_offer(ctx: daybook.Context, customer: str) -> dict[str, Any]:
    scopes = ["fs:/srv/shop/**", "api:hotel:holds:*", f"email:outbox:{customer}"]
    with ctx.transaction(scopes=scopes, retries=3) as tx:
        ctx.effect(write_page, path="offer.html", html="<h1>Your offer</h1>")  # staged, invisible
        hold = ctx.effect(hold_room, hotel="H1", night="2026-12-01")  # runs now
        ctx.effect(send_confirmation, to=customer, hold=hold)  # held until commit
        if tx.attempt == 1:
            raise RuntimeError("the rate changed under us: abort and try again")
    return {"epoch": tx.epoch, "attempt": tx.attempt, "hold": hold}


def main() -> None:
    url = sys.argv[1] if len(sys.argv) > 1 else f"sqlite:///{SITE / 'journal.db'}"
    with daybook.Daybook(url) as book:
        result = book.run(book_offer, "ann@example.com")
        print("result:", result)
        for t in book.transactions():
            print(f"epoch {t['epoch']}: attempt {t['attempt']} {t['status']}")
    print("page published:", (SITE / "offer.html").exists())
    print("holds at the hotel:", len(HOLDS))
    print("emails sent:", len(OUTBOX))


if __name__ == "__main__":
    main()
