"""The `daybook` command line (`daybook = "daybook.cli:main"`, and `python -m daybook`).

This package owns the commands: their names, options, help texts, output and exit codes, and
the plain-text rendering they print. It holds no journal logic and is no API for programs: a
command reads or acts through `Daybook` (or the few internals named below) and prints the answer.

It is the top layer. It may import anything in daybook; nothing in daybook imports it (except
`daybook/__main__.py`, which only calls `main`). Each module imports the rest of daybook in one
block at its top (`demo.py` alone imports inside its command): what the package exports
(`Daybook`, the errors, `RunInfo`, ...) from `daybook` itself, so a module moving underneath does
not touch the CLI; the few internal names (`workflow.load_app`, `workflow.app_of`,
`lease.is_dead_here`, `tool.registered`,
`worker.Worker`, `demo.run_demo`, and the number checks and bounds `records.bounded`,
`book.MAX_*`, `book.lease_ttl_of`, `worker.MAX_*`, `hints.with_db`) from their modules, the only
lines to repoint after such a move.

    app.py           the click group `main`, --db (before or after the command) and opening
                     the store (with_book), `say` (every line printed: escaped, hints given
                     the --db used), JSON and table output,
                     --app (repeatable; the only code a command imports), exit codes (0 ok,
                     1 error, 2 usage, 3 needs attention, 5 suspended)
    render.py        plain-text tables and the journal view, and `safe`: every line printed
                     has its terminal control characters escaped (D12)
    runs.py          runs, show, export, resume, signal, budget
    cost.py          cost (the cost ledger)
    workers.py       worker
    dispatch.py      queues, schedule (add, ls, rm, pause, resume)
    demo.py          demo
    versions.py      versions, replay-check
    books.py         effects, why, obligations, unknowns, resolve, reconcile
    tools.py         tools
    transactions.py  orphans, tx, frontiers
    gates.py         approvers (add, list), approvals, approve, deny
    outbox.py        outbox (list, deliver): approval requests sent to webhooks and the log
    entities.py      leases, entity
    check.py         check, migrate
    web.py           web (the inspector; its extra imported when it runs), journal --follow
    proxy.py         proxy (the MCP proxy; its SDK, `daybook-runtime[mcp]`, is imported when it runs)
    mcp_proxy.py     mcp-proxy (the same proxy, its upstream given as `-- CMD ARGS...`)
"""

from __future__ import annotations

from . import (
    books,
    check,
    cost,
    demo,
    dispatch,
    entities,
    gates,
    lifecycle,
    outbox,
    recovery,
    retention,
    runs,
    steering,
    tools,
    transactions,
    versions,
    web,
    workers,
    workspaces,
)
from .app import main
from .mcp_proxy import COMMANDS as MCP_PROXY_COMMANDS
from .proxy import COMMANDS as PROXY_COMMANDS

__all__ = ["main"]


def _register() -> None:
    nouns = (
        runs, lifecycle, steering, workers, demo, versions, books, tools, transactions, gates,
        outbox, entities, check, retention, dispatch, web, recovery, cost, workspaces,
    )  # fmt: skip
    for noun in nouns:
        for command in noun.COMMANDS:
            main.add_command(command)
    for command in [*PROXY_COMMANDS, *MCP_PROXY_COMMANDS]:
        main.add_command(command)


_register()
