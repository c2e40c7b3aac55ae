"""Runs of their own: T6/T7 (the decisive rows under five scripted policy variants), the T23
"Friday" probe (a weakened key that matches a stale and a refined instance), and T3 extended
(the selector against the exact oracle on random instance graphs)."""

from __future__ import annotations

import random
from typing import Any

import dart_resources as rs
from aggregate import agg
from cases import Case, universe
from dart_harness import fail, measure
from dart_report import Table
from domains import navigation, schedule
from localize import matches, trace_of

from daybook import Daybook, NonDeterminismError
from daybook.errors import DaybookError

VARIANTS = ("GLM", "GPT", "Gemini", "DeepSeek", "Qwen")  # the model families they stand in for


def t6_t7(workdir: str, think: float, repeats: int) -> Table:
    t = Table(
        "T6/T7",
        "five scripted policy variants (seed and delay spread) on the decisive rows",
        ["row", "variant", "method", "succ", "replay", "up", "pres", "FM wall ms", "FM model ms"],
    )
    sched_case = next(c for c in universe(schedule.SHAPE) if c.regime == "commit")
    nav_case = next(c for c in universe(navigation.SHAPE) if c.regime == "commit")
    control = next(c for c in universe(schedule.SHAPE) if c.regime == "official")
    plan = [("sched commit-sens.", sched_case, m) for m in ("entry", "retry", "dart")]
    plan += [("nav commit-sens.", nav_case, "dart"), ("official control", control, "dart")]
    structure: dict[tuple[str, str], set[tuple[Any, ...]]] = {}
    for dom, cases in (
        ("sched", [p for p in plan if p[1].domain == "sched"]),
        ("nav", [p for p in plan if p[1].domain == "nav"]),
    ):
        cp = (schedule.DOMAIN if dom == "sched" else navigation.DOMAIN).setup(workdir)
        book = Daybook(f"{workdir}/t6_{dom}.journal.db")
        try:
            for label, case, method in cases:
                for v, name in enumerate(VARIANTS):
                    rows = [
                        measure(book, case, cp, method, rep, think, variant=v + 1) for rep in range(repeats)
                    ]
                    a = agg(rows)
                    t.row(
                        label,
                        name,
                        method,
                        a.succ,
                        a.planned_replay,
                        a.planned_up,
                        rows[0].preserved,
                        a.fm,
                        a.model,
                    )
                    structure.setdefault((label, method), set()).add(
                        (a.succ, a.planned_replay, a.planned_up, rows[0].preserved)
                    )
        finally:
            cp.stop()
            book.close()
    for key, seen in structure.items():
        t.check(
            len(seen) == 1,
            f"{key[0]} {key[1]}: succ/replay/up/preserved identical across the 5 variants ({sorted(seen)})",
        )
    t.notes.append(
        "Model effects (GPT's 0.80 on the nav row, the per-model FM spread) cannot "
        "be reproduced without models: the variants differ only in seed and delay "
        "spread, so only the structural columns are evidence."
    )
    return t


def _friday_case() -> Case:
    d = "$p0"
    blocks: list[dict[str, Any]] = [
        {
            "skel": "ResolveSlot",
            "entity": "p0",
            "ops": [
                {"op": "decide", "name": "p0.query", "fn": "query", "out": "cands", "args": ["p0"]},
                {"op": "decide", "name": "p0.choose", "fn": "choose", "out": "p0", "args": ["$cands"]},
                {"op": "exit", "keys": ["p0"]},
            ],
        },
        {
            "skel": "ResolveSlot",
            "entity": "p0",
            "reads": ["p0"],
            "ops": [
                {"op": "decide", "name": "p0.refine", "fn": "derive", "out": "p0", "args": ["Friday", d]},
                {"op": "commit", "keys": ["p0"]},
            ],
        },
        {
            "skel": "FinalizeSchedule",
            "entity": "final",
            "reads": ["p0"],
            "ops": [
                {"op": "mail", "to": "team@example.test", "subject": "Invitation", "args": [d]},
                {"op": "exit", "keys": []},
            ],
        },
        {
            "skel": "ResolveSlot",
            "entity": "p0",
            "ops": [
                {"op": "effect", "tool": "confirm", "kw": {"site": "confirm", "entity": "p0", "value": d}},
                {"op": "exit", "keys": ["p0"]},
            ],
        },
    ]
    case = Case(
        "sched", "sched.friday", "commit", "admitted", blocks, "confirm", True, "ResolveSlot::p0::1", "commit"
    )
    return case


