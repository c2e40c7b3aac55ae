"""Statistics for the Atomix tables: the percentile bootstrap (95%, fixed seed, pure Python so
the bench extra needs no numpy) and the `Estimate` every table cell prints (value, CI, n)."""

from __future__ import annotations

import bisect
import itertools
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

RESAMPLES = 10_000
_BUDGET = 2_000_000  # draws per interval: large samples get fewer resamples (never < 1,000)


@dataclass(frozen=True)
class Estimate:
    """A statistic over n samples with its 95% percentile-bootstrap interval."""

    value: float
    lo: float
    hi: float
    n: int

    def cell(self, digits: int = 1) -> str:
        return f"{self.value:,.{digits}f} [{self.lo:,.{digits}f}, {self.hi:,.{digits}f}] n={self.n}"

    def overlaps(self, other: Estimate) -> bool:
        return self.lo <= other.hi and other.lo <= self.hi

    def contains(self, x: float) -> bool:
        return self.lo <= x <= self.hi

    def as_json(self) -> dict[str, float]:
        return {"value": self.value, "lo": self.lo, "hi": self.hi, "n": self.n}


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


def percent(flags: Sequence[bool]) -> Estimate:
    """Share of true flags, in percent, with its CI."""
    est = bootstrap([1.0 if f else 0.0 for f in flags])
    return Estimate(est.value * 100, est.lo * 100, est.hi * 100, est.n)


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
