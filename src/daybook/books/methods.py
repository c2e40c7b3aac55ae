"""The `Daybook` methods that read and settle the books: obligations, the effect ledger, the
why of an effect, the unknowns and their resolution by a person (`daybook.books`).

A mixin of `Daybook`, so the facade stays one flat object while the books live with their noun.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..records import JSON, Event, RunInfo
from .effects import effects as effect_rows
from .effects import find_effect
from .obligation import obligations as obligation_rows
from .resolve import MISSING
from .resolve import resolve as resolve_effect
from .unknowns import unknowns as open_effects
from .why import why as why_of

if TYPE_CHECKING:
    from ..runtime.runner import Runner
    from ..store import Store


class LedgerMethods:
    """`obligations`, `effects`, `find_effect`, `why`, `unknowns`, `resolve`."""

    if TYPE_CHECKING:  # given by Daybook
        _runner: Runner

        @property
        def store(self) -> Store: ...

        def get_run(self, run_id: str) -> RunInfo: ...

        def journal(self, run_id: str) -> list[Event]: ...

        def _actor(
            self, name: str | None, token: str | None, act: str, run_id: str
        ) -> tuple[str, dict[str, JSON]]: ...

    def obligations(self, status: str | None = None) -> list[dict[str, JSON]]:
        """Every obligation across runs with its state: open, fulfilled, cancelled, or breached
        (open past its due time). `status` filters on that state."""
        return obligation_rows(self.store, status)

    def effects(
        self, run_id: str | None = None, *, status: str | None = None, tool: str | None = None
    ) -> list[dict[str, JSON]]:
        """The effect ledger: every effect (of one run, or all) with its request, response, key,
        the counterparty's reference, the decision it came from, its compensation handle and its
        status history (one entry per journal row: intent, attempts, each outcome). `status`
        filters on the current status (confirmed, failed, unknown, in flight)."""
        if run_id is not None:
            self.get_run(run_id)
        return effect_rows(self.store, run_id, status=status, tool=tool)

    def find_effect(self, effect: str, step: int | None = None) -> tuple[str, int]:
        """(run id, step) of an effect named by its idempotency key, or by run id and step."""
        return find_effect(self.store, effect, step)

    def why(self, effect: str, step: int | None = None) -> dict[str, JSON]:
        """The decision behind an effect (named by its key, or by run id and step): the effect,
        the recorded decision its intent links to with the decision ledger's reasons, and the
        run's mandate (workflow and input)."""
        run_id, step = self.find_effect(effect, step)
        return why_of(self.get_run(run_id), self.journal(run_id), step)

    def unknowns(self) -> list[dict[str, JSON]]:
        """Effects whose outcome is not settled: unknown, in flight, or waiting to retry."""
        return open_effects(self.store, self.get_run)

    def resolve(
        self,
        run_id: str,
        step: int | None = None,
        *,
        ref: JSON = None,
        confirmed: JSON = MISSING,
        failed: str | None = None,
        absent: bool = False,
        by: str | None = None,
        evidence: str = "",
        token: str | None = None,
    ) -> Event:
        """Record, with evidence and who did it, what happened to an effect whose outcome is unknown.

        The effect is named by run id and step, or by its idempotency key alone (`step=None`).
        `confirmed=RESULT`: it happened (RESULT is what the tool would have returned; `ref`, or RESULT itself
        when it is a string, is kept as the counterparty's reference); `failed=MESSAGE`: it did not and will
        not; `absent=True`: the counterparty never received it, so resuming sends it again under the same key.
        A registered approver's name as `by` needs its `token`; any other is journaled as unauthenticated."""
        by, who = self._actor(by, token, "resolve", run_id)
        return resolve_effect(
            self._runner.claims,
            run_id,
            step,
            ref=ref,
            confirmed=confirmed,
            failed=failed,
            absent=absent,
            by=by,
            evidence=evidence,
            identity=who,
        )
