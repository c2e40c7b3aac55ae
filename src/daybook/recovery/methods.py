"""The `Daybook` methods of semantic recovery, `recover`, and of editing a past turn, `fork`.

A mixin of `Daybook`, so the facade stays one flat object while recovery lives with its noun.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import DaybookError
from ..gates import identity
from ..journal.execution import Execution
from ..records import JSON
from ..runtime.fork import fork as fork_run
from ..runtime.workflow import Apps, Workflow, load
from .forking import undoer
from .restore import Recovery, auto, recover
from .select import RecoveryPolicy

if TYPE_CHECKING:
    from ..runtime.runner import Runner
    from ..store import Store


class RecoveryMethods:
    """`recover` and `fork`."""

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
        runs again (confirmed effects are compensated first when they can be; see docs/recovery.md).

        `policy`: "dart" (default), "entry", "coarse", "retry", or a `RecoveryPolicy` (ablations:
        `blocking=False`, `exits=True`, `joint=True`). `instance`: name the failed instance
        when the journal cannot (a full `Skeleton::entity::n`; an alias matching several
        abstains). `dry_run`: decide and explain under the same checks, change nothing
        (`Recovery.refused` says why the real call would refuse). The run then re-runs here and
        `Recovery.result` holds its result; `submit=True` leaves it `pending` for a worker. If
        the re-run stops (parked, failed again, waiting), its error carries the `Recovery` as
        `exc.recovery`. Raises `RecoveryInProgress` while another process recovers the run.
        `by`: who recovers it, under the identity rule of every operator's act (a registered
        approver's name needs its `token` and the operator role; docs/runs.md, "Who acts")."""
        by, who = identity.actor(self.store, by, token, "recover", run_id)
        chosen = policy if isinstance(policy, RecoveryPolicy) else RecoveryPolicy(policy)
        info = self.store.get_run(run_id)
        if info is not None and not dry_run:
            load(info.workflow, info.ref, app)  # registers the tools whose inverses may run
        report = recover(
            self.store,
            self._runner.claims,
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
        try:
            result = self._runner.resume(run_id, 0.0, app)
        except DaybookError as exc:
            exc.recovery = report  # what was undone and branched, although the re-run stopped
            raise
        return dataclasses.replace(report, result=result)

    def fork(
        self,
        run_id: str,
        at: int,
        *,
        args: Sequence[JSON] | None = None,
        kwargs: dict[str, JSON] | None = None,
        new_run_id: str | None = None,
        confirm: bool = False,
        by: str | None = None,
        undo: bool = True,
        app: Apps = None,
        token: str | None = None,
    ) -> tuple[str, list[dict[str, JSON]]]:
        """Edit a past turn: a new `pending` run sharing `run_id`'s journal up to step `at`
        (replayed, never re-fired), then going on with the same or the edited input. Returns
        its id and the effects the original made after `at`, each with its class and whether
        it was `undone`. Those that cannot be undone (irreversible, no inverse, outcome unknown)
        need `confirm=True`; the fork never repeats them (see docs/steering.md). With `undo` (the
        default) the original's later confirmed compensable acts are undone first, by their
        inverses, once, and the fork takes over the original's later steps; `undo=False` leaves
        them standing. `app`: the module that registers the tools (their inverses). A registered
        approver's name as `by` needs its `token` and the operator role (`gates.identity`)."""
        by, who = identity.actor(self.store, by, token, "fork", run_id)
        run_input = None
        if args is not None or kwargs is not None:
            run_input = {"args": list(args or []), "kwargs": dict(kwargs or {})}
        undoer_ = None
        if undo:
            info = self.store.get_run(run_id)
            if info is not None:
                # Registers the tools whose inverses may run; a tool still unknown is listed as
                # such, and blocks the fork until confirmed (nobody can say it is undoable).
                with contextlib.suppress(DaybookError):
                    load(info.workflow, info.ref, app)
            undoer_ = undoer(self.store, self._runner.claims, at, self._runner.context)
        return fork_run(
            self.store,
            run_id,
            at,
            new_id=new_run_id,
            run_input=run_input,
            confirm=confirm,
            by=by,
            undo=undoer_,
            identity=who,
        )

    def _auto_recover(self, exe: Execution, wf: Workflow[Any], exc: Exception) -> bool:
        """The runner's hook for `@workflow(recover=...)` (see `restore.auto`)."""
        return auto(exe, self._runner.claims, str(wf.recover), wf.recoveries, exc, self._runner.context)
