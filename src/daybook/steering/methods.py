"""The `Daybook` methods that send a run a message by name: `signal`, `update`, `raise_budget`.

A mixin of `Daybook`, so the facade stays one flat object while these live with their noun. Each
goes through the identity rule (`steering.acts`, `gates.identity`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..records import JSON
from . import acts
from .update import update as send_update

if TYPE_CHECKING:
    from ..runtime.runner import Runner


class MessageMethods:
    """`signal`, `update`, `raise_budget`."""

    if TYPE_CHECKING:  # given by Daybook
        _runner: Runner

    def signal(
        self,
        run_id: str,
        name: str,
        payload: JSON = None,
        *,
        sender: str | None = None,
        token: str | None = None,
    ) -> int:
        """Send signal `name` to a run: it is kept in the run's inbox (durable, in order) until a
        `ctx.wait_for(name)` consumes it, and wakes the run if it is suspended. Returns its id.
        A registered approver's name as `sender` needs its `token` (any role); any other is
        journaled as unauthenticated."""
        return acts.signal(self._runner.claims, run_id, name, payload, sender, token)

    def update(
        self,
        run_id: str,
        name: str,
        args: JSON = None,
        *,
        timeout: float = 30.0,
        sender: str | None = None,
        token: str | None = None,
    ) -> JSON:
        """Send update `name` to a run and wait for its answer (the run serves it with
        `ctx.handle_update`). The request is durable and applied once; if no answer comes within
        `timeout` seconds, `UpdateTimeout` is raised and the request stays queued for the run.
        A registered approver's name as `sender` needs its `token` and the operator role."""
        claims = self._runner.claims
        return send_update(claims, run_id, name, args, timeout=timeout, sender=sender, token=token)

    def raise_budget(
        self, run_id: str, *, by: str | None = None, token: str | None = None, **amounts: float
    ) -> int:
        """Raise caps of a run (e.g. `usd=10`): a journaled act, applied when the run next needs
        it; returns the signal id. A registered approver's name as `by` needs its `token` and
        the operator role."""
        return acts.raise_budget(self._runner.claims, run_id, amounts, by, token)
