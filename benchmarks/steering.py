"""Steering latency: how soon a run acknowledges a revision, and what reading revisions costs.

- idle: the run takes short steps (10 ms each) and reads revisions between them; the figure is
  the time from `book.steer` to its acknowledgement, against `steer`'s own poll interval (50 ms).
- during a tool call: the revision arrives 0.2 s into a 1 s call; the figure is the time to the
  acknowledgement against the call's remaining time (the floor: it is read at the next boundary).
- pause: the time from `book.pause` to `paused` for an executing run, against the owner's
  heartbeat interval (lease_ttl / 3), which bounds when the request is seen.
- retract a running act: the time from `book.steer(..., "retract", target=TOOL)` to the tool's
  declared `cancel` stopping a 30 s call, against the heartbeat interval (lease_ttl / 3) that
  bounds when the retraction is seen.
- cost of `ctx.revisions()` with nothing new (one inbox read, nothing written), per call, as a
  ratio to a no-op durable effect step.

    python benchmarks/steering.py [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import daybook
from daybook import Daybook

POLL = 0.05  # book.steer looks for its acknowledgement this often


@daybook.tool
def work(*, seconds: float, i: int, idempotency_key: str) -> int:
    time.sleep(seconds)
    return i


STOPPED = threading.Event()


def _stop(**_: Any) -> None:
    STOPPED.set()


@daybook.tool(cancel=_stop, idempotent=True)
def long_call(*, seconds: float, idempotency_key: str) -> str:
    if STOPPED.wait(seconds):
        raise RuntimeError("stopped: nothing applied")
    return "done"


@daybook.workflow(name="bench_retracted")
def retracted(ctx: daybook.Context) -> str:
    try:
        return str(ctx.effect(long_call, seconds=30.0))
    except daybook.StepRetracted:
        return "retracted"


def _retract_latency(url: str, run_id: str, lease_ttl: float) -> float:
    STOPPED.clear()
    with Daybook(url, lease_ttl=lease_ttl) as book:
        runner = threading.Thread(target=book.run, args=(retracted,), kwargs={"run_id": run_id})
        runner.start()
        time.sleep(0.3)
        start = time.perf_counter()
        book.steer(run_id, "retract", "skip it", author="bench", target="long_call", wait=0)
        if not STOPPED.wait(30):
            raise RuntimeError(f"the running call of {run_id} was never stopped")
        took = time.perf_counter() - start
        runner.join()
    return took


@daybook.workflow(name="bench_steered")
def steered(ctx: daybook.Context, steps: int, seconds: float) -> int:
    heard = 0
    for i in range(steps):
        heard += len(ctx.revisions())
        ctx.effect(work, seconds=seconds, i=i)
    return heard


@daybook.workflow(name="bench_reads")
def reads(ctx: daybook.Context, n: int, with_revisions: bool) -> int:
    for i in range(n):
        if with_revisions:
            ctx.revisions()
        ctx.effect(work, seconds=0.0, i=i)
    return n


def _ack_latency(url: str, run_id: str, steps: int, seconds: float, delay: float) -> float:
    with Daybook(url) as book:
        runner = threading.Thread(target=book.run, args=(steered, steps, seconds), kwargs={"run_id": run_id})
        runner.start()
        time.sleep(delay)
        start = time.perf_counter()
        ack = book.steer(run_id, "add", "also include X", author="bench", wait=30)
        took = time.perf_counter() - start
        runner.join()
        if not ack["acked"]:
            raise RuntimeError(f"revision to {run_id} was not acknowledged")
    return took


def _pause_latency(url: str, run_id: str, lease_ttl: float) -> float:
    with Daybook(url, lease_ttl=lease_ttl) as book:
        runner = threading.Thread(target=_swallow, args=(book, run_id))
        runner.start()
        time.sleep(0.3)
        start = time.perf_counter()
        book.pause(run_id)
        while book.get_run(run_id).status != "paused":
            time.sleep(0.005)
        took = time.perf_counter() - start
        runner.join()
    return took


def _swallow(book: Daybook, run_id: str) -> None:
    with contextlib.suppress(daybook.RunPaused):  # the point: it is paused mid-run
        book.run(steered, 400, 0.01, run_id=run_id)


def _read_cost(url: str, n: int, with_revisions: bool) -> float:
    with Daybook(url) as book:
        start = time.perf_counter()
        book.run(reads, n, with_revisions)
        return (time.perf_counter() - start) / n


def measure(quick: bool) -> list[dict[str, Any]]:
    repeats = 3 if quick else 7
    n = 300 if quick else 1000
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="daybook-steer-") as tmp:
        url = f"sqlite:///{Path(tmp) / 'steer.db'}"
        idle = [_ack_latency(url, f"idle-{r}", 60, 0.01, 0.2) for r in range(repeats)]
        during = [_ack_latency(url, f"call-{r}", 2, 1.0, 0.2) for r in range(repeats)]
        pause = [_pause_latency(url, f"pause-{r}", 1.5) for r in range(repeats)]
        cancel = [_retract_latency(url, f"retract-{r}", 1.5) for r in range(repeats)]
        # Interleaved, so a busy machine weighs on both the same.
        pairs = [(_read_cost(url, n, False), _read_cost(url, n, True)) for _ in range(repeats)]
        plain = statistics.median(p for p, _ in pairs)
        steered_cost = statistics.median(s for _, s in pairs)
    rows.append(_row("ack_when_idle", idle, POLL, "steer poll interval"))
    rows.append(_row("ack_during_1s_tool_call", during, 0.8, "remaining tool time"))
    rows.append(_row("pause_when_executing", pause, 0.5, "heartbeat interval (lease_ttl/3)"))
    rows.append(_row("retract_running_act", cancel, 0.5, "heartbeat interval (lease_ttl/3)"))
    rows.append(
        {
            "measure": "revisions_read_cost",
            "backend": "sqlite",
            "n": n,
            "us_per_step_plain": round(plain * 1e6, 1),
            "us_per_step_with_revisions": round(steered_cost * 1e6, 1),
            "ratio_to_floor": round(steered_cost / plain, 2),
            "floor": "the same steps without ctx.revisions()",
        }
    )
    return rows


def _row(measure: str, values: list[float], floor: float, what: str) -> dict[str, Any]:
    med = statistics.median(values)
    return {
        "measure": measure,
        "backend": "sqlite",
        "runs": len(values),
        "median_ms": round(med * 1000, 1),
        "max_ms": round(max(values) * 1000, 1),
        "floor_ms": round(floor * 1000, 1),
        "floor": what,
        "ratio_to_floor": round(med / floor, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None)
    opts = parser.parse_args()
    rows = measure(opts.quick)
    print(f"{'measure':<28} {'median':>10} {'max':>10} {'floor':>10}  ratio  (floor)")
    for r in rows:
        if "median_ms" in r:
            print(
                f"{r['measure']:<28} {r['median_ms']:>8} ms {r['max_ms']:>7} ms {r['floor_ms']:>7} ms  "
                f"{r['ratio_to_floor']:>5}  ({r['floor']})"
            )
        else:
            print(
                f"{r['measure']:<28} {r['us_per_step_with_revisions']:>8} us {'':>10} "
                f"{r['us_per_step_plain']:>7} us  {r['ratio_to_floor']:>5}  ({r['floor']})"
            )
    if opts.json:
        Path(opts.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    sys.exit(main())
