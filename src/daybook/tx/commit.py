"""Atomic multi-record commits: several record writes, one change, one audit entry.

`book.transaction(message, fn)` gives `fn` a `Transaction`; each `tx.put(...)` is written durably
to a staging area at once (a crash does not lose it, and it is not visible). When `fn` returns,
the invariants are checked against the staged records and, if they hold, one store transaction
moves every staged record into place and appends one commit row (message, author, time, the
records touched). If `fn` raises or an invariant fails, the staged records are dropped and
nothing was ever visible. Staged records of a transaction whose process died are orphans:
`book.orphans()` lists them and `book.sweep_orphans(older_than)` deletes them.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..checks import checked
from ..errors import DaybookError
from ..records import JSON, check_json, dumps
from ..store import Store

Records = dict[tuple[str, str], JSON]


class InvariantViolated(DaybookError):
    """A transaction's invariant failed; nothing of it was committed."""


@dataclass(frozen=True)
class TxResult:
    result: Any
    commit_id: str
    records: list[tuple[str, str]]


@checked
@dataclass
class Transaction:
    store: Store
    txid: str
    staged: Records = field(default_factory=dict)

    def put(self, collection: str, record_id: str, data: JSON) -> None:
        """Stage a record (durable now, visible at commit)."""
        check_json(data, f"record {collection}/{record_id}")
        self.store.stage(self.txid, collection, record_id, dumps(data, "record"), time.time())
        self.staged[(collection, record_id)] = data

    def get(self, collection: str, record_id: str) -> JSON:
        """This transaction's staged value, else the committed one, else None."""
        if (collection, record_id) in self.staged:
            return self.staged[(collection, record_id)]
        found = self.store.get_record(collection, record_id)
        return None if found is None else json.loads(found[0])


def run_transaction(
    store: Store,
    message: str,
    fn: Callable[[Transaction], Any],
    *,
    author: str,
    key: str | None = None,
    invariants: Sequence[Callable[[Records], None]] = (),
) -> TxResult:
    if not message:
        raise DaybookError("a transaction needs a message: it is the audit entry's text")
    tx = Transaction(store, uuid.uuid4().hex)
    try:
        result = fn(tx)
        for invariant in invariants:
            invariant(dict(tx.staged))
    except BaseException:
        store.abandon_tx(tx.txid)
        raise
    commit_id, records = store.commit_tx(
        tx.txid, f"commit-{uuid.uuid4().hex[:12]}", key, message, author, time.time()
    )
    return TxResult(result, commit_id, [(c, r) for c, r in records])
