"""The workflow run.py crashes and then resumes: N no-op effects.

It imports only daybook, so that `python -m daybook resume RUN --db URL` in a fresh process,
which finds the workflow through the script path stored with the run, loads nothing else.

    python benchmarks/noop_app.py URL RUN_ID N   # run N effects, then SIGKILL this process
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

import daybook

CALLS = 0  # tool calls made by this process: a replay must make none
BODY_S = 0.0  # the last workflow body's own time, first effect to last (as peers.md times peers)
_CRASH_AFTER_EFFECTS = False  # set when run as a script


@daybook.tool
def bench_noop(i: int, idempotency_key: str) -> dict[str, Any]:
    global CALLS
    CALLS += 1
    return {"ok": True, "i": i}


@daybook.workflow
def bench_noop_steps(ctx: daybook.Context, n: int) -> dict[str, int]:
    global BODY_S
    start = time.perf_counter()
    for i in range(n):
        ctx.effect(bench_noop, i=i)
    BODY_S = time.perf_counter() - start
    if _CRASH_AFTER_EFFECTS:
        os.kill(os.getpid(), signal.SIGKILL)
    return {"steps": n}


def main(argv: list[str]) -> None:
    global _CRASH_AFTER_EFFECTS
    url, run_id, n = argv
    _CRASH_AFTER_EFFECTS = True
    daybook.Daybook(url).run(bench_noop_steps, int(n), run_id=run_id)
    raise SystemExit("the workflow should have killed this process")


if __name__ == "__main__":
    main(sys.argv[1:])
