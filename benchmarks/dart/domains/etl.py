"""ETL (deterministic, appendix): extract/transform/load over real files and SQL tables.

The producer resolves the source partition and commits it; transforms built on it record their
rows in SQL; an independent table is loaded; then the producer's load (SQL row plus an output
file) fails once. Effect-blocked cases publish the partition (irreversible) after the commit.
"""

from __future__ import annotations

import os

import dart_resources as rs
from cases import Shape

from . import Domain

SHAPE = Shape(
    "etl",
    "ResolvePartition",
    "Transform",
    "LoadTable",
    None,
    official=7,
    commit=7,
    dep=1,
    effect=2,
    consumers=2,
    others=1,
    width=2,
)


def setup(workdir: str) -> rs.Counterparty:
    db = f"{workdir}/etl.db"
    files = f"{workdir}/etl_out"
    os.makedirs(files, exist_ok=True)
    rs.create(db)
    return rs.Counterparty({"db": db, "files": files}, lambda: None)


DOMAIN = Domain("etl", "ETL", SHAPE, setup, effect_audit=True, prefix_audit=True, llm=False)
