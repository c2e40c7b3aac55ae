"""Retention (`daybook gc`): erase the payloads of finished runs past a cutoff, keep the spine.

What goes: every journal row's `data` of a finished run (completed, failed, cancelled, expired) last
updated before the cutoff, replaced by `{"$erased": "<gc id>", "digest": "hmac-sha256:..."}`
(a keyed digest of what was there, so an auditor holding a copy can still prove which payload
it was), the run header's input, result and error, and its stream chunks' values (each
`{"$erased": "<gc id>"}`; their keys and cursors stay). What stays: run ids, kinds, step names,
keys, statuses, attempts, fingerprints, times and the decision links, i.e. the audit spine.
Its approval requests in the outbox are erased the same way (store/erasure.py).
A finished run that a run which can still go on reads (`still_read`: a child, a fork's source,
an earlier segment of a live chain) is kept until that run is over.

The journal stays append-only for everything else: the schema's update trigger lets a row's
`data` change only to an erasure mark, only for a finished run, and only once the run has a row
in the append-only `daybook_gc` log, written in the same transaction. The log keeps who erased
what, when and under which cutoff: one row per run, and one summary row (no run id) per pass.
Both backends share this code; `Exec` runs one statement with `%s` placeholders.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import ConfigError
from ..records import JSON, bounded, check_text
from .erasure import erase_requests
from .keys import digest

Exec = Callable[[str, Sequence[Any]], Any]
MAX_RETENTION = 100 * 365 * 86_400.0

FINISHED = "('completed', 'failed', 'cancelled', 'expired')"
# A run that can still execute and read other runs' rows: anything but these (a `failed` run
# can be retried), unless gc already erased it.
_OVER = "('completed', 'cancelled', 'expired')"
_UNERASED = "NOT EXISTS (SELECT 1 FROM daybook_gc g WHERE g.run_id = {t}.run_id)"
_DUE = (
    f"SELECT r.run_id FROM daybook_runs r WHERE r.status IN {FINISHED} AND r.updated_at < %s "
    f"AND {_UNERASED.format(t='r')} ORDER BY r.updated_at, r.run_id"
)
# The children (recovery runs too) of runs that can still go on: a parent reads its child's result.
_CHILDREN = (
    "SELECT r.run_id FROM daybook_runs r JOIN daybook_runs p ON p.run_id = r.parent_run "
    f"WHERE p.status NOT IN {_OVER} AND {_UNERASED.format(t='p')}"
)
_LIVE = f"SELECT r.run_id FROM daybook_runs r WHERE r.status NOT IN {_OVER} AND {_UNERASED.format(t='r')}"
_FIRST_ROWS = (
    "SELECT e.run_id, e.data FROM daybook_events e JOIN daybook_runs r ON r.run_id = e.run_id "
    f"WHERE e.seq = 1 AND r.status NOT IN {_OVER} AND {_UNERASED.format(t='r')}"
)
_FIRST_ROW = "SELECT data FROM daybook_events WHERE run_id = %s AND seq = 1"
_LOG = (
    "INSERT INTO daybook_gc (gc_id, run_id, who, at, cutoff, runs, rows) VALUES (%s, %s, %s, %s, %s, %s, %s)"
)


def collect(
    execute: Exec,
    *,
    cutoff: float,
    now: float,
    who: str,
    gc_id: str,
    key: bytes,
    dry_run: bool,
    cast: str = "",
) -> dict[str, JSON]:
    """Erase the payloads of every finished run last updated before `cutoff` (see the module
    docstring); `dry_run` only counts. `cast` is the backend's JSON cast for a parameter."""
    due = [str(r[0]) for r in execute(_DUE, (cutoff,)).fetchall()]
    read = still_read(execute, due) if due else set()
    runs = [run_id for run_id in due if run_id not in read]
    rows = 0
    for run_id in runs:
        found = execute(
            "SELECT seq, data FROM daybook_events WHERE run_id = %s ORDER BY seq", (run_id,)
        ).fetchall()
        rows += len(found)
        if dry_run:
            continue
        execute(_LOG, (gc_id, run_id, who, now, cutoff, 1, len(found)))
        for seq, data in found:
            text = data if isinstance(data, str) else json.dumps(data)
            mark = json.dumps({"$erased": gc_id, "digest": digest(key, text)})
            execute(
                f"UPDATE daybook_events SET data = %s{cast} WHERE run_id = %s AND seq = %s",
                (mark, run_id, seq),
            )
        erased = json.dumps({"$erased": gc_id})
        execute(
            f"UPDATE daybook_runs SET input = %s{cast}, result = CASE WHEN result IS NULL THEN NULL "
            f"ELSE %s{cast} END, error = CASE WHEN error IS NULL THEN NULL ELSE %s{cast} END "
            "WHERE run_id = %s",
            (erased, erased, erased, run_id),
        )
        # A stream's chunks (`ctx.stream`) are payloads too: each becomes the pass's mark.
        execute(f"UPDATE daybook_chunks SET data = %s{cast} WHERE run_id = %s", (erased, run_id))
        # Search attributes are an index of journal payloads (`ctx.set_attributes`): erased too.
        execute("DELETE FROM daybook_attributes WHERE run_id = %s", (run_id,))
    # The approval requests of these runs (store/erasure.py): after the gc log rows, which
    # the entity log's trigger checks.
    outbox = erase_requests(execute, runs, gc_id=gc_id, now=now, key=key, dry_run=dry_run, cast=cast)
    if not dry_run:
        execute(_LOG, (gc_id, None, who, now, cutoff, len(runs), rows))
    return {"gc_id": gc_id, "who": who, "at": now, "cutoff": cutoff, "runs": len(runs), "rows": rows,
            "run_ids": runs, "kept": sorted(set(due) & read), "dry_run": dry_run, **outbox}  # fmt: skip


