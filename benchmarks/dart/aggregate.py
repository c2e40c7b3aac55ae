"""Aggregates over measured rows, the paper's way: success is the share of rows whose audit
passed; replay, up-replay, preserved and FM are medians over the successful rows; recovery
observed is the share that restored locally; status is the most common label."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from dart_harness import Row
from dart_stats import median


@dataclass(frozen=True)
class Agg:
    n: int
    succ: float
    replay: float | None
    up: float | None
    pres: float | None
    fm: float | None
    model: float | None
    recobs: float
    status: str
    planned_replay: float | None  # what the method planned to replay, successful or not
    planned_up: float | None
    fm_all: float | None  # median FM over every row, passed or not

    def cells(self) -> list[Any]:
        return [
            self.n,
            self.succ,
            self.replay,
            self.up,
            self.pres,
            self.fm,
            self.model,
            self.recobs,
            self.status,
        ]


def agg(rows: list[Row]) -> Agg:
    ok = [r for r in rows if r.safe]  # success: the audit passed (a blocked fallback may pass too)
    n = len(rows)
    status = Counter(r.status for r in rows).most_common(1)[0][0] if rows else "-"
    return Agg(
        n,
        len(ok) / n if n else 0.0,
        median([r.replayed for r in ok]),
        median([r.upstream for r in ok]),
        median([r.preserved for r in ok]),
        median([r.fm_ms for r in ok]),
        median([r.model_ms for r in ok]),
        sum(r.recobs for r in rows) / n if n else 0.0,
        status,
        median([r.replayed for r in rows]),
        median([r.upstream for r in rows]),
        median([r.fm_ms for r in rows]),
    )


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


AGG_HEADER = ["n", "succ", "replay", "up", "pres", "FM wall ms", "FM model ms", "RecObs", "status"]
