"""The `Daybook` method of semantic recovery: `recover`.

A mixin of `Daybook`, so the facade stays one flat object while recovery lives with its noun.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..gates import identity
from ..journal.execution import Execution
from ..runtime.workflow import Apps, Workflow, load
from .restore import Recovery, auto, recover
from .select import RecoveryPolicy

if TYPE_CHECKING:
    from ..runtime.runner import Runner
    from ..store import Store


class RecoveryMethods:
    """`recover`."""

    if TYPE_CHECKING:  # given by Daybook
        _runner: Runner

        @property
        def store(self) -> Store: ...

    def recover(
        self,
        run_id: str,
        *,
        policy: str | RecoveryPolicy = "dart",
        instance: str | None = None,
        dry_run: bool = False,
        submit: bool = False,
        by: str | None = None,
        app: Apps = None,
        token: str | None = None,
    ) -> Recovery:
        """Recover a failed run by rolling back only its failed subtask instance (`ctx.subtask`)
        to that instance's latest admissible checkpoint: one no committed consumer depends on and
        no irreversible or unsettled effect lies after. If none is admissible, the whole task
        runs again (confirmed effects are compensated first when they can be; see the README).

        `policy`: "dart" (default), "entry", "coarse", "retry", or a `RecoveryPolicy` (ablations:
        `blocking=False`, `exits=True`, `joint=True`). `instance`: name the failed instance
        when the journal cannot (a full `Skeleton::entity::n`; an alias matching several
        abstains). `dry_run`: decide and explain, change nothing. The run then re-runs here and
        `Recovery.result` holds its result; `submit=True` leaves it `pending` for a worker.
        `by`: who recovers it, under the identity rule of every operator's act (a registered
        approver's name needs its `token` and the operator role; README, "Who acts")."""
        by, who = identity.actor(self.store, by, token, "recover", run_id)
        chosen = policy if isinstance(policy, RecoveryPolicy) else RecoveryPolicy(policy)
        info = self.store.get_run(run_id)
        if info is not None and not dry_run:
            load(info.workflow, info.ref, app)  # registers the tools whose inverses may run
        report = recover(
            self.store,
            run_id,
            chosen,
            instance=instance,
            dry_run=dry_run,
            by=by,
            context=self._runner.context,
            identity=who,
        )
        if dry_run or submit:
            return report
        result = self._runner.resume(run_id, 0.0, app)
        return Recovery(**{**report.__dict__, "result": result})

    def _auto_recover(self, exe: Execution, wf: Workflow[Any], exc: Exception) -> bool:
        """The runner's hook for `@workflow(recover=...)` (see `restore.auto`)."""
        return auto(exe, str(wf.recover), wf.recoveries, exc, self._runner.context)
