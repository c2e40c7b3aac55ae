"""Property: any mix of decisions and effects, SIGKILLed at any journal write, resumes to the
result of an uninterrupted run with every effect performed exactly once at the counterparty."""

from __future__ import annotations

import json
import uuid

import pytest
from conftest import killed, run_child
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from daybook import Daybook
from daybook.demo.bank import Bank

programs = st.lists(st.sampled_from("de"), min_size=1, max_size=6)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@pytest.mark.slow
@given(ops=programs, where=st.floats(0, 1), before=st.booleans())
def test_any_crash_point_resumes_to_the_uninterrupted_result_with_effects_once(
    db_url: str, ops: list[str], where: float, before: bool
) -> None:
    rows = sum(1 if op == "d" else 2 for op in ops)
    nth = 1 + int(where * (rows - 1))
    run_id = f"prop-{uuid.uuid4().hex[:8]}"
    expected = [i * 7 if op == "d" else i for i, op in enumerate(ops)]
    with Bank() as bank:
        flag = "--kill-before" if before else "--kill-after"
        proc = run_child(db_url, "start", run_id, "program", json.dumps([bank.url, ops]), flag, f"any:{nth}")
        assert killed(proc), proc.stdout + proc.stderr
        with Daybook(db_url) as book:
            assert book.resume(run_id, wait=10) == expected
        stats = bank.stats()
    effect_keys = {f"{run_id}/{i + 1}" for i, op in enumerate(ops) if op == "e"}
    assert stats["executions_by_key"] == dict.fromkeys(effect_keys, 1)
    assert all(n == 1 for n in stats["requests_by_key"].values())
