"""Cron schedules: each firing starts exactly one run, whichever workers are up.

A schedule (`book.schedule(name, workflow, cron="0 6 * * *", args=...)`) is kept in the store.
Every worker looks at the schedules as it polls; for each firing time that has come it creates
the run `sched:<name>:<firing time, UTC>`. That id is the run's primary key, so two workers that
see the same firing create one run between them, and a restart never starts a firing twice.
Then the schedule's last handled firing moves forward (never back).

A worker that was down finds the firings it missed and applies the schedule's `catchup`:
`"skip"` (default) starts only firings at most `grace` seconds late, `"all"` starts every one
(at most `MAX_CATCHUP` per look). Cron expressions are parsed by `croniter` (five fields, or six
with seconds last); times are UTC.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from ..records import JSON, bounded, check_json, check_text
from ..runtime.start import new_run
from ..runtime.workflow import Apps, Workflow, load
from ..store import Store
from .queues import queue_name, start_pending

CATCHUP = ("skip", "all")
MAX_CATCHUP = 1000
MAX_GRACE = 366 * 86_400.0


def _croniter() -> Any:
    try:
        from croniter import croniter  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - exercised only without the extra installed
        raise ConfigError(
            "schedules need croniter: pip install 'daybook-runtime[schedule]' (or pip install croniter)"
        ) from None
    return croniter


@dataclass(frozen=True)
class Schedule:
    """A schedule as stored, with its next firing time (epoch seconds)."""

    name: str
    workflow: str
    cron: str
    args: list[JSON]
    kwargs: dict[str, JSON]
    queue: str | None
    catchup: str
    grace: float
    paused: bool
    last_fired: float
    next_at: float | None

    def as_dict(self) -> dict[str, JSON]:
        return dataclasses.asdict(self)


def firing_id(name: str, at: float) -> str:
    """The run id of a schedule's firing at `at`: names the schedule and the time (UTC)."""
    stamp = datetime.datetime.fromtimestamp(at, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"sched:{name}:{stamp}"


def add(
    store: Store,
    name: str,
    wf: Workflow[Any],
    cron: str,
    args: Sequence[JSON] = (),
    kwargs: dict[str, JSON] | None = None,
    *,
    queue: str | None = None,
    catchup: str = "skip",
    grace: float = 60.0,
) -> Schedule:
    """Add schedule `name` (or redefine it: it keeps its pause and its last firing)."""
    if not isinstance(name, str) or not name or len(name) > 100:
        raise ConfigError(f"a schedule name is a non-empty string of at most 100 characters, got {name!r}")
    check_text(name, "the schedule name")
    if not isinstance(cron, str) or not _croniter().is_valid(cron):
        raise ConfigError(
            f"cron {cron!r} is not a cron expression: five fields (minute hour day month weekday, "
            "e.g. '0 6 * * *'), or six with seconds last (e.g. '* * * * * */10')"
        )
    if catchup not in CATCHUP:
        raise ConfigError(f"catchup must be 'skip' or 'all', not {catchup!r}")
    grace = bounded(grace, "grace (seconds)", low=0.0, high=MAX_GRACE)
    run_input = {"args": list(args), "kwargs": dict(kwargs or {})}
    check_json(run_input, f"schedule {name!r} input")
    now = time.time()
    row = {
        "name": name, "workflow": wf.name, "ref": wf.ref, "cron": cron,
        "input": json.dumps(run_input), "queue": None if queue is None else queue_name(queue),
        "catchup": catchup, "grace": grace, "paused": 0, "last_fired": now,
        "created_at": now, "updated_at": now,
    }  # fmt: skip
    store.put_schedule(row)
    return next(s for s in listing(store) if s.name == name)


def listing(store: Store) -> list[Schedule]:
    return [_schedule(row) for row in store.schedule_rows()]


def _schedule(row: dict[str, Any]) -> Schedule:
    run_input = json.loads(row["input"])
    last = float(row["last_fired"])
    return Schedule(
        name=row["name"],
        workflow=row["workflow"],
        cron=row["cron"],
        args=run_input["args"],
        kwargs=run_input["kwargs"],
        queue=row["queue"],
        catchup=row["catchup"],
        grace=float(row["grace"]),
        paused=bool(row["paused"]),
        last_fired=last,
        next_at=None if row["paused"] else float(_croniter()(row["cron"], last).get_next(float)),
    )


def due(row: dict[str, Any], now: float) -> list[float]:
    """The schedule's firing times after its last handled one, up to `now` (at most MAX_CATCHUP)."""
    it = _croniter()(row["cron"], float(row["last_fired"]))
    times: list[float] = []
    while len(times) < MAX_CATCHUP:
        at = float(it.get_next(float))
        if at > now:
            break
        times.append(at)
    return times


def fire_due(
    store: Store,
    owner: str,
    apps: Apps = None,
    now: float | None = None,
    echo: Callable[[str], None] | None = None,
) -> list[str]:
    """Start the runs of every firing that has come (see the module docstring); returns the ids
    of the runs this call created. A schedule whose workflow this process cannot load is left
    for a worker that can."""
    now = time.time() if now is None else now
    say = echo or (lambda _line: None)
    started: list[str] = []
    for row in store.schedule_rows():
        times = [] if row["paused"] else due(row, now)
        if not times:
            continue
        try:
            wf = load(row["workflow"], row["ref"], apps)
        except ConfigError as exc:
            say(f"schedule {row['name']}: not fired here: {exc}")
            continue
        run_input = json.loads(row["input"])
        for at in times:
            if row["catchup"] == "skip" and now - at > float(row["grace"]):
                say(f"schedule {row['name']}: skipped the firing of {firing_id(row['name'], at)[6:]}")
                continue
            info, first = new_run(
                wf, firing_id(row["name"], at), tuple(run_input["args"]), run_input["kwargs"],
                owner=owner, lease_ttl=0.0, pending=True,
            )  # fmt: skip
            if start_pending(store, dataclasses.replace(info, queue=row["queue"]), first):
                started.append(info.run_id)
        store.advance_schedule(row["name"], times[-1])
    return started
