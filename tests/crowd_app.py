"""A workflow that completes only when `n` runs are inside its one effect at the same time: a
worker that lost threads cannot finish a crowd of `n` runs (`tests/test_worker_capacity.py`).
Each run's effect appends a line to its own file, the counterparty's record of executions."""

from __future__ import annotations

import time
from pathlib import Path

import daybook


@daybook.tool(retry=daybook.Retry(max_attempts=1))
def arrive(*, folder: str, name: str, n: int, idempotency_key: str) -> int:
    """Wait (up to 120 s) until `n` runs have arrived, then record this execution."""
    here = Path(folder)
    (here / f"{name}.arrived").touch()
    deadline = time.monotonic() + 120
    while len(list(here.glob("*.arrived"))) < n:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {len(list(here.glob('*.arrived')))} of {n} runs ever ran at once")
        time.sleep(0.05)
    with open(here / f"{name}.done", "a") as f:
        f.write(idempotency_key + "\n")
    return n


@daybook.workflow
def together(ctx: daybook.Context, folder: str, name: str, n: int) -> int:
    return int(ctx.effect(arrive, folder=folder, name=name, n=n))
