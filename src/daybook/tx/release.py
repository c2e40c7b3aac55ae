"""An operator releases a transaction attempt that holds its scopes with no execution to finish
it (its run parked, stuck, paused or cancelled before this release existed, or its owner gone):
`book.release_transaction(tx_id, by=, reason=)`, `daybook tx release ATTEMPT --as NAME --reason
TEXT`. The release is journaled in the run (`tx_released`: who, why, the status it left) with
the header's change to `aborted`, in one database transaction (store/tx_release.py).

Refused: an unknown attempt, one that has already ended, one whose commit was decided (its
flush must finish first: others would see half of it), and one whose run a live process is
executing (that process is still deciding it: pause or cancel the run first). A run that
executes again later aborts the released attempt where it finds it (its inverses run once) and
retries under a fresh epoch (atomix.py).
"""

from __future__ import annotations

import time
from typing import Any

from ..errors import ConfigError, TransactionNotFound
from ..records import RunStatus
from ..runtime.lease import is_dead_here
from ..store import Store
from ..store.tx_release import release_row
from ..store.tx_rows import OPEN


def release(store: Store, tx_id: str, by: str, reason: str) -> dict[str, Any]:
    """Release the open attempt `tx_id`; returns what it was (tx_id, run_id, epoch, scopes,
    the status it left)."""
    if not isinstance(by, str) or not by.strip():
        raise ConfigError("releasing a transaction needs who releases it (--as NAME)")
    if not isinstance(reason, str) or not reason.strip():
        raise ConfigError("releasing a transaction needs a reason (--reason TEXT); it is journaled")
    rows = [r for r in store.tx_rows(run_id=_run_of(tx_id)) if r[0] == tx_id]
    if not rows:
        raise TransactionNotFound(
            f"no transaction attempt {tx_id!r} in {store.url}; `daybook tx` lists them (column `transaction`)"
        )
    row = rows[0]
    if row[4] not in OPEN:
        raise ConfigError(f"transaction {tx_id} has already ended ({row[4]}): it holds no scope")
    if row[4] == "committing":
        raise ConfigError(
            f"transaction {tx_id}: its commit was decided and is being flushed; releasing it now "
            f"would show others a half-done commit. `daybook resume {row[1]}` finishes the flush "
            f"(settle a step it waits on with `daybook resolve` first), or `daybook cancel "
            f"{row[1]}` ends the run and releases it"
        )
    info = store.get_run(row[1])
    if info is not None and info.status == RunStatus.RUNNING and _live(info.lease_owner, info.lease_expires):
        raise ConfigError(
            f"transaction {tx_id}: run {row[1]!r} is executing it in a live process "
            f"({info.lease_owner}), which is still deciding it; `daybook pause {row[1]}` or "
            f"`daybook cancel {row[1]}` first (cancel releases its scopes itself)"
        )
    if not release_row(store, row, by.strip(), reason.strip()):
        raise ConfigError(f"transaction {tx_id} ended while it was being released: it holds no scope")
    return {"tx_id": tx_id, "run_id": row[1], "epoch": row[2], "scopes": row[3], "from": row[4]}


def _live(owner: str | None, expires: float | None) -> bool:
    return owner is not None and (expires or 0.0) > time.time() and not is_dead_here(owner)


def _run_of(tx_id: str) -> str | None:
    """The run an attempt id names (`RUN/tx/STEP`, or `RUN/spec/STEP/BRANCHSTEP` for a
    speculation's branch), so one run's headers are read, not the whole table."""
    at = max(tx_id.rfind("/tx/"), tx_id.rfind("/spec/"))
    return tx_id[:at] if at > 0 else None
