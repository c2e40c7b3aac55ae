"""The `Daybook` methods of dispatch: submitting (to a queue), queues, schedules, run search.

A mixin of `Daybook`, so the facade stays one flat object while these live with their noun.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, DaybookError
from ..records import JSON
from ..runtime.workflow import Apps, Workflow, as_workflow, load, registered
from . import queues, schedules, search, triggers
from .queues import Queue
from .schedules import Schedule
from .search import RunPage

if TYPE_CHECKING:
    from ..runtime.runner import Runner
    from ..store import Store


class DispatchMethods:
    """`submit`, `runs`, `queue`, `queues`, `schedule`, `schedules`, `unschedule`,
    `pause_schedule`, `resume_schedule`, `fire_schedules`, `attributes`, `follow_changes`,
    `trigger_offset`."""

    if TYPE_CHECKING:  # given by Daybook
        _runner: Runner

        @property
        def store(self) -> Store: ...

        @property
        def owner(self) -> str: ...

        def run(self, workflow: Any, *args: JSON, run_id: str | None = None, **kwargs: JSON) -> Any: ...

    def follow_changes(
        self, name: str, read: triggers.ChangeLog, workflow: Any, *, limit: int = 100
    ) -> dict[str, JSON]:
        """One pass of the reactive trigger `name` (`dispatch/triggers.py`): read the changes
        past its stored offset with `read(after, limit)` (each a `Change(offset, id, data)`), run
        `workflow(ctx, {"offset", "id", "data"})` for each as the run `trigger:<name>:<id>` (to its
        end or first wait; the same event twice is the same run, so no effect twice), and
        advance the offset past each once its run has journaled what it did. Returns the
        changes delivered (offset, id, run_id, status) and the offset; `held_by` when another
        live follower has the trigger."""
        wf = as_workflow(workflow)

        def handle(run_id: str, change: triggers.Change) -> str:
            event: JSON = {"offset": change.offset, "id": change.id, "data": change.data}
            try:
                self.run(wf, event, run_id=run_id)
            except DaybookError:
                info = self.store.get_run(run_id)
                if info is None or info.status not in triggers.HANDLED:
                    raise  # nothing journaled it: the offset stays, the next pass delivers it again
            info = self.store.get_run(run_id)
            return info.status if info is not None else "unknown"

        return triggers.follow(self.store, self.owner, name, read, handle, limit)

    def trigger_offset(self, name: str) -> int:
        """Trigger `name`'s stored offset: every change up to it was delivered (0: none yet)."""
        return triggers.offset(self.store, name)

    def submit(
        self,
        workflow: Any,
        *args: JSON,
        run_id: str | None = None,
        queue: str | None = None,
        priority: int = 0,
        partition: str | None = None,
        **kwargs: JSON,
    ) -> str:
        """Record a run as `pending` for a worker (`daybook worker`) to execute; returns its id.

        With `queue`, the run waits in that queue and a worker takes it when the queue's limits
        allow (`queue()`); `priority` (lower first) and `partition` (runs with one key run one
        at a time) order it there. Submitting an id that exists with the same input is a no-op
        (it returns the id)."""
        if queue is None:
            if priority or partition is not None:
                raise ConfigError("priority and partition order runs within a queue: give queue= too")
            return self._runner.submit(workflow, args, kwargs, run_id)
        return queues.submit(self._runner, workflow, args, kwargs, run_id, queue, priority, partition)

    def runs(
        self,
        status: str | None = None,
        limit: int = 100,
        *,
        workflow: str | None = None,
        since: object = None,
        until: object = None,
        parent: str | None = None,
        queue: str | None = None,
        attributes: dict[str, JSON] | None = None,
        cursor: str | None = None,
    ) -> RunPage:
        """Runs, newest first (at most `limit`, 1 to 1,000,000), filtered by status, workflow
        name, creation time (`since` inclusive, `until` exclusive: epoch seconds, a datetime or
        ISO 8601 text), parent run, queue and search attributes (each must match). Returns a
        `RunPage` (a list); pass its `cursor` to get the next page (None on the last). A run
        whose header does not decode is skipped and listed in `damaged()`."""
        filters = search.filters_of(
            workflow=workflow, status=status, since=since, until=until, parent=parent,
            queue=queue, attributes=attributes,
        )  # fmt: skip
        return search.runs(self.store, filters, limit, cursor)

    def attributes(self, run_id: str) -> dict[str, JSON]:
        """The search attributes the run set on itself (`ctx.set_attributes`)."""
        return self.store.attributes(run_id)

    def queue(
        self,
        name: str,
        *,
        concurrency: int | None = None,
        per_worker: int | None = None,
        rate: tuple[int, float] | None = None,
    ) -> Queue:
        """Declare queue `name`'s limits, kept in the store for every process: `concurrency`
        (runs executing at once, across all workers), `per_worker` (in one worker process),
        `rate=(n, seconds)` (runs started per period). None: no such limit. Declaring again
        replaces the limits."""
        return queues.declare(self.store, name, concurrency, per_worker, rate)

    def queues(self) -> list[Queue]:
        """Every queue with its limits and how many of its runs are pending and executing."""
        return queues.listing(self.store)

    def schedule(
        self,
        name: str,
        workflow: Any,
        cron: str,
        *,
        args: Sequence[JSON] = (),
        kwargs: dict[str, JSON] | None = None,
        queue: str | None = None,
        catchup: str = "skip",
        grace: float = 60.0,
    ) -> Schedule:
        """Start `workflow(*args, **kwargs)` (a workflow, or its registered name) at every
        firing of `cron` (UTC; five fields, or six with seconds last), from workers: each firing
        is exactly one run, id `sched:<name>:<time>`. Missed firings (no worker was up):
        `catchup="skip"` starts only those at most `grace` seconds late, `"all"` starts each.
        Redefining keeps its state."""
        wf = _named(workflow) if isinstance(workflow, str) else as_workflow(workflow)
        return schedules.add(
            self.store, name, wf, cron, args, kwargs,
            queue=queue, catchup=catchup, grace=grace,
        )  # fmt: skip

    def schedules(self) -> list[Schedule]:
        """Every schedule, with its next firing time."""
        return schedules.listing(self.store)

    def unschedule(self, name: str) -> bool:
        """Delete schedule `name` (its runs stay); False if there was none."""
        return self.store.drop_schedule(name)

    def pause_schedule(self, name: str) -> bool:
        """Stop schedule `name` firing until `resume_schedule`; False if there is none."""
        return self.store.pause_schedule(name, True, time.time())

    def resume_schedule(self, name: str) -> bool:
        """Let schedule `name` fire again from now (firings while paused are not caught up)."""
        return self.store.pause_schedule(name, False, time.time())

    def fire_schedules(self, app: Apps = None) -> list[str]:
        """Start the run of every schedule firing that has come (what each worker does as it
        polls); returns the ids of the runs this call created."""
        return schedules.fire_due(self.store, self._runner.owner, app)


def _named(name: str) -> Workflow[Any]:
    """A workflow registered in this process (or in $DAYBOOK_APP's code) by its name."""
    try:
        return load(name, "", None)
    except ConfigError:
        if len(registered(name)) > 1:
            raise  # several of that name: the error says to name them apart
        raise ConfigError(
            f"no workflow named {name!r} is registered in this process: import the code that "
            "defines it first (--app MODULE|FILE.py on the command line, or $DAYBOOK_APP)"
        ) from None
