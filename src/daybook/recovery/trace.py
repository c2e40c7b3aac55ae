"""The lifted trace: a run's journal read as subtask instances, checkpoints and read/write sets.

Each step of the run's current branch becomes a `LiftedStep` (its instance, the keys it reads
and writes, its checkpoint kind, its effect's class and outcome), and the instances are gathered
with their checkpoints in recency order (DART Eq 7, 12-14). Read sets come from what each
instance declared at entry; write sets from its checkpoints and from the scopes of the effects it
recorded (a tool's `scopes=`, evaluated on the recorded arguments). The model is plain data, so
the selector (`select.py`) and its property test share it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError
from ..journal.tool import lookup as lookup_tool
from ..records import Event, Kind, Status
from ..tx.scope import for_call, overlaps
from .signal import FailureEvent, FailureSignal, normalize
from .subtask import PREFIX


@dataclass(frozen=True)
class Effect:
    """An effect step: its tool, key, class (irreversible | compensable | bufferable |
    reversible) and outcome (confirmed | failed | unknown | in_flight)."""

    tool: str
    key: str
    cls: str
    status: str


@dataclass(frozen=True)
class LiftedStep:
    step: int
    instance: str | None
    name: str
    marker: bool  # a subtask bookkeeping row, not an action
    reads: frozenset[str] = frozenset()
    writes: frozenset[str] = frozenset()
    checkpoint: str | None = None  # entry | commit | exit
    effect: Effect | None = None


@dataclass
class Instance:
    id: str
    skeleton: str
    entity: str
    ordinal: int
    effects: str  # the frozen effect policy: classes | frozen
    parent: str | None = None  # the instance active when this one was entered (nesting)
    outputs: frozenset[str] = frozenset()  # declared at entry: an upper bound on its writes
    # It declared no reads at all (`reads=None`, no skeleton inputs): it may have read anything
    # that ran before it (a value in a Python variable), so it is a possible consumer.
    undeclared: bool = False
    steps: list[int] = field(default_factory=list)
    checkpoints: list[tuple[str, int]] = field(default_factory=list)  # (kind, step), oldest first

    @property
    def entry(self) -> int:
        return self.checkpoints[0][1]

    def committed_after(self, position: int) -> bool:
        """Whether a commit or exit checkpoint of this instance lies after `position`."""
        return any(kind != "entry" and step > position for kind, step in self.checkpoints)

    @property
    def committed(self) -> bool:
        return self.committed_after(0)


@dataclass
class Trace:
    steps: dict[int, LiftedStep]
    instances: dict[str, Instance]
    failure: FailureEvent | None
    last: int  # the last step of the current branch

    def actions(self, steps: list[int]) -> int:
        """How many of `steps` are actions (decisions and effects), not bookkeeping."""
        return sum(1 for s in steps if s in self.steps and not self.steps[s].marker)


def touches(a: str, b: str) -> bool:
    """Whether two keys name overlapping data: equal, or overlapping scopes."""
    if a == b:
        return True
    try:
        return overlaps(a, b)
    except ConfigError:
        return False


def lift(steps: dict[int, list[Event]], run_error: dict[str, Any] | None = None) -> Trace:
    """The trace of a run's current branch (`Execution.steps`) and, if it failed, its failure."""
    lifted: dict[int, LiftedStep] = {}
    instances: dict[str, Instance] = {}
    stack: list[str] = []
    failure: FailureEvent | None = None
    last_action: dict[str, int] = {}
    for n in sorted(steps):
        rows = steps[n]
        first = rows[0]
        if first.kind == Kind.DECISION and first.name.startswith(PREFIX):
            payload = first.data.get("value") or {}
            lifted[n] = _marker(n, first.name[len(PREFIX) :], payload, instances, stack)
            if first.name == PREFIX + "fail":
                iid = str(payload.get("instance"))
                signal = FailureSignal(str(payload.get("signal") or FailureSignal.TOOL_ERROR.value))
                message = str((payload.get("error") or {}).get("message", ""))
                failure = FailureEvent(
                    last_action.get(iid), iid, _action(steps, last_action.get(iid)), signal, message
                )
            continue
        owner = stack[-1] if stack else None
        lifted[n] = _action_step(n, rows, owner)
        if owner is not None:
            instances[owner].steps.append(n)
            last_action[owner] = n
    last = max(steps, default=0)
    if failure is None and run_error is not None:
        failure = _run_failure(lifted, stack, run_error)
    return Trace(lifted, instances, failure, last)