def friday_probe(workdir: str) -> dict[str, Any]:
    """Schedule: slot p0 resolved (::0, exited), then refined to a "Friday" value (::1, committed)
    and consumed by the invitation; ::1's confirmation fails. The weakened key ResolveSlot::p0
    matches both instances; forcing the stale ::0 re-derives p0 under the committed refinement."""
    case = _friday_case()
    cp = schedule.DOMAIN.setup(workdir)
    book = Daybook(f"{workdir}/friday.journal.db")
    try:
        fail(book, case, cp, "friday")
        found = matches(trace_of(book, "friday"), "ResolveSlot::p0")
        resolved = book.recover("friday", instance="ResolveSlot::p0", dry_run=True).instance
        before = rs.rows(cp.res["db"], "confirms", "friday")
        try:
            rec = book.recover("friday", instance="ResolveSlot::p0::0", policy="entry")
            value = (rec.result or {}).get("p0", "")
            erased = not str(value).startswith("Friday")
            forced = f"restored entry of ::0; final p0 = {value!r}"
        except (NonDeterminismError, DaybookError) as exc:
            erased = True
            forced = (
                f"{type(exc).__name__}: the re-derived p0 differs under the committed refinement (run parked)"
            )
        return {
            "candidates": found,
            "resolved": resolved,
            "forced": forced,
            "erased": erased,
            "confirms_before": len(before),
        }
    finally:
        cp.stop()
        book.close()


def t3_extended(examples: int, seed: int = 15) -> Table:
    """The selector vs the exact oracle (tests/test_dart_property.py's journal builder and oracle),
    on seeded random programs; false blocks are refused checkpoints the oracle finds safe."""
    import test_dart_property as prop

    from daybook import RecoveryPolicy
    from daybook.recovery.select import judge
    from daybook.recovery.trace import lift

    rng = random.Random(seed)
    admitted = unsafe = blocked = false_block = 0
    for _ in range(examples):
        program = [
            (
                rng.randint(0, 3),
                rng.choice(["act", "commit", "effect", "read"]),
                set(rng.sample(prop.KEYS, rng.randint(0, 2))),
                rng.choice(prop.TOOLS),
                rng.choice(["confirmed", "confirmed", "failed", "unknown"]),
            )
            for _ in range(rng.randint(3, 24))
        ]
        w, u = prop.build(program, set(rng.sample(prop.KEYS, rng.randint(0, 2))))
        trace = lift(w.steps)
        inst = trace.instances[u]
        for kind, step in inst.checkpoints:
            if kind == "exit":
                continue
            v = judge(trace, inst, kind, step, RecoveryPolicy())
            bad = prop.unsafe(w, trace, u, step)
            admitted += v.admissible
            unsafe += v.admissible and bad
            blocked += not v.admissible
            false_block += (not v.admissible) and not bad
    t = Table(
        "T3-ext",
        "selector vs exact oracle, random instance graphs",
        [
            "examples",
            "checkpoints admitted",
            "unsafe admits",
            "checkpoints blocked",
            "false blocks",
            "false-block rate",
        ],
    )
    rate = false_block / blocked if blocked else 0.0
    t.row(examples, admitted, unsafe, blocked, false_block, rate)
    t.check(
        unsafe == 0 and examples >= 10_000,
        f"0 unsafe admissions on >=10k examples (ours {unsafe} on {examples})",
    )
    t.notes.append(f"false-block rate vs the oracle: {rate:.3f} (the paper only says 'conservative')")
    return t
