"""An agent process for the invoice example (examples/invoice.py) that may SIGKILL itself at a
chosen journal write: `invoice_child.py DB start|resume RUN NUMBER [--kill-before|--kill-after KIND:N]`.
The example's tool commits into $DAYBOOK_DB, set here before it is imported."""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "examples"))
db, action, run_id, number, *rest = sys.argv[1:]
os.environ["DAYBOOK_DB"] = db

import invoice  # noqa: E402  (the example: its tool commits into $DAYBOOK_DB)
from crashpoint import kill_at_journal_write, report  # noqa: E402

kill_at_journal_write(invoice.book, rest)
if action == "start":
    report(lambda: invoice.book.run(invoice.bill, number, invoice.LINES, run_id=run_id))
else:
    report(lambda: invoice.book.resume(run_id))
