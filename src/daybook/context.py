"""`Context`: what a workflow gets as `ctx`, assembled from the facets that own each noun.

Every non-deterministic read and every effect goes through it. The recorded primitives
(decisions, effects, waits) are `daybook.journal`; each facet above them lives with its noun:
gates (`daybook.gates`), obligations and the barrier (`daybook.books`), the budget and
entities (`daybook.coordination`), search attributes (`daybook.dispatch`), compensation
(`daybook.recovery`), updates and revisions (`daybook.steering`), transactions
(`daybook.tx`). This module only puts them together; the runtime builds one per execution.
"""

from __future__ import annotations

from typing import Any, NoReturn

from .books.obligation import Obligations
from .books.unknowns import Barriers
from .checks import CONTEXT_RULES, checked
from .coordination.budget import Budget
from .coordination.child import Children
from .coordination.entity import Entity
from .dispatch.attributes import Attributes
from .gates import identity
from .gates.gate import Gates
from .journal.execution import Execution
from .journal.stop import ContinueAsNew
from .records import JSON, check_json
from .recovery.compensation import Compensations
from .recovery.subtask import Subtasks
from .steering.checkpoint import Environments
from .steering.revision import Primers, Revisions
from .steering.update import Updates
from .tx.facet import Transactions


class Context(
    Transactions,
    Subtasks,
    Compensations,
    Gates,
    Obligations,
    Barriers,
    Updates,
    Revisions,
    Primers,
    Environments,
    Attributes,
    Children,
):
    """What a workflow gets as `ctx`: every non-deterministic read and every effect goes through it."""

    def __init__(self, exe: Execution) -> None:
        super().__init__(exe)
        self.budget = Budget(self)

    def continue_as_new(self, *args: JSON, **kwargs: JSON) -> NoReturn:
        """End this run here and go on as a new run of the same workflow with this input, so
        history does not grow without bound: the new run (id `<run id>~2`, then `~3`, ...) starts
        with an empty journal, and resuming it reads only its own. Carry forward whatever state
        the next segment needs as its arguments."""
        check_json({"args": list(args), "kwargs": kwargs}, "continue_as_new input")
        raise ContinueAsNew(self.run_id, args, kwargs)

    def _proved(self, act: str, sender: str, record: Any) -> bool:
        """A signal's sender is proved by a signature the approvers file checks (any role)."""
        return identity.verify(self._exe.store, act, self._exe.run_id, sender, record, role=None)

    def entity(self, name: str) -> Entity:
        """The coordination entity `name` on this run's store. Its operations act on shared
        state now; make a claim or a record part of the run's history by wrapping it in a step:
        `ctx.decide("claim", lambda: ctx.entity(name).claim(agent, ttl)).value`."""
        return Entity(self._exe.store, name)


# A bad step name or key is refused before the step runs (a `ConfigError` parks the run).
checked(Context, CONTEXT_RULES, "ctx")
