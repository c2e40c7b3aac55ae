"""Erasure of approval requests: gc's pass over the approval outbox (`gates.outbox`).

An approval request is a coordination entity `daybook.outbox/<run id>/<gate>/<n>` whose log
holds the request (the gated act's `about`, approvers, facts) and its delivery record. When gc
erases a run (store/retention.py), the `request` row of each of that run's entries becomes
`{"$erased": "<gc id>", "run_id": ..., "key": ..., "gate_id": ..., "digest": "hmac-sha256:..."}`
plus the request's spine when it is readable in clear (`action`, `reason`, `n`, `opened`,
`deadline`; a payload codec's envelope is not opened here). What stays is what the audit needs:
the entity's name (the delivery key), every row's time, agent and action, and the delivery rows
(`attempt`, `failed`, `delivered`, `gave_up`: sink names, try numbers, the sinks' errors).

A request nobody delivered or gave up yet is given up first, in the same transaction: a
`gave_up` row for every sink (`EVERY_SINK`), so no deliverer sends it after its payload is gone
and `daybook outbox list` shows it `undelivered`. A request of a run an earlier gc erased (before
gc knew the outbox) is erased by the next pass.

The entity log stays append-only: its update trigger lets only a `request` row of an outbox
entity change, only to an erasure mark whose `run_id` owns the entity's name, has a row in the
gc log and is finished. The otel export cursor (`daybook.otel:<run>`) is not touched: its
rows hold export seqs and span counts, no payload (docs/observability.md).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from .codec import ENVELOPE
from .keys import digest

Exec = Callable[[str, Sequence[Any]], Any]

# The reserved entity-name prefix of approval requests (`gates.outbox.PREFIX` is this one).
OUTBOX = "daybook.outbox/"
# The sink name of a `gave_up` row that stands for every sink (gc's: the payload is gone).
EVERY_SINK = "*"
# The request's fields an erasure mark keeps: the audit spine, no payload.
_SPINE = ("gate_id", "action", "reason", "n", "opened", "deadline")
_AGENT = "daybook:gc"
_REQUESTS = (
    "SELECT name, id FROM daybook_entity_log WHERE action = 'request' "
    "AND name LIKE %s AND data::text NOT LIKE %s ORDER BY id"
)
_ACTIONS = "SELECT action FROM daybook_entity_log WHERE name = %s"
_BATCH = 500


def erase_requests(
    execute: Exec,
    runs: Sequence[str],
    *,
    gc_id: str,
    now: float,
    key: bytes,
    dry_run: bool,
    cast: str = "",
) -> dict[str, int]:
    """Erase the approval requests of `runs` (this pass's) and of runs an earlier pass erased;
    give up those still pending first. Returns how many were erased (`requests`) and given up
    (`given_up`); `dry_run` only counts. The gc log rows of `runs` must be written already."""
    found = execute(_REQUESTS, (OUTBOX + "%", '{"$erased":%')).fetchall()
    if not found:
        return {"requests": 0, "given_up": 0}
    owners = _owners([str(r[0]) for r in found], execute)
    due = set(runs) | _erased_before(execute, set(owners.values()))
    erased = given_up = 0
    for name, row_id in found:
        run_id = owners.get(str(name))
        if run_id is None or run_id not in due:
            continue
        erased += 1
        actions = {str(a) for (a,) in execute(_ACTIONS, (name,))}
        pending = not actions & {"delivered", "gave_up"}
        given_up += pending
        if dry_run:
            continue
        if pending:
            _give_up(execute, str(name), gc_id, now, cast)
        # Read only now: a live run's requests (most of them) are never read by gc.
        [(data,)] = execute("SELECT data FROM daybook_entity_log WHERE id = %s", (row_id,)).fetchall()
        text = data if isinstance(data, str) else json.dumps(data)
        mark = json.dumps(_mark(gc_id, run_id, str(name), text, key))
        execute(f"UPDATE daybook_entity_log SET data = %s{cast} WHERE id = %s", (mark, row_id))
    return {"requests": erased, "given_up": given_up}


def _mark(gc_id: str, run_id: str, name: str, text: str, key: bytes) -> dict[str, Any]:
    """The erasure mark of a request: what erased it, whose it was, its spine, a keyed digest."""
    delivery = name.removeprefix(OUTBOX)
    mark: dict[str, Any] = {"$erased": gc_id, "run_id": run_id, "key": delivery}
    mark["gate_id"] = delivery.rpartition("/")[0]
    try:
        request = json.loads(text)
    except ValueError:
        request = None
    if isinstance(request, dict) and ENVELOPE not in request:
        mark.update({k: request[k] for k in _SPINE if k in request})
    mark["digest"] = digest(key, text)
    return mark


def _give_up(execute: Exec, name: str, gc_id: str, now: float, cast: str) -> None:
    """Record that no sink will deliver request `name`: its payload is being erased."""
    row = execute("SELECT updated_at FROM daybook_entities WHERE name = %s", (name,)).fetchone()
    at = now if row is None else max(now, float(row[0]))  # the log's times never go backwards
    error = f"the run's payloads were erased by gc {gc_id} before this request was delivered"
    data = json.dumps({"sink": EVERY_SINK, "error": error})
    execute(
        f"INSERT INTO daybook_entity_log (name, at, agent, action, data) VALUES (%s, %s, %s, %s, %s{cast})",
        (name, at, _AGENT, "gave_up", data),
    )
    execute("UPDATE daybook_entities SET updated_at = %s WHERE name = %s", (at, name))


def _owners(names: list[str], execute: Exec) -> dict[str, str]:
    """The run each outbox entity belongs to: the longest run id R that exists with the name
    starting `daybook.outbox/R/` (a run id may hold '/': run `a` does not own `a/b`'s requests)."""
    candidates: dict[str, list[str]] = {}
    for name in names:
        rest = name.removeprefix(OUTBOX)
        cuts = [i for i, c in enumerate(rest) if c == "/"]
        candidates[name] = [rest[:i] for i in reversed(cuts)]  # longest first
    wanted = sorted({c for cs in candidates.values() for c in cs})
    known = _among(execute, "daybook_runs", wanted)
    owners: dict[str, str] = {}
    for name, cs in candidates.items():
        owner = next((c for c in cs if c in known), None)
        if owner is not None:
            owners[name] = owner
    return owners


def _erased_before(execute: Exec, run_ids: set[str]) -> set[str]:
    """The runs of `run_ids` an earlier gc pass erased."""
    return _among(execute, "daybook_gc", sorted(run_ids))


def _among(execute: Exec, table: str, run_ids: list[str]) -> set[str]:
    """The run ids of `run_ids` that `table` holds (a few hundred a statement)."""
    found: set[str] = set()
    for i in range(0, len(run_ids), _BATCH):
        part = run_ids[i : i + _BATCH]
        marks = ", ".join(["%s"] * len(part))
        found.update(
            str(r[0]) for r in execute(f"SELECT run_id FROM {table} WHERE run_id IN ({marks})", part)
        )
    return found