def still_read(execute: Exec, due: list[str]) -> set[str]:
    """The runs of `due` an unfinished run still reads: its children (a parent reads its child's
    result), the run a fork shares rows with (and its own source, for a fork of a fork), and
    the earlier segments of a continue-as-new chain whose live segment is `R~n` (`R`, `R~2`,
    ... `R~n-1`). A segment id is matched by its form, so a run merely named `x~2` keeps an `x`
    too: keeping costs disk, erasing what a run reads would cost the run."""
    chains: dict[str, int] = {}  # the base id of a live segment -> the highest live number
    for (run_id,) in execute(_LIVE, ()).fetchall():
        base, n = _segment(str(run_id))
        if n > 1:
            chains[base] = max(chains.get(base, 0), n)
    read = {run_id for run_id in due if _earlier_segment(run_id, chains)}
    read.update(str(r[0]) for r in execute(_CHILDREN, ()).fetchall())
    todo = [_fork_source(data) for _, data in execute(_FIRST_ROWS, ()).fetchall()]
    while todo:
        source = todo.pop()
        if source is None or source in read:
            continue
        read.add(source)
        found = execute(_FIRST_ROW, (source,)).fetchall()
        todo.extend(_fork_source(data) for (data,) in found)
    return read


def _segment(run_id: str) -> tuple[str, int]:
    """`R~n` -> (R, n); any other id -> (itself, 1): its place in a continue-as-new chain."""
    base, sep, n = run_id.rpartition("~")
    return (base, int(n)) if sep and n.isdigit() and int(n) >= 2 else (run_id, 1)


def _earlier_segment(run_id: str, chains: dict[str, int]) -> bool:
    base, n = _segment(run_id)
    return (n == 1 and run_id in chains) or (n > 1 and n < chains.get(base, 0))


def _fork_source(data: Any) -> str | None:
    """The run a journal's first row says it was forked from (`fork_of`, kept in clear by a
    payload codec as part of the audit spine), else None."""
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except ValueError:
            return None
    source = data.get("fork_of") if isinstance(data, dict) else None
    return source if isinstance(source, str) else None


def history(execute: Exec) -> list[dict[str, JSON]]:
    """Every gc pass, oldest first: who, when, the cutoff, how many runs and rows it erased."""
    rows = execute(
        "SELECT gc_id, who, at, cutoff, runs, rows FROM daybook_gc WHERE run_id IS NULL ORDER BY id", ()
    ).fetchall()
    keys = ("gc_id", "who", "at", "cutoff", "runs", "rows")
    return [dict(zip(keys, row, strict=True)) for row in rows]


def run(store: Any, older_than: float, dry_run: bool, who: str, key: bytes) -> dict[str, JSON]:
    """One gc pass on `store` (`book.gc`): the age checked, the pass named and timed."""
    seconds = bounded(older_than, "older_than (seconds)", low=0.0, high=MAX_RETENTION)
    if store.read_only and not dry_run:
        raise ConfigError("gc erases payloads, and this handle is read-only; open it without read_only")
    check_text(who, "gc's `by`")
    now = time.time()
    done: dict[str, JSON] = store.gc(now - seconds, now, who, f"gc-{uuid.uuid4().hex[:12]}", key, dry_run)
    return done
