"""An agent process for the coding-agent example (examples/coding_agent.py) that may SIGKILL
itself at a chosen journal write:

    coding_child.py DB start RUN CHECKOUT [GOAL] [--kill-before|--kill-after KIND:N]
    coding_child.py DB resume RUN
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "examples"))

import coding_agent
from crashpoint import kill_at_journal_write, report

from daybook import Daybook

db, action, run_id, *rest = sys.argv[1:]
book = Daybook(db, lease_ttl=2.0)
kill_at_journal_write(book, rest)
if action == "start":
    args = rest[:2]
    report(lambda: book.run(coding_agent.coding_agent, *args, run_id=run_id))
else:
    report(lambda: book.resume(run_id))
