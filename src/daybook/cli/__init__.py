"""The `daybook` command line (`daybook = "daybook.cli:main"`, and `python -m daybook`).

This package owns the commands: their names, options, help texts, output and exit codes. Nothing
else in daybook belongs here, and nothing here is API: a command reads or acts through `Daybook`
and the package's other public modules, and prints the answer.

It is the top layer. It may import anything in daybook; nothing in daybook imports it (except
`daybook/__main__.py`, which only calls `main`). Each module imports the rest of daybook in one
block at its top (`demo.py` alone imports inside its command), so a move in the package below
is repointed there.

    app.py           the click group `main`, --db and opening the store (with_book), JSON and
                     table output, exit codes (0 ok, 1 error, 2 usage, 3 needs attention,
                     5 suspended)
    render.py        plain-text tables and the journal view
    runs.py          runs, show, export, resume, signal, budget
    workers.py       worker
    demo.py          demo
    versions.py      versions, replay-check
    books.py         effects, why, obligations, unknowns, resolve, reconcile
    tools.py         tools
    transactions.py  orphans
    gates.py         approvers (add, list), approvals, approve, deny
    entities.py      leases, entity
"""

from __future__ import annotations

from . import books, demo, entities, gates, runs, tools, transactions, versions, workers
from .app import main

__all__ = ["main"]


def _register() -> None:
    for noun in (runs, workers, demo, versions, books, tools, transactions, gates, entities):
        for command in noun.COMMANDS:
            main.add_command(command)


_register()
