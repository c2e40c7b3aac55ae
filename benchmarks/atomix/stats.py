"""Statistics for the Atomix tables, pure Python so the bench extra needs no numpy: the exact
Clopper-Pearson interval for a share of runs (success %, contamination %), the percentile
bootstrap (95%, fixed seed) for continuous measures and totals (latencies, faults per run), and
the `Estimate` every table cell prints (value, CI, n, and which interval it is).

Why not the bootstrap for shares: resampling 40 runs that all succeeded gives 40/40 every time,
so the percentile interval collapses to the single point 100% and "contains the analytic 99.9%"
fails although 40/40 is what 99.9% produces most of the time. The exact interval is the set of
success probabilities that 40/40 does not reject at 5% (two-sided), [91.2%, 100%] here."""

from __future__ import annotations

import bisect
import itertools
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

RESAMPLES = 10_000
_BUDGET = 2_000_000  # draws per interval: large samples get fewer resamples (never < 1,000)


CONFIDENCE = 0.95


@dataclass(frozen=True)
class Estimate:
    """A statistic over n samples with its 95% interval; `method` names the interval
    ("bootstrap": percentile bootstrap; "exact": Clopper-Pearson for a share)."""

    value: float
    lo: float
    hi: float
    n: int
    method: str = "bootstrap"

    def cell(self, digits: int = 1) -> str:
        return f"{self.value:,.{digits}f} [{self.lo:,.{digits}f}, {self.hi:,.{digits}f}] n={self.n}"

    def overlaps(self, other: Estimate) -> bool:
        return self.lo <= other.hi and other.lo <= self.hi

    def contains(self, x: float) -> bool:
        return self.lo <= x <= self.hi

    def as_json(self) -> dict[str, float | str]:
        return {"value": self.value, "lo": self.lo, "hi": self.hi, "n": self.n, "ci": self.method}


def _percentiles(values: list[float]) -> tuple[float, float]:
    values.sort()
    last = len(values) - 1
    return values[round(0.025 * last)], values[round(0.975 * last)]


def _binomial_cdf(n: int, p: float) -> list[float]:
    """Cumulative Binomial(n, p) probabilities, for drawing by inversion (Python 3.11 has no
    binomialvariate)."""
    if p in (0.0, 1.0):
        return [1.0 - p] * n + [1.0]
    pmf = [math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(n + 1)]
    cdf = list(itertools.accumulate(pmf))
    cdf[-1] = 1.0
    return cdf


def bootstrap(samples: Sequence[float], stat: Callable[[list[float]], float] | None = None) -> Estimate:
    """Percentile bootstrap of `stat` (the mean by default) over `samples`; seed fixed, so the
    same samples always print the same interval."""
    data = [float(x) for x in samples]
    n = len(data)
    if n == 0:
        return Estimate(float("nan"), float("nan"), float("nan"), 0)
    fn = stat or (lambda xs: sum(xs) / len(xs))
    rng = random.Random(12345)
    if set(data) <= {0.0, 1.0}:
        # A share: resampling n flags is a Binomial(n, p) draw, far cheaper than n choices.
        p = sum(data) / n
        scale = fn([1.0] * n) if stat else 1.0
        cdf = _binomial_cdf(n, p)
        values = [bisect.bisect_left(cdf, rng.random()) / n * scale for _ in range(RESAMPLES)]
    else:
        rounds = max(1000, min(RESAMPLES, _BUDGET // n))
        values = [fn(rng.choices(data, k=n)) for _ in range(rounds)]
    lo, hi = _percentiles(values)
    return Estimate(fn(data), lo, hi, n)


def _log_pmf(i: int, n: int, p: float) -> float:
    """log P(X = i) for X ~ Binomial(n, p), 0 < p < 1 (in logs: math.comb(n, i) overflows a
    float for n in the thousands)."""
    return (
        math.lgamma(n + 1)
        - math.lgamma(i + 1)
        - math.lgamma(n - i + 1)
        + i * math.log(p)
        + (n - i) * math.log1p(-p)
    )


def _at_most(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p), 0 < p < 1: summed over the shorter side."""
    if k < n / 2:
        return min(1.0, math.fsum(math.exp(_log_pmf(i, n, p)) for i in range(k + 1)))
    return max(0.0, 1.0 - math.fsum(math.exp(_log_pmf(i, n, p)) for i in range(k + 1, n + 1)))


def _solve(f: Callable[[float], float], target: float) -> float:
    """The p in (0, 1) where the decreasing f(p) crosses target, by bisection (to ~1e-12)."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if f(mid) > target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def clopper_pearson(k: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The exact (Clopper-Pearson) two-sided interval for a binomial proportion, k of n.

    The lower bound is the p at which seeing k or more successes has probability alpha/2, the
    upper the p at which seeing k or fewer has alpha/2 (the beta quantiles
    Beta(alpha/2; k, n-k+1) and Beta(1-alpha/2; k+1, n-k), computed from the binomial tails).
    At 0/n the lower bound is 0 and the upper 1 - (alpha/2)^(1/n); at n/n symmetrically. The
    interval covers the true p at least `confidence` of the time for every p and n: it is
    conservative, never too narrow."""
    if n <= 0 or not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n and n > 0, got k={k}, n={n}")
    tail = (1.0 - confidence) / 2
    lo = 0.0 if k == 0 else _solve(lambda p: _at_most(k - 1, n, p), 1.0 - tail)
    hi = 1.0 if k == n else _solve(lambda p: _at_most(k, n, p), tail)
    return lo, hi


def proportion(flags: Sequence[bool]) -> Estimate:
    """Share of true flags (0..1) with its exact 95% interval."""
    n = len(flags)
    if n == 0:
        return Estimate(float("nan"), float("nan"), float("nan"), 0, "exact")
    k = sum(1 for f in flags if f)
    lo, hi = clopper_pearson(k, n)
    return Estimate(k / n, lo, hi, n, "exact")


def percent(flags: Sequence[bool]) -> Estimate:
    """Share of true flags, in percent, with its exact (Clopper-Pearson) 95% interval."""
    est = proportion(flags)
    return Estimate(est.value * 100, est.lo * 100, est.hi * 100, est.n, est.method)


def total(counts: Sequence[float]) -> Estimate:
    """Sum over runs (e.g. faults over 30 tasks) with its CI, resampling runs."""
    return bootstrap(counts, stat=sum)


def mean(samples: Sequence[float]) -> Estimate:
    return bootstrap(samples)


def p99(samples: Sequence[float]) -> float:
    data = sorted(samples)
    return data[min(len(data) - 1, round(0.99 * (len(data) - 1)))] if data else float("nan")


def linear_fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float, float]:
    """Least-squares slope, intercept and R² of ys on xs."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs) or 1.0
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    intercept = my - slope * mx
    ss_res = sum((y - (slope * x + intercept)) ** 2 for x, y in zip(xs, ys, strict=True))
    ss_tot = sum((y - my) ** 2 for y in ys) or 1.0
    return slope, intercept, 1.0 - ss_res / ss_tot


def binomial_p(k: int, n: int, p: float) -> float:
    """Two-sided exact binomial test: the probability, under Binomial(n, p), of an outcome no
    more likely than k successes (how surprising k of n is if the analytic p holds)."""
    pmf = [math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(n + 1)]
    return min(1.0, sum(x for x in pmf if x <= pmf[k] * (1 + 1e-9)))
