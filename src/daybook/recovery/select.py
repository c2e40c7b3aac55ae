"""Selection: which checkpoint of the failed instance to restore, or why none (DART Def 6, Eq 9-10).

A pure function of the lifted trace and a `RecoveryPolicy`. For the DART policy each checkpoint of the
failed instance is judged on three separate conditions: InScope (restoring it re-runs no other
instance's work nested in it), NoCommittedConflict (no committed instance consumed something the
failed one wrote after the checkpoint) and EffectAllowed (no irreversible or unsettled effect of
the instance lies after it; a "frozen" skeleton allows none at all). The newest admissible one
wins; none means a whole-task rerun with a reason code. The baselines (Retry-Only, Coarse-State,
Comp-EntryOnly) and the ablations (blocking off, exit checkpoints, joint rollback of consumers)
are policies on the same function, so they are measured on the same code.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import ConfigError
from ..runtime.workflow import RECOVER_POLICIES
from .signal import FailureEvent
from .subtask import PREFIX
from .trace import Effect, Instance, LiftedStep, Trace, touches

POLICIES = RECOVER_POLICIES
ELIGIBLE = "eligible"
CONSUMERS = "committed_consumers_present"
EFFECT = "irreversible_effect_policy"
AMBIGUOUS = "ambiguous_instance"
NO_BOUNDARY = "no_certified_boundary"
OUT_OF_SCOPE = "out_of_scope"


@dataclass(frozen=True)
class RecoveryPolicy:
    """How a failed run is recovered. `name`: dart (the full gate), entry (Comp-EntryOnly: the
    entry checkpoint, no vetoes), coarse (Coarse-State: re-run everything from the instance's
    entry), retry (Retry-Only: re-run the whole task). `blocking=False` drops the
    committed-consumer veto (an ablation: unsafe); `exits=True` also considers exit checkpoints;
    `joint=True` (beyond DART) rolls committed consumers back with the instance when every
    effect they made can be undone, instead of blocking; `effects=False` drops the effect veto (an
    ablation, unsafe: to audit whether a block was needed; unsettled outcomes still refuse)."""

    name: str = "dart"
    blocking: bool = True
    exits: bool = False
    joint: bool = False
    effects: bool = True

    def __post_init__(self) -> None:
        if self.name not in POLICIES:
            raise ConfigError(f"recovery policy must be one of {', '.join(POLICIES)}, not {self.name!r}")


@dataclass(frozen=True)
class Verdict:
    """One candidate checkpoint of the failed instance and why it is or is not admissible."""

    kind: str
    step: int
    in_scope: bool
    no_committed_conflict: bool
    effect_allowed: bool
    consumers: tuple[str, ...] = ()
    blocking_effects: tuple[str, ...] = ()
    supersede: tuple[int, ...] = ()  # the steps restoring it runs again

    @property
    def admissible(self) -> bool:
        return self.in_scope and self.no_committed_conflict and self.effect_allowed

    @property
    def reason(self) -> str:
        if not self.in_scope:
            return OUT_OF_SCOPE
        if not self.no_committed_conflict:
            return CONSUMERS
        return ELIGIBLE if self.effect_allowed else EFFECT


@dataclass(frozen=True)
class Plan:
    """What a recovery does: `action` "restore" (to `checkpoint` of `instance`) or "rerun";
    the steps it supersedes and how many actions that re-runs (`replayed`; `upstream` of them
    before the instance began); committed instances kept (`preserved`); the effects it undoes
    first, newest first (`compensate`); committed consumers it invalidates or rolls back
    (`dropped`); `reason` (eligible, or the code that refused a local restore)."""

    action: str
    policy: str
    instance: str | None
    checkpoint: tuple[str, int] | None
    supersede: tuple[int, ...]
    replayed: int
    upstream: int
    preserved: int
    reason: str
    failure: FailureEvent | None
    verdicts: tuple[Verdict, ...] = ()
    compensate: tuple[Effect, ...] = ()
    dropped: tuple[str, ...] = field(default=())
    soft: tuple[int, ...] = ()  # confirmed effects not undone: replayed if asked for the same
    # Superseded effects with no settled outcome: nobody knows if they happened, so no policy may
    # run them again until they are resolved.
    unsettled: tuple[int, ...] = ()


def select(trace: Trace, policy: RecoveryPolicy, instance: str | None = None) -> Plan:
    """The recovery plan for a failed run's trace under `policy`; `instance` names the failed
    instance when the journal does not (a full id, or a weakened alias that may be ambiguous)."""
    if policy.name == "retry":
        return _rerun(trace, policy, _localize(trace, instance), "retry_only")
    u = _localize(trace, instance)
    if u is None:
        return _rerun(trace, policy, None, AMBIGUOUS)
    if policy.name == "coarse":
        steps = [s for s in trace.steps if s >= u.entry]
        return _plan(trace, policy, u, ("entry", u.entry), steps, ELIGIBLE, ())
    if policy.name == "entry":
        # No checks: only the instance's own steps run again, whatever read them (Comp-EntryOnly).
        verdict = judge(trace, u, "entry", u.entry, RecoveryPolicy("entry", blocking=False))
        steps = _after(trace, u, u.entry)
        return _plan(trace, policy, u, ("entry", u.entry), steps, ELIGIBLE, (verdict,), verdict.consumers)
    verdicts = [
        judge(trace, u, kind, step, policy)
        for kind, step in reversed(u.checkpoints)
        if _candidate(kind, policy)
    ]
    if not verdicts:
        return _rerun(trace, policy, u, NO_BOUNDARY)
    for v in verdicts:
        if v.admissible:
            dropped = () if policy.joint else v.consumers
            return _plan(
                trace, policy, u, (v.kind, v.step), list(v.supersede), ELIGIBLE, tuple(verdicts), dropped
            )
    return _rerun(trace, policy, u, verdicts[0].reason, tuple(verdicts))


def _candidate(kind: str, policy: RecoveryPolicy) -> bool:
    return kind in ("entry", "commit") or (kind == "exit" and policy.exits)


def _localize(trace: Trace, named: str | None) -> Instance | None:
    """Exactly one live instance, or None (abstain)."""
    wanted = named if named is not None else (trace.failure.state if trace.failure else None)
    if wanted is None:
        return None
    if wanted in trace.instances:
        return trace.instances[wanted]
    # A weakened alias (the ordinal or the entity dropped): resolved only if unique.
    found = [i for i in trace.instances.values() if i.id.startswith(wanted + "::")]
    return found[0] if len(found) == 1 else None


def _after(trace: Trace, u: Instance, position: int) -> list[int]:
    return [s for s in u.steps if s > position]


def _writes_after(trace: Trace, u: Instance, position: int) -> list[tuple[int, str]]:
    """What `u` wrote after `position`, with where: the journal's record (checkpoints, effect
    scopes), plus each declared output no checkpoint up to `position` committed (it may have been
    written at any moment since, so conservatively right after `position`)."""
    recorded = [(s, w) for s in u.steps if s > position for w in trace.steps[s].writes]
    committed = {w for s in u.steps if s <= position for w in trace.steps[s].writes}
    return recorded + [(position, o) for o in sorted(u.outputs - committed)]


def consumers(trace: Trace, u: Instance, position: int) -> dict[str, int]:
    """The instances that read something `u` wrote after `position`, each with the step of its
    first such read (`u`'s own reads excluded). An instance that declared no reads at all is a
    possible consumer from its first step that acts after `u` produced something (an action or
    a write after `position`): it may have been handed the value in a Python variable (D-2)."""
    writes = _writes_after(trace, u, position)
    produced = min(
        [s for s in u.steps if s > position and not trace.steps[s].marker] + [ws for ws, _ in writes],
        default=None,
    )
    found: dict[str, int] = {}
    for v in trace.instances.values():
        if v.id == u.id:
            continue
        for s in v.steps:
            reads = trace.steps[s].reads
            if any(ws < s and touches(w, r) for ws, w in writes for r in reads) or (
                v.undeclared and produced is not None and produced < s and _acts(trace.steps[s])
            ):
                found[v.id] = s
                break
    return found


def _acts(step: LiftedStep) -> bool:
    """An action, or the entry or resumption of an instance (where it takes its inputs): not a
    commit, leave, fail or exit marker."""
    return not step.marker or step.name in (PREFIX + "entry", PREFIX + "resume")


def judge(trace: Trace, u: Instance, kind: str, position: int, policy: RecoveryPolicy) -> Verdict:
    """The three conditions for restoring checkpoint (`kind`, `position`) of `u`, and the steps
    that restoring it would run again."""
    nested = any(v.parent == u.id and v.entry > position for v in trace.instances.values())
    readers = consumers(trace, u, position)
    committed = {v: at for v, at in readers.items() if trace.instances[v].committed_after(at)}
    # Uncommitted readers are re-derived with `u`; committed ones only under joint rollback (else
    # they block, or, with blocking off, are left standing on what was undone: `dropped`).
    rederived = readers if policy.joint else {v: at for v, at in readers.items() if v not in committed}
    closure = _from_read(trace, rederived)
    joint_ok = policy.joint and not _blocking_effects(trace, u, _from_read(trace, committed))
    conflict_free = not committed or not policy.blocking or joint_ok
    steps = sorted({*_after(trace, u, position), *closure})
    blocking = tuple(_blocking_effects(trace, u, steps)) if policy.effects else ()
    return Verdict(
        kind,
        position,
        not nested,
        conflict_free,
        not blocking,
        tuple(sorted(committed)),
        blocking,
        tuple(steps),
    )


def _from_read(trace: Trace, readers: dict[str, int]) -> list[int]:
    """The steps of each reader from its first read of what is rolled back."""
    return [s for r, at in readers.items() for s in trace.instances[r].steps if s >= at]


def _blocking_effects(trace: Trace, u: Instance, steps: list[int]) -> list[str]:
    found = []
    for s in steps:
        eff = trace.steps[s].effect
        if eff is None or eff.status == "failed":
            continue
        owner = trace.instances.get(trace.steps[s].instance or "", u)
        if eff.status != "confirmed":
            found.append(f"step {s} {eff.tool}: outcome {eff.status}, not settled")
        elif eff.cls == "irreversible":
            found.append(f"step {s} {eff.tool}: irreversible")
        elif owner.effects == "frozen":
            found.append(f"step {s} {eff.tool}: the skeleton's effect policy is frozen")
    return found


def _plan(
    trace: Trace,
    policy: RecoveryPolicy,
    u: Instance,
    checkpoint: tuple[str, int],
    steps: list[int],
    reason: str,
    verdicts: tuple[Verdict, ...],
    dropped: tuple[str, ...] = (),
) -> Plan:
    chosen = sorted(set(steps))
    kept = {s for s in trace.steps if s not in set(chosen)}
    preserved = sum(
        1
        for i in trace.instances.values()
        if i.id != u.id and i.committed and all(s in kept for s in i.steps)
    )
    return Plan(
        "restore",
        policy.name,
        u.id,
        checkpoint,
        tuple(chosen),
        trace.actions(chosen),
        trace.actions([s for s in chosen if s < u.entry]),
        preserved,
        reason,
        trace.failure,
        verdicts,
        _undo(trace, chosen),
        dropped,
        _soft(trace, chosen),
        _unsettled(trace, chosen),
    )


def _rerun(
    trace: Trace, policy: RecoveryPolicy, u: Instance | None, reason: str, verdicts: tuple[Verdict, ...] = ()
) -> Plan:
    chosen = sorted(trace.steps)
    upstream = trace.actions([s for s in chosen if u is not None and s < u.entry])
    return Plan(
        "rerun",
        policy.name,
        u.id if u is not None else None,
        None,
        tuple(chosen),
        trace.actions(chosen),
        upstream,
        0,
        reason,
        trace.failure,
        verdicts,
        _undo(trace, chosen),
        (),
        _soft(trace, chosen),
        _unsettled(trace, chosen),
    )


def _undo(trace: Trace, steps: list[int]) -> tuple[Effect, ...]:
    """The confirmed compensable effects among `steps`, newest first: undone before the re-run."""
    return tuple(
        e
        for s in sorted(steps, reverse=True)
        if (e := trace.steps[s].effect) is not None and e.status == "confirmed" and e.cls == "compensable"
    )


def _soft(trace: Trace, steps: list[int]) -> tuple[int, ...]:
    """The confirmed effects among `steps` that are not undone first: asked for again as the
    same act on the new branch, they replay instead of acting twice (a re-run never re-sends)."""
    return tuple(
        s
        for s in steps
        if (e := trace.steps[s].effect) is not None and e.status == "confirmed" and e.cls != "compensable"
    )


def _unsettled(trace: Trace, steps: list[int]) -> tuple[int, ...]:
    return tuple(
        s
        for s in steps
        if (e := trace.steps[s].effect) is not None and e.status not in ("confirmed", "failed")
    )
