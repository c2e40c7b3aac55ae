"""The read scope a web page runs in (`daybook.store.read_scope`), on both stores: each run's
whole journal is read once while a page uses it, reads after a seq always reach the store, and a
page over many runs keeps only the last few journals (the approvals inbox reads every waiting
run's: holding them all would hold them all in memory)."""

from __future__ import annotations

from typing import Any

import pytest

import daybook
from daybook import Daybook
from daybook.store import read_scope as scope


@daybook.workflow(name="read_scope_steps")
def steps(ctx: daybook.Context, n: int) -> int:
    return sum(int(ctx.decide("step", lambda i=i: i).value) for i in range(n))


def test_a_scope_reads_each_journal_once_and_keeps_only_the_last_few(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Daybook(db_url) as book:
        runs = [f"r{i}" for i in range(scope.KEEP + 2)]
        for run_id in runs:
            book.run(steps, 3, run_id=run_id)
        reads: list[tuple[str, int]] = []
        inner = book.store.inner  # type: ignore[attr-defined]  # the backend under the payload guard
        real = inner.load

        def load(run_id: str, after: int = 0, until: int | None = None) -> Any:
            reads.append((run_id, after))
            return real(run_id, after, until)

        monkeypatch.setattr(inner, "load", load)
        with scope.read_scope():
            first = book.journal("r0")
            assert book.journal("r0") == first and book.journal("r0") is not first  # a copy each time
            assert reads == [("r0", 0)]
            book.store.load("r0", 2)  # after a seq: the store, every time
            assert reads[-1] == ("r0", 2)
            for run_id in runs[1:]:  # more runs than a scope keeps: r0 is let go
                book.journal(run_id)
            reads.clear()
            book.journal(runs[-1])  # kept
            assert reads == []
            book.journal("r0")  # let go: read again
            assert reads == [("r0", 0)]
        reads.clear()
        book.journal("r0")  # outside a scope: the store, every time
        book.journal("r0")
        assert reads == [("r0", 0), ("r0", 0)]
