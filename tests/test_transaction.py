"""Atomic multi-record commits (seed 001): one audit entry, invariants before commit, staged
writes made visible at once, a crash at any write point leaves all or nothing."""

from __future__ import annotations

import functools
import subprocess
import sys

import pytest
from conftest import HERE
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import daybook
from daybook import Daybook, InvariantViolated

# The invoice example (examples/invoice.py): its staging function is the one tested here.
sys.path.insert(0, str(HERE.parent / "examples"))
import invoice


def create_invoice(book: Daybook, number: str, lines: list[dict[str, float]], key: str | None = None):  # type: ignore[no-untyped-def]
    """The composite tool of the invoice example (examples/invoice.py): one call, one commit; the
    executor computes the totals."""
    write = functools.partial(invoice.write_invoice, number=number, lines=lines)
    return book.transaction(f"Create invoice {number}", write, author="billing-agent", key=key)


def test_an_invoice_is_one_commit_listing_its_four_records_with_a_computed_total(book: Daybook) -> None:
    done = create_invoice(
        book,
        "INV-1",
        [
            {"description": "seats", "qty": 10, "unit_price": 150},
            {"description": "setup", "unit_price": 350},
            {"description": "discount", "unit_price": -100},
        ],
    )
    assert done.result == 1750  # computed from the lines (the seed's 1850 does not add up)
    [audit] = book.commits()
    assert audit["commit_id"] == done.commit_id and audit["author"] == "billing-agent"
    assert len(audit["records"]) == 4 and audit["message"] == "Create invoice INV-1"
    assert book.record("invoices", "INV-1") == {"total": 1750, "lines": 3}
    assert book.orphans() == []


def test_the_same_key_twice_is_one_commit(book: Daybook) -> None:
    lines = [{"description": "x", "unit_price": 1}]
    first = create_invoice(book, "INV-2", lines, key="run-1/3")
    second = create_invoice(book, "INV-2", lines, key="run-1/3")
    assert first.commit_id == second.commit_id and len(book.commits()) == 1


def _balanced(records: dict[tuple[str, str], object]) -> None:
    total = sum(float(v["amount"]) for (c, _), v in records.items() if c == "postings")  # type: ignore[index]
    if abs(total) > 1e-9:
        raise InvariantViolated(f"debits and credits differ by {total:g}; nothing was committed")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(amounts=st.lists(st.integers(-1000, 1000), min_size=1, max_size=6))
def test_only_balanced_journal_entries_are_ever_committed(book: Daybook, amounts: list[int]) -> None:
    before = len(book.commits())

    def entry(tx: daybook.Transaction) -> None:
        for i, amount in enumerate(amounts):
            tx.put("postings", f"je-{before}-{i}", {"amount": amount})

    if sum(amounts) == 0:
        book.transaction("journal entry", entry, invariants=[_balanced])
        assert len(book.commits()) == before + 1
    else:
        with pytest.raises(InvariantViolated):
            book.transaction("journal entry", entry, invariants=[_balanced])
        assert len(book.commits()) == before
        assert book.record("postings", f"je-{before}-0") is None
    assert book.orphans() == []


@pytest.mark.parametrize("kill_after", [1, 2, 3, 4, 5])
def test_a_kill_at_any_write_point_leaves_all_four_records_or_none(db_url: str, kill_after: int) -> None:
    proc = subprocess.run(
        [sys.executable, str(HERE / "txchild.py"), db_url, str(kill_after)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == -9, proc.stderr
    with Daybook(db_url) as book:
        visible = [book.record("invoices", "INV-7")] + [book.record("lines", f"INV-7/{i}") for i in (1, 2, 3)]
        if kill_after > 4:
            assert all(v is not None for v in visible) and len(book.commits()) == 1
            assert book.orphans() == []
        else:
            assert visible == [None] * 4 and book.commits() == []
            assert len(book.orphans()) == kill_after  # staged, durable, never visible
            assert book.sweep_orphans(older_than=0) == 1
            assert book.orphans() == []
