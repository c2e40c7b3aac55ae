"""Speculation workloads (Best-of-K) on shared local resources, with a daybook side
(`ctx.speculate`: each branch its own transaction, staged writes, held emails, holds undone by
their inverse) and a baseline side (branches act straight on the resource). A SQLite trigger on
the shared table is the observer: it records every version any reader could have seen."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path
from typing import Any

from resources import Op, SqliteStore
from services import Service, post
from smtp import SmtpSink

import daybook


class Observed(SqliteStore):
    """The shared store with an observer: after every write (and after a CR restore, which calls
    `observe`) it reads the run's rows back, as any other reader could, and logs each version it
    sees. The log lives outside the database, so a CR rollback cannot erase what was seen."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self._seen: list[tuple[str, int]] = []
        self._lock = threading.Lock()

    def observe(self, prefix: str) -> None:
        """Read back the rows of one run (names `<run>:...`) and log each version seen."""
        # A key range (not LIKE) so that SQLite reads the run's rows through the primary key.
        upper = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        with self._db() as db:
            query = "SELECT name, value FROM kv WHERE name >= ? AND name < ?"
            rows = db.execute(query, (prefix, upper)).fetchall()
        with self._lock:
            self._seen.extend((n, v) for n, v in rows)

    def apply(self, op: Op, key: str | None) -> Any:
        before = super().apply(op, key)
        self.observe(op.name.split(":")[0] + ":")
        return before

    def undo(self, name: str, before: Any) -> None:
        super().undo(name, before)
        self.observe(name.split(":")[0] + ":")

    def seen(self, prefix: str) -> list[tuple[str, int]]:
        with self._lock:
            return [(n, v) for n, v in self._seen if n.startswith(prefix)]

    def now(self, prefix: str) -> dict[str, int]:
        return {n: v for n, v in self.state().items() if n.startswith(prefix)}


SHARED: dict[str, Any] = {}  # the experiment's shared resources, found by the daybook tools
TIMES: dict[str, list[float]] = {}  # branch start/end stamps for Table 6 (not journaled)
_LOCK = threading.Lock()


@daybook.tool(bufferable=True, idempotent=True, irreversible=False)
def spec_write(*, name: str, value: int, idempotency_key: str) -> None:
    SHARED["store"].apply(Op("set", name, value), idempotency_key)


@daybook.tool(bufferable=True, idempotent=True, irreversible=False)
def spec_file(*, path: str, text: str, idempotency_key: str) -> None:
    Path(path).write_text(text)


@daybook.tool(idempotent=True, irreversible=False)
def spec_cancel_hold(*, original: dict[str, Any], result: dict[str, Any], idempotency_key: str) -> None:
    post(f"{SHARED['travel'].url}/cancel_hold", {"hold": result["id"]})


@daybook.tool(inverse=spec_cancel_hold, idempotent=True)
def spec_hold(*, run: str, branch: str, price: int, idempotency_key: str) -> dict[str, Any]:
    body = {"branch": f"{run}:{branch}", "price": price}
    hold: dict[str, Any] = post(f"{SHARED['travel'].url}/hold", body, idempotency_key)
    return hold


@daybook.tool(irreversible=True)
def spec_email(*, run: str, logical: str, idempotency_key: str) -> str:
    sink: SmtpSink = SHARED["smtp"]
    return sink.send(logical=logical, run=run, message_id=f"<{idempotency_key}@daybook>")


def _best(results: dict[str, Any]) -> str:
    return max(results, key=lambda k: (results[k]["score"], k))


@daybook.workflow(name="atomix_spec_store")
def spec_store(ctx: daybook.Context, run: str, scores: list[int]) -> dict[str, Any]:
    def branch(j: int) -> Any:
        def fn(c: daybook.Context) -> dict[str, Any]:
            c.effect(spec_write, name=f"{run}:x", value=j + 1)
            return {"score": scores[j]}

        return fn

    return dict(ctx.speculate({f"b{j}": branch(j) for j in range(len(scores))}, choose=_best))


@daybook.workflow(name="atomix_spec_files")
def spec_files(ctx: daybook.Context, root: str, run: str, scores: list[int]) -> dict[str, Any]:
    def branch(j: int) -> Any:
        def fn(c: daybook.Context) -> dict[str, Any]:
            c.effect(spec_file, path=f"{root}/{run}-b{j}.txt", text=f"branch {j}")
            return {"score": scores[j]}

        return fn

    return dict(ctx.speculate({f"b{j}": branch(j) for j in range(len(scores))}, choose=_best))


@daybook.workflow(name="atomix_spec_page")
def spec_page(ctx: daybook.Context, run: str, steps: list[list[int]]) -> int:
    """Table 3, k branches per step over 5 page elements: each branch writes the step's element
    with its own value; the best score wins the step."""
    for i, scores in enumerate(steps):

        def branch(j: int, i: int = i, scores: list[int] = scores) -> Any:
            def fn(c: daybook.Context) -> dict[str, Any]:
                c.effect(spec_write, name=f"{run}:el-{i % 5}", value=100 * i + j + 1)
                return {"score": scores[j]}

            return fn

        ctx.speculate({f"b{j}": branch(j) for j in range(len(scores))}, choose=_best)
    return len(steps)


@daybook.workflow(name="atomix_spec_travel")
def spec_travel(ctx: daybook.Context, run: str, prices: list[int]) -> dict[str, Any]:
    """Fig. 1: three branches hold a trip at the provider; the cheapest wins; each branch's
    confirmation email is held and only the winner's is released, at its commit."""

    def branch(j: int) -> Any:
        def fn(c: daybook.Context) -> dict[str, Any]:
            hold = c.effect(spec_hold, run=run, branch=f"b{j}", price=prices[j])
            c.effect(spec_email, run=run, logical=f"{run}:confirm")
            return {"score": -prices[j], "hold": hold["id"]}

        return fn

    return dict(ctx.speculate({f"b{j}": branch(j) for j in range(len(prices))}, choose=_best))


@daybook.workflow(name="atomix_spec_noop")
def spec_noop(ctx: daybook.Context, run: str, k: int) -> dict[str, Any]:
    """Table 6: K no-op branches; stamps when the first branch starts and the last one ends."""

    def branch(j: int) -> Any:
        def fn(c: daybook.Context) -> dict[str, Any]:
            with _LOCK:
                TIMES.setdefault(run, []).append(time.perf_counter())
            return {"score": j}

        return fn

    began = time.perf_counter()
    won = dict(ctx.speculate({f"b{j}": branch(j) for j in range(k)}, choose=_best))
    with _LOCK:
        TIMES.setdefault(run + "/call", []).extend([began, time.perf_counter()])
    return won


def scores(rng: random.Random, k: int) -> list[int]:
    return rng.sample(range(1000), k)


def baseline_branches(
    store: SqliteStore, name: str, values: list[int], order: list[int]
) -> list[tuple[int, Any]]:
    """Branches writing straight to the shared row in `order` (an interleaving); returns each
    write's (branch, before-image)."""
    return [(j, store.apply(Op("set", name, values[j]), None)) for j in order]


def open_shared(root: Path, smtp: bool = False, travel: bool = False) -> None:
    SHARED["store"] = Observed(root / "shared.db")
    if smtp:
        SHARED["smtp"] = SmtpSink(root / "smtp")
    if travel:
        SHARED["travel"] = Service("travel", root / "travel")


def close_shared() -> None:
    if "smtp" in SHARED:
        SHARED.pop("smtp").stop()
    if "travel" in SHARED:
        SHARED.pop("travel").stop()
    SHARED.pop("store", None)
