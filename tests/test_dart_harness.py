"""The DART benchmark's harness (benchmarks/dart): two cases of each domain, recovered and audited
at the counterparties. Correctness of the audit, not timings: an admitted DART restore passes,
the entry-only restore of a commit-sensitive case is parked by the journal, and a whole rerun that
would re-send a changed invitation parks, and the audit fails it."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks" / "dart"))

from cases import Case, universe
from dart_harness import measure
from dart_resources import Counterparty
from domains import Domain, all_domains

from daybook import Daybook


def _two(dom: Domain) -> list[Case]:
    cases = universe(dom.shape)
    official = next(c for c in cases if c.regime == "official")
    committed = next(c for c in cases if c.regime == "commit" and c.kind == "admitted")
    return [official, committed]


@pytest.fixture(params=[d.name for d in all_domains()])
def domain(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Domain, Daybook, Counterparty]]:
    dom = next(d for d in all_domains() if d.name == request.param)
    cp = dom.setup(str(tmp_path))
    book = Daybook(str(tmp_path / "journal.db"))
    yield dom, book, cp
    book.close()
    cp.stop()


def test_dart_restores_both_cases_and_the_counterparties_agree(
    domain: tuple[Domain, Daybook, Counterparty],
) -> None:
    dom, book, cp = domain
    official, committed = _two(dom)
    row = measure(book, official, cp, "dart", 0, 0.0)
    assert (row.action, str(row.checkpoint).split("@")[0], row.upstream) == ("restore", "entry", 0)
    assert row.safe and row.status == "ok", row.audit
    row = measure(book, committed, cp, "dart", 0, 0.0)
    assert (row.action, str(row.checkpoint).split("@")[0], row.reason) == ("restore", "commit", "eligible")
    assert row.replayed == 1 + dom.shape.post and row.upstream == 0
    assert row.safe and all(v is not False for v in row.audit.values()), row.audit


def test_entry_only_on_a_commit_sensitive_case_is_parked_and_fails_the_audit(
    domain: tuple[Domain, Daybook, Counterparty],
) -> None:
    dom, book, cp = domain
    row = measure(book, _two(dom)[1], cp, "entry", 0, 0.0)
    assert row.error == "NonDeterminismError" and row.status == "no-recov"
    assert not row.safe and not row.audit["semantic"]


def test_a_rerun_that_would_resend_a_changed_invitation_parks_and_fails_the_audit(tmp_path: Path) -> None:
    dom = next(d for d in all_domains() if d.name == "sched")
    cp = dom.setup(str(tmp_path))
    book = Daybook(str(tmp_path / "journal.db"))
    try:
        row = measure(book, _two(dom)[1], cp, "retry", 0, 0.0)
    finally:
        book.close()
        cp.stop()
    # The rerun re-derived the refreshed slot, so it asked for the invitation (irreversible, sent
    # with the old slot) with other arguments: not re-sent, the run parked, the audit fails.
    assert (row.action, row.error, row.status) == ("rerun", "NeedsAttention", "no-recov")
    assert not row.safe and row.audit["effect"] is False
