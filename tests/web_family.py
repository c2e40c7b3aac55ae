"""Runs that belong together, made for the run tree and recovery views' tests: a parent with two
children, a speculation of two branches and a continue-as-new segment; a run with compensable
steps to fork; a run a person steers while it waits. Each made by the real runtime."""

from __future__ import annotations

from typing import Any

import pytest

import daybook
from daybook import Daybook

WORLD: list[str] = []  # what the compensable steps did (and their undos undid)


def _unstep(original: dict[str, Any], result: str, idempotency_key: str) -> None:
    if result in WORLD:
        WORLD.remove(result)


web_unstep = daybook.tool(idempotent=True, irreversible=False, name="web_unstep")(_unstep)


@daybook.tool(inverse=web_unstep, name="web_step")
def web_step(i: int, idempotency_key: str) -> str:
    WORLD.append(f"step{i}:{idempotency_key}")
    return WORLD[-1]


@daybook.workflow(name="web_leaf")
def leaf(ctx: daybook.Context, n: int) -> int:
    return int(ctx.decide("double", lambda: n * 2).value)


def _priced(price: int) -> Any:
    def branch(ctx: daybook.Context) -> dict[str, int]:
        return {"price": int(ctx.decide("quote", lambda: price).value)}

    return branch


@daybook.workflow(name="web_family")
def family(ctx: daybook.Context, segment: int, kids: Any = None, best: Any = None) -> dict[str, Any]:
    if segment == 0:
        kids = [ctx.child(leaf, 1), ctx.child(leaf, 2)]
        best = ctx.speculate(
            {"cheap": _priced(3), "dear": _priced(9)},
            choose=lambda found: min(found, key=lambda k: found[k]["price"]),
        )
        ctx.continue_as_new(1, kids=kids, best=best)
    return {"segment": segment, "kids": kids, "best": best}


@daybook.workflow(name="web_steps")
def steps(ctx: daybook.Context, count: int = 5) -> int:
    for i in range(count):
        ctx.effect(web_step, i=i)
    return len(WORLD)


@daybook.workflow(name="web_steered")
def steered(ctx: daybook.Context) -> list[str]:
    ctx.decide("plan", lambda: "outline")
    ctx.wait_for("go", timeout=3600)
    heard = [r.text for r in ctx.revisions()]
    ctx.decide("draft", lambda: f"draft with {heard}")
    return heard


@daybook.workflow(name="web_retracted")
def retracted(ctx: daybook.Context) -> list[str]:
    ctx.effect(web_step, i=0)
    ctx.effect(web_step, i=1)
    ctx.wait_for("go", timeout=3600)
    for rev in ctx.revisions():
        if rev.kind == "retract" and rev.target is not None and rev.binding:
            ctx.compensate(keys=[rev.target], strict=False)
    ctx.effect(web_step, i=2)
    return list(WORLD)


def make_family(book: Daybook) -> None:
    """`fam` (two children, a speculation) continued as `fam~2`."""
    assert book.run(family, 0, run_id="fam") == {"segment": 1, "kids": [2, 4], "best": {"price": 3}}


def make_fork(book: Daybook) -> str:
    """`orig` (five compensable steps) forked at step 2 as `orig~fork-...`: steps 3-5 undone."""
    WORLD.clear()
    book.run(steps, run_id="orig")
    fork_id, _ = book.fork("orig", 2)
    book.resume(fork_id)
    return fork_id


def make_steered(book: Daybook) -> None:
    """`steered`: a revision read at its third step."""
    book.inline_wait = 0
    with pytest.raises(daybook.Suspended):
        book.run(steered, run_id="steered")
    book.steer("steered", "revise", "shorter, please", author="bo", wait=0)
    book.signal("steered", "go")
    book.resume("steered")


BROKEN = {"price": True}  # the bug the retried run hits once, then is fixed


def _price() -> int:
    if BROKEN["price"]:
        raise KeyError("price")
    return 2


@daybook.workflow(name="web_flaky")
def flaky(ctx: daybook.Context) -> int:
    ctx.decide("plan", lambda: 1)
    ctx.decide("price", _price)
    return int(ctx.decide("total", lambda: 3).value)


def make_retried(book: Daybook) -> None:
    """`flaky`: parked on a decision's bug at step 2, fixed, retried (a journal branch)."""
    BROKEN["price"] = True
    with pytest.raises(daybook.RunParked):
        book.run(flaky, run_id="flaky")
    BROKEN["price"] = False
    book.retry("flaky")
    assert book.resume("flaky") == 3


def make_retracted(book: Daybook) -> None:
    """`retracted`: two steps done, then a retraction of the second read at step 4 (undone)."""
    WORLD.clear()
    book.inline_wait = 0
    with pytest.raises(daybook.Suspended):
        book.run(retracted, run_id="retracted")
    book.steer("retracted", "retract", "not that one", author="bo", target="retracted/2", wait=0)
    book.signal("retracted", "go")
    assert book.resume("retracted") == ["step0:retracted/1", "step2:retracted/6"]
