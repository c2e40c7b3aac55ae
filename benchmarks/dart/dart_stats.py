"""Paired statistics for T10 without scipy: the Wilcoxon signed-rank test (exact by dynamic
programming over the rank sums when there are no ties and n <= 60, else the normal
approximation with tie correction), a seeded bootstrap CI of the median difference, and Holm's
step-down adjustment."""

from __future__ import annotations

import math
import random
import statistics


def _ranks(values: list[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def _exact_p(w_plus: float, n: int) -> float:
    """Two-sided exact p of the signed-rank statistic with ranks 1..n (no ties)."""
    total = n * (n + 1) // 2
    counts = [0] * (total + 1)
    counts[0] = 1
    for r in range(1, n + 1):
        for s in range(total, r - 1, -1):
            counts[s] += counts[s - r]
    k = int(min(w_plus, total - w_plus))
    tail = sum(counts[: k + 1]) / 2**n
    return float(min(1.0, 2 * tail))


def wilcoxon(diffs: list[float]) -> float:
    """Two-sided p-value of H0: the paired differences are symmetric about 0 (zeros dropped)."""
    d = [x for x in diffs if x != 0]
    n = len(d)
    if n == 0:
        return 1.0
    ranks = _ranks([abs(x) for x in d])
    w_plus = sum(r for r, x in zip(ranks, d, strict=True) if x > 0)
    if len(set(abs(x) for x in d)) == n and n <= 60:
        return _exact_p(w_plus, n)
    mean = n * (n + 1) / 4
    ties: dict[float, int] = {}
    for r in ranks:
        ties[r] = ties.get(r, 0) + 1
    var = n * (n + 1) * (2 * n + 1) / 24 - sum(t**3 - t for t in ties.values()) / 48
    z = (abs(w_plus - mean) - 0.5) / math.sqrt(var) if var > 0 else 0.0
    return min(1.0, math.erfc(z / math.sqrt(2)))


def bootstrap_ci(diffs: list[float], seed: int = 7, rounds: int = 2000) -> tuple[float, float]:
    """95% percentile CI of the median paired difference."""
    rng = random.Random(seed)
    meds = sorted(statistics.median(rng.choices(diffs, k=len(diffs))) for _ in range(rounds))
    return meds[int(0.025 * rounds)], meds[int(0.975 * rounds) - 1]


def holm(pvalues: list[float]) -> list[float]:
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    adjusted = [0.0] * len(pvalues)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(pvalues) - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None
