"""The `Daybook` methods of Atomix transactions: listing attempts and frontiers, an operator's
release of an attempt, and the tool making an atomic multi-record commit as one effect. A mixin of
`Daybook`, so the facade stays one flat object while these live with their noun."""

from __future__ import annotations

import getpass
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..journal.tool import Tool
from ..records import JSON
from . import frontier
from .commit_tool import commit_tool as make_commit_tool
from .release import release

if TYPE_CHECKING:
    from ..store import Store


class TxMethods:
    """`transactions`, `frontiers`, `release_transaction`, `commit_tool`."""

    if TYPE_CHECKING:  # given by Daybook

        @property
        def store(self) -> Store: ...

    def transactions(self, run_id: str | None = None) -> list[dict[str, JSON]]:
        """Transaction attempts by epoch (all, or one run's): tx_id, run_id, epoch, scopes,
        status (open, committing, aborting, committed, aborted, stuck), attempt, retries, times."""
        return frontier.listing(self.store, run_id)

    def frontiers(self) -> list[dict[str, JSON]]:
        """Each scope an open transaction holds: its frontier (the smallest open epoch on an
        overlapping scope), the transaction holding it, and the later ones waiting on it."""
        return frontier.frontiers(self.store)

    def release_transaction(self, tx_id: str, *, reason: str, by: str | None = None) -> dict[str, Any]:
        """Release an open transaction attempt so it stops holding its scopes (header `aborted`,
        a `tx_released` row in its run's journal: who, why, the status it left). For an attempt
        no execution will finish; refused for one a live process is executing, and for an
        unknown (TransactionNotFound) or ended attempt. Its run, if it executes again, aborts
        it where it finds it (inverses run once) and retries under a fresh epoch."""
        return release(self.store, tx_id, by or getpass.getuser(), reason)

    def commit_tool(
        self,
        write: Callable[..., Any],
        *,
        message: str,
        author: str | None = None,
        invariants: Sequence[Callable[[dict[tuple[str, str], JSON]], None]] = (),
        name: str | None = None,
    ) -> Tool[dict[str, JSON]]:
        """A tool making one atomic multi-record commit to this store (T9): `write(tx, **args)`
        stages the records, `message` is the audit text formatted with the call's arguments.
        Through `ctx.effect` it is one effect with one key; the commit is keyed by it, so a
        second call under the key returns the same commit (`{"commit_id", "result", "records"}`),
        and the commit id is the effect's counterparty reference. `tx/commit_tool.py`."""
        return make_commit_tool(
            write, message=message, author=author, invariants=invariants, name=name, store=self.store
        )
