"""Reading what atomic commits left: committed records, the audit log of commits, and orphans
(staged records of transactions whose process died before committing), with their sweep."""

from __future__ import annotations

import json
import time

from ..records import JSON
from ..store import Store


def record(store: Store, collection: str, record_id: str) -> JSON:
    """A committed record (None if there is none)."""
    found = store.get_record(collection, record_id)
    return None if found is None else json.loads(found[0])


def commits(store: Store) -> list[dict[str, JSON]]:
    """The audit log of transactions, oldest first."""
    return [
        {"commit_id": c, "key": k, "message": m, "author": a, "at": at, "records": json.loads(r)}
        for c, k, m, a, at, r in store.commits()
    ]


def orphans(store: Store, older_than: float = 0.0) -> list[dict[str, JSON]]:
    """Staged records of transactions that never committed, older than `older_than` seconds."""
    cutoff = time.time() - older_than
    return [
        {"txid": t, "collection": c, "record_id": r, "at": at}
        for t, c, r, at in store.staging()
        if at <= cutoff
    ]


def sweep_orphans(store: Store, older_than: float) -> int:
    """Delete orphaned staging areas older than `older_than` seconds; returns how many
    transactions were swept (an open transaction younger than that is left alone)."""
    txids = {str(o["txid"]) for o in orphans(store, older_than)}
    for txid in txids:
        store.abandon_tx(txid)
    return len(txids)
