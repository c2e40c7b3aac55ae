"""One measured row: run a case to its injected failure, recover it under a method, audit it.

The failure run itself is not timed (the think delay is off): FM is measured from `recover` to
the recovered run's end, with the seeded think delay on each decision the recovery re-takes live,
and modeled as live actions x 1.2 s. The status labels are the paper's: ok, contract (recovered,
audit failed), no-recov (no local recovery: daybook parked the run with NonDeterminismError, the
journal refusing to replay committed consumers on a changed value), blocked (DART refused every
local checkpoint and fell back to a whole-task rerun).
"""

from __future__ import annotations

import time
import zlib
from dataclasses import asdict, dataclass, field
from typing import Any

import agent
import dart_resources as rs
from audit import Audit, audit, snapshot
from cases import Case, spec

from daybook import Daybook, NonDeterminismError, RecoveryPolicy, RunFailed
from daybook.errors import DaybookError

MODEL_S = 1.2  # modeled seconds per live decision (the paper's LLM-dominated FM)


@dataclass
class Row:
    domain: str
    cid: str
    regime: str
    kind: str
    repeat: int
    method: str
    action: str = ""
    instance: str | None = None
    checkpoint: str | None = None
    reason: str = ""
    replayed: int = 0
    upstream: int = 0
    preserved: int = 0
    dropped: list[str] = field(default_factory=list)
    blocked_ckpts: int = 0
    live: int = 0
    fm_ms: float = 0.0
    model_ms: float = 0.0
    status: str = ""
    error: str = ""
    recobs: bool = False
    safe: bool = False
    audit: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def policy_of(method: str) -> str | RecoveryPolicy:
    if method == "noblock":
        return RecoveryPolicy(blocking=False)
    if method == "force":
        # Restore the newest blocked checkpoint anyway (effects and consumers ignored), to audit
        # whether the block was needed (T19's false-block rule).
        return RecoveryPolicy(blocking=False, effects=False)
    return method


def fail(
    book: Daybook, case: Case, cp: rs.Counterparty, run: str, raw: str = "exception", strict: bool = True
) -> bool:
    """Run the case to its injected failure (untimed); False if the run absorbed it (daybook
    retries an idempotent call whose outcome is unknown, e.g. after a timeout)."""
    rs.arm(cp.res["db"], run, case.site, case.drift, raw)
    agent.THINK.reset(0.0, 0)
    try:
        book.run(agent.dartb_case, spec(case, run, cp.res), run_id=run)
    except RunFailed:
        return True
    if strict:
        raise AssertionError(f"{run}: the injected failure at {case.site!r} did not fail the run")
    return False


def measure(
    book: Daybook, case: Case, cp: rs.Counterparty, method: str, repeat: int, think: float, variant: int = 0
) -> Row:
    run = f"{case.cid}.r{repeat}.v{variant}.{method}"
    fail(book, case, cp, run)
    before = snapshot(cp.res["db"], run)
    row = Row(case.domain, case.cid, case.regime, case.kind, repeat, method)
    agent.THINK.reset(think, zlib.crc32(f"{case.cid}/{repeat}/{variant}".encode()), 0.25 + 0.05 * variant)
    # The plan first (a dry run): what the method would replay, even if it fails.
    plan = book.recover(run, policy=policy_of(method), dry_run=True)
    row.action, row.instance, row.checkpoint, row.reason = (
        plan.action,
        plan.instance,
        plan.checkpoint,
        plan.reason,
    )
    row.replayed, row.upstream, row.preserved = plan.replayed, plan.upstream, plan.preserved
    # The checkpoints the gate refused, from the plan: the recovery itself may stop (parked).
    row.blocked_ckpts = sum(1 for v in plan.verdicts if v["reason"] != "eligible")
    start = time.perf_counter()
    result = None
    try:
        rec = book.recover(run, policy=policy_of(method))
        result = rec.result
        row.action, row.instance, row.checkpoint, row.reason = (
            rec.action,
            rec.instance,
            rec.checkpoint,
            rec.reason,
        )
        row.replayed, row.upstream, row.preserved = rec.replayed, rec.upstream, rec.preserved
        row.dropped = list(rec.dropped)
        row.recobs = rec.action == "restore"
    except (NonDeterminismError, DaybookError) as exc:
        row.error = type(exc).__name__
    row.fm_ms = (time.perf_counter() - start) * 1000
    row.live = agent.THINK.live
    row.model_ms = row.live * MODEL_S * 1000
    found = audit(case, run, result, cp, before)
    row.audit = asdict(found)
    row.safe = found.safe(True, case.domain in ("etl", "travel"))
    row.status = _status(row, result, found)
    return row


def _status(row: Row, result: Any, found: Audit) -> str:
    if result is None:
        return "no-recov"
    if row.method == "dart" and row.action == "rerun":
        return "blocked" if row.safe else "contract"
    return "ok" if row.safe else "contract"
