"""The `Daybook` method of workspaces: `rewind`, a run's checkout back to after a step.

A mixin of `Daybook`, so the facade stays one flat object while workspaces live with their noun.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..gates import identity
from ..records import JSON
from .rewind import Rewind, rewind, snapshots_of

if TYPE_CHECKING:
    from ..books.cost import Cost
    from ..runtime.runner import Runner
    from ..store import Store


class WorkspaceMethods:
    """`rewind`."""

    if TYPE_CHECKING:  # given by Daybook
        _runner: Runner

        @property
        def store(self) -> Store: ...

        def cost(self, run_id: str, tree: bool = False) -> Cost: ...

    def rewind(
        self,
        run_id: str,
        to: int,
        *,
        force: bool = False,
        dry_run: bool = False,
        by: str | None = None,
        token: str | None = None,
    ) -> Rewind:
        """Put the files `run_id` edited through a `daybook.Checkout` back as they were after
        step `to` (0: before its first edit), and make the run `pending` on a journal branch
        whose steps after `to` run again (decisions made anew; confirmed effects outside the
        workspace replay, never repeat). Only the run's own paths are restored: one changed
        since the run's last edit raises `WorkspaceConflict` unless `force`. Ignored paths are
        live state, listed in `Rewind.live`, never restored. `dry_run`: plan and report only.
        The run must be failed, parked, stuck, paused or waiting (not running)."""
        by, who = identity.actor(self.store, by, token, "rewind", run_id)
        return rewind(
            self.store, self._runner.claims, run_id, to, by=by, force=force, dry_run=dry_run, identity=who
        )

    def snapshots(self, run_id: str, checkout: str) -> list[dict[str, JSON]]:
        """The snapshots `run_id`'s edits left in the git checkout `checkout` (its hidden ref
        `refs/daybook/runs/...`), oldest first: step, commit, key, decision, bytes touched,
        files held, and what the steps since the previous snapshot cost (model tokens, USD,
        wall-clock seconds)."""
        return snapshots_of(self.store, run_id, checkout, list(self.cost(run_id).lines))
