"""Travel planning (deterministic, appendix): synthetic TravelPlanner-shaped tasks (the dataset
is not available offline) over a SQLite catalogue and booking ledger.

The producer resolves the destination city and commits it; the day plans built on it record
their bookings; then the producer's booking confirmation fails once. Effect-blocked cases pay a
non-refundable deposit (irreversible) after the commit.
"""

from __future__ import annotations

import dart_resources as rs
from cases import Shape

from . import Domain

SHAPE = Shape(
    "travel",
    "ResolveCity",
    "PlanDay",
    "PickRestaurant",
    None,
    official=4,
    commit=3,
    dep=1,
    effect=1,
    consumers=2,
    others=0,
    width=2,
)


def setup(workdir: str) -> rs.Counterparty:
    db = f"{workdir}/travel.db"
    rs.create(db)
    return rs.Counterparty({"db": db}, lambda: None)


DOMAIN = Domain("travel", "Travel", SHAPE, setup, effect_audit=True, prefix_audit=True, llm=False)
