"""Retention (`daybook gc`): erase the payloads of finished runs past a cutoff, keep the spine.

What goes: every journal row's `data` of a finished run (completed, failed, cancelled, expired) last
updated before the cutoff, replaced by `{"$erased": "<gc id>", "digest": "hmac-sha256:..."}`
(a keyed digest of what was there, so an auditor holding a copy can still prove which payload
it was), and the run header's input, result and error. What stays: run ids, kinds, step names,
keys, statuses, attempts, fingerprints, times and the decision links, i.e. the audit spine.

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
from .keys import digest

Exec = Callable[[str, Sequence[Any]], Any]
MAX_RETENTION = 100 * 365 * 86_400.0

FINISHED = "('completed', 'failed', 'cancelled', 'expired')"
_DUE = (
    f"SELECT run_id FROM daybook_runs WHERE status IN {FINISHED} AND updated_at < %s "
    "AND NOT EXISTS (SELECT 1 FROM daybook_gc g WHERE g.run_id = daybook_runs.run_id) "
    "ORDER BY updated_at, run_id"
)
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
    runs = [str(r[0]) for r in execute(_DUE, (cutoff,)).fetchall()]
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
        # Search attributes are an index of journal payloads (`ctx.set_attributes`): erased too.
        execute("DELETE FROM daybook_attributes WHERE run_id = %s", (run_id,))
    if not dry_run:
        execute(_LOG, (gc_id, None, who, now, cutoff, len(runs), rows))
    return {"gc_id": gc_id, "who": who, "at": now, "cutoff": cutoff, "runs": len(runs), "rows": rows,
            "run_ids": runs, "dry_run": dry_run}  # fmt: skip


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
