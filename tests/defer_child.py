"""An agent process for the deferred-outcome crash tests (one fsync per effect step): runs or
resumes `agents.payments_with` and SIGKILLs itself at a chosen journal write.

    defer_child.py DB start RUN_ID TOOL BANK COUNT [--kill-before KIND:N | --kill-after KIND:N]
        [--no-defer] [--defer-any]
    defer_child.py DB resume RUN_ID [--no-defer]

TOOL is `pay` (a status query), `pay_idem` (idempotent) or `pay_blind` (no profile).
`--no-defer`: Daybook(defer_outcomes=False). `--defer-any`: the control that must fail, every
confirmed outcome held for the next row, a profile-less tool's too (what daybook never does).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import agents
from crashpoint import kill_at_journal_write, report

from daybook import Daybook
from daybook.journal.lifecycle import EffectLifecycle


def _defer_any() -> None:
    real = EffectLifecycle.__init__

    def init(self: EffectLifecycle, *args: object, **kwargs: object) -> None:
        real(self, *args, **kwargs)  # type: ignore[arg-type]
        self.defers = self.tx is None

    EffectLifecycle.__init__ = init  # type: ignore[method-assign]


def main() -> None:
    db, action, run_id = sys.argv[1:4]
    rest = sys.argv[4:]
    defer = "--no-defer" not in rest
    if "--defer-any" in rest:
        rest.remove("--defer-any")
        _defer_any()
    rest = [a for a in rest if a != "--no-defer"]
    book = Daybook(db, lease_ttl=2.0, defer_outcomes=defer)
    kill_at_journal_write(book, rest)

    def run() -> object:
        if action == "start":
            tool, bank, count = rest[0], rest[1], int(rest[2])
            return book.run(agents.payments_with, bank, count, tool, run_id=run_id)
        return book.resume(run_id, wait=10)

    report(run)


main()
