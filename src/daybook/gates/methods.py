"""The `Daybook` methods of approvals and identity: approvers (add, remove, list), gates
waiting, verdicts, `approve`, and who an operator's act is journaled as (`gates.identity`).

A mixin of `Daybook`, so the facade stays one flat object while these live with their noun.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..records import JSON, RunInfo
from . import approval, identity, roster

if TYPE_CHECKING:
    from ..store import Store


class GateMethods:
    """`add_approver`, `remove_approver`, `approvers`, `approvals`, `verdicts`, `approve`."""

    if TYPE_CHECKING:  # given by Daybook

        @property
        def store(self) -> Store: ...

        def get_run(self, run_id: str) -> RunInfo: ...

    def add_approver(self, name: str, *, roles: tuple[str, ...] | list[str] | None = None) -> str:
        """Register approver `name` (or give it a new key pair) and return its private key,
        the token: show it to the approver once, nothing keeps it. Only the public key is
        written, to the approvers file (outside the store). `roles`: `approver` (decides
        gates) and/or `operator` (pauses, cancels, retries, resolves, steers under its name);
        None keeps a registered name's roles, else `approver`."""
        return approval.add_approver(self.store, name, tuple(roles) if roles else None)

    def remove_approver(self, name: str) -> bool:
        """Unregister `name`: its key stops working at once (web sessions included). False if
        it was not registered."""
        return roster.remove(self.store, name)

    def approvers(self) -> dict[str, list[str]]:
        """Registered names and their roles, from the approvers file."""
        found = roster.members(self.store)
        return {name: list(found[name].roles) for name in sorted(found)}

    def approvals(self, run_id: str | None = None) -> list[dict[str, JSON]]:
        """Gates waiting for a verdict, across unfinished runs (with `run_id`: that run's and
        its child runs'), each with its run's `parent` and tree `root`."""
        return approval.approvals(self.store, run_id)

    def verdicts(self, run_id: str | None = None) -> list[dict[str, JSON]]:
        """Every verdict attempt (of one run, or all): `delivered`, `late`, `refused` (with who
        claimed to decide and why; a verdict row without its approver's signature is one) and
        gates that `timed_out`."""
        if run_id is not None:
            self.get_run(run_id)
        return approval.verdicts(self.store, run_id)

    def approve(
        self,
        run_id: str,
        gate_id: str,
        *,
        approver: str,
        token: str,
        reason: str = "",
        approve: bool = True,
    ) -> str:
        """Deliver a verdict for one gate of a run, signed with the approver's private key
        (`token`).

        Returns "delivered", or "late" when the gate already timed out or has a verdict: a late
        verdict is recorded (in the run's inbox, with who and when) and does nothing."""
        return approval.approve(
            self.store, run_id, gate_id, approver=approver, token=token, reason=reason, approve=approve
        )

    def _actor(
        self, name: str | None, token: str | None, act: str, run_id: str
    ) -> tuple[str, dict[str, JSON]]:
        """Who an operator's act is journaled as, and how sure that is (`gates.identity`)."""
        return identity.actor(self.store, name, token, act, run_id)
