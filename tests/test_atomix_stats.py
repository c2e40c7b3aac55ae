"""The Atomix tables' interval for a share of runs (benchmarks/atomix/stats.py): the exact
Clopper-Pearson interval holds the point estimate, stays inside [0, 1], keeps a width at 0/n and
n/n (where the percentile bootstrap collapsed to one point), narrows as n grows, and agrees with
the beta quantiles it is defined by."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks" / "atomix"))

from stats import bootstrap, clopper_pearson, percent, proportion

# No deadline: an interval at n = 400 takes milliseconds, more on a machine shared with others.
SLOW = settings(deadline=None, max_examples=60)

counts = st.integers(min_value=1, max_value=400).flatmap(
    lambda n: st.tuples(st.integers(min_value=0, max_value=n), st.just(n))
)


@SLOW
@given(counts)
def test_the_interval_holds_the_estimate_inside_zero_one(kn: tuple[int, int]) -> None:
    k, n = kn
    lo, hi = clopper_pearson(k, n)
    assert 0.0 <= lo <= k / n <= hi <= 1.0
    assert lo < hi  # never a single point, whatever the count


@SLOW
@given(st.integers(min_value=1, max_value=400))
def test_all_or_none_keeps_a_width_given_by_the_closed_form(n: int) -> None:
    """At 0/n the upper bound solves (1 - p)^n = 0.025, at n/n the lower bound p^n = 0.025."""
    bound = 1 - 0.025 ** (1 / n)
    assert clopper_pearson(0, n) == (0.0, pytest.approx(bound, abs=1e-9))
    assert clopper_pearson(n, n) == (pytest.approx(1 - bound, abs=1e-9), 1.0)


@SLOW
@given(st.integers(min_value=0, max_value=50), st.integers(min_value=1, max_value=50))
def test_the_interval_narrows_as_n_grows_at_the_same_share(k: int, extra: int) -> None:
    n = k + extra
    lo1, hi1 = clopper_pearson(k, n)
    lo2, hi2 = clopper_pearson(4 * k, 4 * n)
    assert hi2 - lo2 < hi1 - lo1


@SLOW
@given(counts)
def test_the_interval_is_symmetric_in_successes_and_failures(kn: tuple[int, int]) -> None:
    k, n = kn
    lo, hi = clopper_pearson(k, n)
    lo_f, hi_f = clopper_pearson(n - k, n)
    assert lo == pytest.approx(1 - hi_f, abs=1e-9) and hi == pytest.approx(1 - lo_f, abs=1e-9)


@SLOW
@given(counts)
def test_the_bounds_sit_where_each_binomial_tail_is_two_and_a_half_percent(kn: tuple[int, int]) -> None:
    """The definition, checked with exact integer arithmetic on the binomial sums."""
    k, n = kn
    lo, hi = clopper_pearson(k, n)

    def at_most(j: int, p: float) -> float:
        return math.fsum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(j + 1))

    if k > 0:
        assert 1 - at_most(k - 1, lo) == pytest.approx(0.025, abs=1e-6)
    if k < n:
        assert at_most(k, hi) == pytest.approx(0.025, abs=1e-6)


def test_known_values_match_the_beta_quantiles() -> None:
    """Against scipy's beta quantiles where scipy is installed (it is no dependency here)."""
    beta = pytest.importorskip("scipy.stats").beta
    for k, n in [(1, 10), (5, 13), (39, 40), (0, 40), (150, 150), (500, 1000)]:
        lo, hi = clopper_pearson(k, n)
        want_lo = 0.0 if k == 0 else beta.ppf(0.025, k, n - k + 1)
        want_hi = 1.0 if k == n else beta.ppf(0.975, k + 1, n - k)
        assert (lo, hi) == (pytest.approx(want_lo, abs=1e-9), pytest.approx(want_hi, abs=1e-9))


def test_a_share_of_runs_prints_the_exact_interval_in_percent() -> None:
    est = percent([True] * 40)
    assert (est.value, est.n, est.method) == (100.0, 40, "exact")
    assert est.contains(99.9) and est.lo == pytest.approx(91.19, abs=0.01)
    assert proportion([]).n == 0 and math.isnan(proportion([]).value)


def test_invalid_counts_are_refused() -> None:
    for k, n in [(0, 0), (3, 2), (-1, 5)]:
        with pytest.raises(ValueError):
            clopper_pearson(k, n)


def test_a_continuous_measure_keeps_the_percentile_bootstrap() -> None:
    est = bootstrap([1.0, 2.0, 3.0, 4.0, 10.0])
    assert est.method == "bootstrap" and est.lo <= est.value <= est.hi
