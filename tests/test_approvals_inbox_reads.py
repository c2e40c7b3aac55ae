"""The approvals inbox reads only what it shows of a waiting run: its gate rows
(`store.load_named`), not the whole journal; what it lists is the same as before."""

from __future__ import annotations

import contextlib

import pytest

import daybook
from daybook import Daybook, Suspended
from daybook.errors import ConfigError


@daybook.workflow(name="inbox_reads_long_gate")
def long_gate(ctx: daybook.Context, steps: int) -> str:
    for i in range(steps):
        ctx.decide(f"s{i}", lambda i=i: i)
    return str(ctx.gate("refund", approvers=["alice"], timeout=3600, about={"order": "A-17"}).outcome)


def test_a_gate_after_many_steps_is_in_the_inbox_read_from_its_gate_rows_only(book: Daybook) -> None:
    book.inline_wait = 0.05
    with contextlib.suppress(Suspended):
        book.run(long_gate, 300, run_id="long")
    journal = book.journal("long")
    read = book.store.load_named("long", ("signal",), ("gate:", "verdict-check:", "escalate:", "overdue:"))
    # The gate's request and the wait for its verdict, in journal order, and nothing else.
    gate_row, wait_row = read
    assert (gate_row.kind, gate_row.name, wait_row.kind, wait_row.status) == (
        "decision",
        "gate:refund",
        "signal",
        "waiting",
    )
    assert wait_row.seq == gate_row.seq + 1 == journal[-1].seq  # the last rows of 300 steps'
    [gate] = book.approvals()
    assert (gate["run_id"], gate["state"], gate["approvers"], gate["about"]) == (
        "long",
        "waiting",
        ["alice"],
        {"order": "A-17"},
    )


def test_a_name_prefix_with_a_wildcard_is_refused(book: Daybook) -> None:
    with pytest.raises(ConfigError, match="letters, digits"):
        book.store.load_named("any", (), ("gate%",))
