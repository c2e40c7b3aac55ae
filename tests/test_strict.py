"""Strict mode refuses the usual sources of non-determinism in a workflow body, not in steps."""

from __future__ import annotations

import random
import time

import pytest

import daybook
from daybook import Daybook


def test_strict_mode_refuses_sleep_and_random_in_the_body_and_allows_them_in_steps(
    db_url: str,
) -> None:
    with Daybook(db_url, strict=True) as book:

        @daybook.workflow
        def sleepy(ctx: daybook.Context) -> None:
            time.sleep(0.01)

        with pytest.raises(daybook.NonDeterminismError, match=r"time.sleep\(\) called in the workflow body"):
            book.run(sleepy, run_id="sleepy")
        assert book.get_run("sleepy").status == "needs_attention"  # fix the code, then resume

        @daybook.workflow
        def dice(ctx: daybook.Context) -> float:
            return random.random()

        with pytest.raises(daybook.NonDeterminismError, match=r"Use ctx.random\(\)"):
            book.run(dice, run_id="dice")

        @daybook.workflow
        def fine(ctx: daybook.Context) -> list[object]:
            ctx.sleep(0.01)  # durable, allowed
            drawn = ctx.decide("draw", lambda: random.randint(1, 6)).value  # in a step: recorded
            return [ctx.random(), ctx.uuid(), drawn]

        first = book.run(fine, run_id="fine")
        assert book.replay("fine") == first  # ctx.random() replays the same value
    # Outside a workflow body the guarded functions behave as always.
    assert 0 <= random.random() < 1