def _marker(
    n: int, kind: str, payload: dict[str, Any], instances: dict[str, Instance], stack: list[str]
) -> LiftedStep:
    iid = str(payload.get("instance"))
    if kind == "entry":
        instances[iid] = Instance(
            iid,
            str(payload.get("skeleton")),
            str(payload.get("entity")),
            int(payload.get("ordinal") or 0),
            str(payload.get("effects") or "classes"),
            stack[-1] if stack else None,
            frozenset(str(o) for o in payload.get("outputs") or ()),
            undeclared="reads" in payload and payload["reads"] is None,
        )
    inst = instances.get(iid)
    if inst is None:  # a marker of an instance entered before a branch point we cannot see
        return LiftedStep(n, None, PREFIX + kind, True)
    inst.steps.append(n)
    reads = frozenset(str(k) for k in payload.get("reads") or ())
    writes = frozenset(str(k) for k in payload.get("writes") or ())
    checkpoint = kind if kind in ("entry", "commit", "exit") else None
    if checkpoint is not None:
        inst.checkpoints.append((checkpoint, n))
    if kind == "entry" or (kind == "resume" and iid not in stack):
        stack.append(iid)
    elif kind in ("exit", "leave", "fail") and iid in stack:
        stack.remove(iid)
    return LiftedStep(n, iid, PREFIX + kind, True, reads, writes, checkpoint)


def _action_step(n: int, rows: list[Event], owner: str | None) -> LiftedStep:
    first = rows[0]
    if first.kind != Kind.INTENT:
        return LiftedStep(n, owner, first.name, first.kind != Kind.DECISION)
    tool = lookup_tool(first.name)
    status = "in_flight"
    for ev in rows:
        if ev.kind == Kind.OUTCOME and ev.status is not None:
            status = ev.status
    writes: frozenset[str] = frozenset()
    if tool is not None and tool.scopes is not None:
        try:
            writes = frozenset(
                s.text for s in for_call(tool.scopes, dict(first.data.get("args") or {}), tool.name)
            )
        except ConfigError:
            writes = frozenset({"**"})  # unknown reach: conservatively everything
    effect = Effect(first.name, str(first.key), _class_of(tool), status)
    return LiftedStep(n, owner, first.name, False, writes=writes, effect=effect)


def _class_of(tool: Any) -> str:
    if tool is None:
        return "irreversible"  # a tool this process cannot see is never assumed undoable
    return str(tool.effect.on_recovery)


def _action(steps: dict[int, list[Event]], step: int | None) -> str | None:
    return steps[step][0].name if step is not None and step in steps else None


def _run_failure(lifted: dict[int, LiftedStep], stack: list[str], error: dict[str, Any]) -> FailureEvent:
    """A failure no `subtask:fail` row recorded (the process died, or it was raised outside a
    subtask): the last step that failed, in whatever instance was active."""
    failed = [
        s.step for s in lifted.values() if s.effect is not None and s.effect.status == Status.FAILED.value
    ]
    step = max(failed) if failed else (max(lifted) if lifted else None)
    state = lifted[step].instance if step is not None and step in lifted else (stack[-1] if stack else None)
    action = lifted[step].name if step is not None and step in lifted else None
    return FailureEvent(step, state, action, normalize(error), str(error.get("message", "")))
