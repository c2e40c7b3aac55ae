"""The DART selector against an exact oracle, on random instance graphs (spec T3 extended).

Hypothesis builds journals of interleaved subtask instances: entries and resumes that read keys,
commits that write keys (what was really written), declared outputs that over-approximate them,
and effects of every class and outcome. The oracle simulates the rollback of the failed instance
to each checkpoint with the *actual* writes: unsafe iff a committed instance read a value the
rollback undoes, or an irreversible or unsettled effect would be rolled back. The selector must
never admit an unsafe checkpoint; the same check with blocking off finds unsafe admissions, which
shows the check can fail.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

import daybook
from daybook import Event, Kind, RecoveryPolicy
from daybook.recovery.select import judge, select
from daybook.recovery.trace import Trace, lift


@daybook.tool(irreversible=True)
def prop_irreversible(*, idempotency_key: str) -> None: ...


@daybook.tool(idempotent=True, irreversible=False)
def prop_undo(*, original: object, result: object, idempotency_key: str) -> None: ...


@daybook.tool(idempotent=True, inverse=prop_undo)
def prop_compensable(*, idempotency_key: str) -> None: ...


@daybook.tool(idempotent=True, irreversible=False, bufferable=True)
def prop_bufferable(*, idempotency_key: str) -> None: ...


TOOLS = ["prop_irreversible", "prop_compensable", "prop_bufferable"]
KEYS = ["a", "b", "c", "d"]


@dataclass
class World:
    """The journal being built, and the ground truth the oracle reads."""

    steps: dict[int, list[Event]] = field(default_factory=dict)
    writes: list[tuple[int, str, str]] = field(default_factory=list)  # (step, instance, key)
    reads: list[tuple[int, str, str]] = field(default_factory=list)

    def add(self, kind: Kind, name: str, **fields: object) -> int:
        n = len(self.steps) + 1
        self.steps[n] = [Event("p", n, kind.value, n, name, **fields)]  # type: ignore[arg-type]
        return n

    def marker(self, kind: str, iid: str, **data: object) -> int:
        return self.add(Kind.DECISION, f"subtask:{kind}", data={"value": {"instance": iid, **data}})


ops = st.lists(
    st.tuples(
        st.integers(0, 3),  # which instance acts
        st.sampled_from(["act", "commit", "effect", "read"]),
        st.sets(st.sampled_from(KEYS), max_size=2),
        st.sampled_from(TOOLS),
        st.sampled_from(["confirmed", "confirmed", "failed", "unknown"]),
    ),
    min_size=3,
    max_size=24,
)


def build(program: list[tuple[int, str, set[str], str, str]], extra_outputs: set[str]) -> tuple[World, str]:
    """A journal from a program of ops; returns it and the failing instance (the last to act)."""
    w = World()
    entered: set[int] = set()
    active: int | None = None
    for who, op, keys, tool, status in program:
        iid = f"K::e{who}::0"
        if who != active:
            if active is not None:
                w.marker("leave", f"K::e{active}::0")
            if who in entered:
                w.marker("resume", iid, reads=[])
            else:
                outputs = sorted(set(KEYS[who : who + 1]) | extra_outputs)
                w.marker("entry", iid, skeleton="K", entity=f"e{who}", ordinal=0, reads=[], outputs=outputs)
                entered.add(who)
            active = who
        if op == "read":
            n = w.marker("resume", iid, reads=sorted(keys))
            w.reads += [(n, iid, k) for k in keys]
        elif op == "commit":
            n = w.marker("commit", iid, writes=sorted(keys))
            w.writes += [(n, iid, k) for k in keys]
        elif op == "effect":
            n = w.add(Kind.INTENT, tool, key=f"p/{len(w.steps) + 1}")
            if status != "unknown":
                w.steps[n].append(Event("p", n * 100, Kind.OUTCOME.value, n, tool, status=status))
        else:
            w.add(Kind.DECISION, "act", data={"value": 1})
    return w, f"K::e{active}::0"


def unsafe(w: World, trace: Trace, u: str, position: int) -> bool:
    """The exact oracle: does rolling `u` back to `position` break a committed consumer or cross
    an effect that cannot be undone?"""
    undone = {(s, k) for s, i, k in w.writes if i == u and s > position}
    for r, v, k in w.reads:
        if v == u:
            continue
        seen = max((s for s, _, key in w.writes if key == k and s < r), default=None)
        if seen is not None and (seen, k) in undone and trace.instances[v].committed_after(r):
            return True
    for s in trace.instances[u].steps:
        eff = trace.steps[s].effect
        live = s > position and eff is not None and eff.status != "failed"
        if live and eff is not None and (eff.cls == "irreversible" or eff.status != "confirmed"):
            return True
    return False


def verdicts(
    program: list[tuple[int, str, set[str], str, str]], extra: set[str], blocking: bool
) -> list[bool]:
    """For each candidate checkpoint of the failed instance: admitted and unsafe?"""
    w, u = build(program, extra)
    trace = lift(w.steps)
    inst = trace.instances[u]
    out = []
    for kind, step in inst.checkpoints:
        if kind == "exit":
            continue
        v = judge(trace, inst, kind, step, RecoveryPolicy(blocking=blocking))
        out.append(v.admissible and unsafe(w, trace, u, step))
    return out


@settings(max_examples=1500, deadline=None)
@given(ops, st.sets(st.sampled_from(KEYS), max_size=2))
def test_dart_never_admits_a_checkpoint_the_exact_oracle_finds_unsafe(
    program: list[tuple[int, str, set[str], str, str]], extra: set[str]
) -> None:
    assert not any(verdicts(program, extra, blocking=True))


def test_the_oracle_catches_unsafe_admissions_when_blocking_is_off() -> None:
    # Instance 0 writes "a" after its entry, instance 1 reads it and commits, then instance 0
    # fails: restoring 0's entry undoes what 1 consumed.
    program = [
        (0, "act", set(), "prop_bufferable", "confirmed"),
        (0, "commit", {"a"}, "prop_bufferable", "confirmed"),
        (1, "read", {"a"}, "prop_bufferable", "confirmed"),
        (1, "commit", {"b"}, "prop_bufferable", "confirmed"),
        (0, "act", set(), "prop_bufferable", "confirmed"),
    ]
    assert verdicts(program, set(), blocking=False)[0] is True  # the entry: admitted, unsafe
    assert not any(verdicts(program, set(), blocking=True))


def test_no_policy_re_runs_an_effect_whose_outcome_is_unknown() -> None:
    program = [
        (0, "act", set(), "prop_bufferable", "confirmed"),
        (0, "effect", set(), "prop_compensable", "unknown"),
        (0, "act", set(), "prop_bufferable", "confirmed"),
    ]
    w, u = build(program, set())
    trace = lift(w.steps)
    for name in ("dart", "entry", "coarse", "retry"):
        plan = select(trace, RecoveryPolicy(name), u)
        assert plan.unsettled == (3,), name  # the recovery refuses until it is resolved
    verdict = judge(trace, trace.instances[u], "entry", 1, RecoveryPolicy())
    assert not verdict.effect_allowed and "not settled" in verdict.blocking_effects[0]
