"""A process that stages an invoice (4 records) and SIGKILLs itself after the N-th write."""

from __future__ import annotations

import os
import signal
import sys

from daybook import Daybook

db, kill_after = sys.argv[1], int(sys.argv[2])
book = Daybook(db)
writes = {"n": 0}


def invoice(tx):  # type: ignore[no-untyped-def]
    for collection, record_id, data in [
        ("invoices", "INV-7", {"customer": "acme"}),
        ("lines", "INV-7/1", {"qty": 10, "unit_price": 150}),
        ("lines", "INV-7/2", {"qty": 1, "unit_price": 350}),
        ("lines", "INV-7/3", {"qty": 1, "unit_price": -100}),
    ]:
        tx.put(collection, record_id, data)
        writes["n"] += 1
        if writes["n"] == kill_after:
            os.kill(os.getpid(), signal.SIGKILL)


book.transaction("Create invoice INV-7", invoice)
if kill_after > 4:
    os.kill(os.getpid(), signal.SIGKILL)  # after the commit
