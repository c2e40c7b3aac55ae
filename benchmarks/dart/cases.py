"""The case universe: scripted cases built from a domain's shape (T8's counts).

A commit-sensitive case (the stale-cache example): a producer resolves a value and commits it,
consumers read it and commit their own durable records, then the producer's late confirmation
fails once and the failure refreshes the stale cache. Variants: `dep` (the producer has no commit
checkpoint: only its entry is a candidate, and committed consumers block it) and `effect` (an
irreversible act of the producer lies after its commit). An official case fails transiently (no
refresh) inside the last instance, before anything consumed its work.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Shape:
    """A domain's reviewed structure: skeleton names, counts and sizes."""

    domain: str
    producer: str
    consumer: str
    other: str
    final: str | None  # a finalizer that reads the producer and consumers (schedule: the invitation)
    official: int
    commit: int
    dep: int  # commit-sensitive cases whose producer has no commit checkpoint
    effect: int  # commit-sensitive cases with an irreversible act after the producer's commit
    consumers: int = 1
    others: int = 1
    post: int = 0  # producer actions between its commit and the failing confirmation
    width: int = 3  # decisions per instance
    act_effect: bool = False  # the domain's consumers also make a durable act (diag repair)


@dataclass(frozen=True)
class Case:
    domain: str
    cid: str
    regime: str  # official | commit
    kind: str  # admitted | dep | effect
    blocks: list[dict[str, Any]]
    site: str
    drift: bool
    failed: str  # the failed instance, as the frozen spec names it
    expect: str  # the checkpoint kind DART should restore (entry | commit), or "none" (blocked)
    producer: str = "p0"
    consumers: list[str] = field(default_factory=list)


def _decide(name: str, fn: str, out: str, *args: Any) -> dict[str, Any]:
    return {"op": "decide", "name": name, "fn": fn, "out": out, "args": list(args)}


def _fill(entity: str, n: int) -> list[dict[str, Any]]:
    return [_decide(f"{entity}.step{i}", "step", f"_{entity}{i}", entity, i) for i in range(n)]


def _consumer(s: Shape, j: int, width: int) -> dict[str, Any]:
    c = f"c{j}"
    ops = [_decide(f"{c}.derive", "derive", c, c, "$p0"), *_fill(c, width - 1)]
    ops.append(
        {
            "op": "effect",
            "tool": "record",
            "kw": {"site": "record", "entity": c, "value": f"${c}", "based_on": "$p0"},
        }
    )
    if s.act_effect:
        ops.append({"op": "effect", "tool": "act", "kw": {"site": "act", "what": c, "body": f"${c}"}})
    ops.append({"op": "exit", "keys": [c]})
    return {"skel": s.consumer, "entity": c, "reads": ["p0"], "ops": ops}


def _other(s: Shape, m: int, width: int) -> dict[str, Any]:
    e = f"o{m}"
    ops = [*_fill(e, width - 1), _decide(f"{e}.pick", "step", e, e, 99), {"op": "exit", "keys": [e]}]
    return {"skel": s.other, "entity": e, "ops": ops}


def _final(s: Shape) -> dict[str, Any]:
    reads = ["p0", *(f"c{j}" for j in range(s.consumers))]
    ops = [
        _decide("final.derive", "derive", "final", "final", *(f"${r}" for r in reads)),
        {"op": "mail", "to": "team@example.test", "subject": "Invitation", "args": [f"${r}" for r in reads]},
        {"op": "exit", "keys": ["final"]},
    ]
    return {"skel": s.final, "entity": "final", "reads": reads, "ops": ops}


def commit_case(s: Shape, n: int, kind: str) -> Case:
    width = s.width + n % 2  # cases differ in how long each instance deliberates
    head = [
        _decide("p0.query", "query", "cands", "p0"),
        _decide("p0.choose", "choose", "p0", "$cands"),
        *_fill("p0", width - 2),
    ]
    if kind != "dep":
        head.append({"op": "commit", "keys": ["p0"]})
    # Earlier independent work comes first: a whole rerun replays it (the upstream replay).
    blocks = [_other(s, m, width) for m in range(s.others)]
    blocks.append({"skel": s.producer, "entity": "p0", "ops": head})
    blocks += [_consumer(s, j, width) for j in range(s.consumers)]
    if s.final:
        blocks.append(_final(s))
    tail = _fill("p0.late", s.post)
    if kind == "effect":
        tail.append(
            {"op": "effect", "tool": "act", "kw": {"site": "notify", "what": "notify", "body": "$p0"}}
        )
    tail += [
        {"op": "effect", "tool": "confirm", "kw": {"site": "confirm", "entity": "p0", "value": "$p0"}},
        {"op": "exit", "keys": ["p0"]},
    ]
    blocks.append({"skel": s.producer, "entity": "p0", "ops": tail})
    consumers = [f"c{j}" for j in range(s.consumers)] + (["final"] if s.final else [])
    expect = "commit" if kind == "admitted" else "none"
    cid = f"{s.domain}.cs{n}"
    return Case(
        s.domain,
        cid,
        "commit",
        kind,
        blocks,
        "confirm",
        True,
        f"{s.producer}::p0::0",
        expect,
        "p0",
        consumers,
    )


def official_case(s: Shape, n: int) -> Case:
    width = s.width + n % 2
    blocks = [_other(s, m, width) for m in range(s.others + 1)]
    ops = [_decide("fin.derive", "derive", "fin", "fin", "$o0"), *_fill("fin", width)]
    ops += [
        {"op": "effect", "tool": "confirm", "kw": {"site": "confirm", "entity": "fin", "value": "$fin"}},
        {"op": "exit", "keys": ["fin"]},
    ]
    blocks.append({"skel": s.consumer, "entity": "fin", "reads": ["o0"], "ops": ops})
    cid = f"{s.domain}.of{n}"
    return Case(
        s.domain,
        cid,
        "official",
        "admitted",
        blocks,
        "confirm",
        False,
        f"{s.consumer}::fin::0",
        "entry",
        "fin",
    )


def universe(s: Shape) -> list[Case]:
    """The domain's official cases, then its commit-sensitive ones (the blocked variants last)."""
    kinds = ["admitted"] * (s.commit - s.dep - s.effect) + ["dep"] * s.dep + ["effect"] * s.effect
    return [official_case(s, n) for n in range(s.official)] + [
        commit_case(s, n, k) for n, k in enumerate(kinds)
    ]


def spec(case: Case, run: str, res: dict[str, str], plain: bool = False) -> dict[str, Any]:
    return {"domain": case.domain, "run": run, "res": res, "blocks": case.blocks, "plain": plain}
